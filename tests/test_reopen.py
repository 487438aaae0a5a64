"""A session the workbench's own agent ran, reopened: the same system prompt, plan, memory and tool
components as the live view showed, and nothing unattributed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from workbench.engine.config import Config
from workbench.engine.context import SessionContext
from workbench.engine.models import ToolUsePart
from workbench.engine.providers.scripted import Script
from workbench.engine.runner import prepare_run, script_path
from workbench.engine.store import Store

FIXED = ("system", "project", "memory", "skills", "tools")


async def approve(call: ToolUsePart) -> bool:
    return True


def test_a_reopened_engine_session_shows_the_breakdown_it_ran_with(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")
    # Archiving kept manual: the live estimator learned from requests whose messages an archive later
    # hid, a reopened one does not, so the two calibrations differ by a few tokens (a known gap).
    config = Config.model_validate({"strategies": {"archive": {"mode": "manual"}}})
    setup = prepare_run(store, config, session_id=None, scripted="demo", model=None,
                        workspace=None, approve=approve)
    script = Script.load(script_path("demo"))

    async def play() -> None:
        for turn in script.turns:
            await setup.agent.send(turn.user)

    asyncio.run(play())
    live = setup.agent.ctx.budget()
    session_id = setup.agent.ctx.session.id
    store.close()
    with Store(tmp_path / "w.db") as reopened:
        again = SessionContext.load(reopened, session_id).budget()
    assert {k: again.components[k] for k in FIXED} == {k: live.components[k] for k in FIXED}
    assert live.components["system"] > 0 and live.components["tools"] > 0
    assert again.components["unattributed"] == 0, "nothing of what the agent ran with is unattributed"
    assert abs(again.used - live.used) <= 0.01 * live.used
