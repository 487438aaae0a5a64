"""A session the workbench's own agent ran, reopened: the same system prompt, plan, memory and tool
components as the live view showed, and nothing unattributed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from workbench.engine import events as ev
from workbench.engine.agent.runner import prepare_run, script_path
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction_history import compaction_history
from workbench.engine.providers.scripted import Script
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import ToolUsePart
from workbench.engine.transcript.store import Store

FIXED = ("system", "project", "memory", "skills", "tools")


async def approve(call: ToolUsePart) -> bool:
    return True


def test_a_reopened_engine_session_shows_the_breakdown_it_ran_with(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")
    said: list[ev.Event] = []
    setup = prepare_run(store, Config(), session_id=None, scripted="demo", model=None,
                        workspace=None, approve=approve, on_event=said.append)
    script = Script.load(script_path("demo"))

    async def play() -> None:
        for turn in script.turns:
            await setup.agent.send(turn.user)

    asyncio.run(play())
    live = setup.agent.ctx.budget()
    session_id = setup.agent.ctx.session.id
    store.close()
    with Store(tmp_path / "w.db") as reopened:
        ctx = SessionContext.load(reopened, session_id)
        again = ctx.budget()
    # The compaction the run announced is the one its history lists.
    announced = [(e.before_tokens, e.after_tokens) for e in said if isinstance(e, ev.CompactionEnd) and not e.error]
    listed = [(c.before_tokens, c.after_tokens) for c in compaction_history(ctx)]
    assert announced and listed == announced
    assert {k: again.components[k] for k in FIXED} == {k: live.components[k] for k in FIXED}
    assert live.components["system"] > 0 and live.components["tools"] > 0
    assert again.components["unattributed"] == 0, "nothing of what the agent ran with is unattributed"
    # Every number the live view ended on, not only the fixed ones: a change the agent made (its
    # compaction, a pin) is dated when it was made, in memory as in the database.
    assert (again.used, again.components) == (live.used, live.components)
