"""The app says what a proxy's policy last did to the session shown, and ``workbench history --json`` says the same.

The proxy as a real server running a policy, the real ``anthropic`` SDK as the agent, the app under Pilot
following the store as the proxy writes it. The snapshot is of a stored proxied Claude Code session whose
first Read result a policy's plan pruned, sent by the proxy with the session's second request.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from claude_code_requests import PRUNED_AT, answer, recorded, send
from loopback_api import Reply, text
from proxy_support import proxied
from test_replay_policy import CONFIG_BODY, Agent, outputs
from test_tui_snapshots import SnapCompare, no_toasts, snap  # noqa: F401
from textual.pilot import Pilot
from tui_fixtures import SIZE, flat, frozen, isolated_dirs, settle, text_of, until  # noqa: F401

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.edit_price import queue_until_cold
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.policies import READY
from workbench.engine.plans.policy_activity import policy_activity
from workbench.engine.plans.replay import Policy
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.widgets.budget_panel import BudgetPanel

REPO = Path(__file__).resolve().parents[1]


def proxied_id(db: Path) -> str:
    with Store(db) as store:
        return next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")


def workbench(db: Path, *args: str) -> str:
    """A ``workbench`` command in another process, as a user in another terminal runs it: its output."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), *args],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def history_json(db: Path, session_id: str) -> dict[str, object]:
    result: dict[str, object] = json.loads(workbench(db, "history", session_id, "--json"))
    return result


def shown(app: WorkbenchApp) -> int:
    state = app.main_screen.screen_state
    return len(state.messages) if state is not None and state.session.source_format == "proxy" else -1


def panel(app: WorkbenchApp) -> str:
    return flat(text_of(app.main_screen.query_one(BudgetPanel)))


@pytest.mark.anyio
async def test_the_budget_panel_says_what_the_policy_did_as_the_proxy_does_it(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(*[Reply([text("done")]) for _ in range(8)])
        p.server.recorder.run_policy(Policy(name="eager", payback=1000, plan_every=1), Config())
        agent = Agent(p.url)

        async def turn(n: int, path: str) -> None:
            agent.turn(f"Turn {n}: look at it.", path)
            await asyncio.to_thread(agent.send)
            await asyncio.to_thread(p.settle)

        app = WorkbenchApp(Launch.proxy(p.db, p.url, policy="eager"))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await turn(0, "config.py")
            await until(pilot, lambda: shown(app) == 4, timeout=3.0)  # the read and its answer
            assert "policy eager on · nothing changed yet" in panel(app), "the policy is on before it acts"
            for n, path in enumerate(["a.py", "b.py", "config.py", "c.py", "d.py"], start=1):
                await turn(n, path)
            assert outputs(p.api.bodies[5])[0] == PRUNED_PLACEHOLDER, "the policy's edit reached request 6"
            await until(pilot, lambda: "policy eager · last: pruned 1 at request 6" in panel(app), timeout=3.0)
            await asyncio.to_thread(workbench, p.db, "undo", proxied_id(p.db))
            await until(pilot, lambda: "at request 6" in panel(app) and "undone)" in panel(app), timeout=3.0)
            await asyncio.to_thread(workbench, p.db, "redo", proxied_id(p.db))
            await until(pilot, lambda: "undone" not in panel(app), timeout=3.0)
        found = history_json(p.db, proxied_id(p.db))
    policy = found["policy"]
    assert isinstance(policy, dict)
    assert policy["policy"] == "eager" and policy["state"] == "applied" and policy["request"] == 6
    assert policy["changes"] == {"prune": 1} and policy["tokens_saved"] > 0
    applied = [e for e in found["history"] if isinstance(e, dict) and e["origin"] == "policy"]  # type: ignore[union-attr]
    assert applied[-1]["plan_id"] == policy["plan_id"]


def test_history_says_no_policy_acted_when_none_ran(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("done")]))
        agent = Agent(p.url)
        agent.turn("Turn 0: look at it.", "config.py")
        agent.send()
        p.settle()
        found = history_json(p.db, proxied_id(p.db))
    assert found["policy"] is None
    assert CONFIG_BODY in outputs(p.api.bodies[0])


@pytest.fixture
def policy_launch(tmp_path: Path) -> Iterator[Launch]:
    """A proxied Claude Code session of two requests; a policy's plan pruned the first Read result and the proxy
    sent it with the second request. Request times are set so every run draws the same."""
    bodies = recorded()
    final = {"role": "assistant", "content": [{"type": "text", "text": "The file says the word is pelican."}]}
    with proxied(tmp_path) as p:
        p.api.queue(answer(bodies[3], 6, input_tokens=12, cache_creation_input_tokens=9_800, output_tokens=40),
                    Reply(final["content"], input_tokens=30, cache_read_input_tokens=9_700,
                          cache_creation_input_tokens=150, output_tokens=12))
        p.server.recorder.run_policy(Policy(plan_every=1000), Config())  # sends ready edits, plans nothing here
        send(p.url, bodies[2])
        p.settle()
        session_id = proxied_id(p.db)
        with Store(p.db) as store:
            ctx = SessionContext.load(store, session_id, Config())
            plan = plan_action(ctx, "prune", ctx.messages[PRUNED_AT], Config().strategies)
            plan.origin, plan.strategy = "policy", "policy default"
            plan = measure(ctx, plan)
            queue_until_cold(ctx, plan)  # as ``run_policy`` queues a plan that pays at once
            for item in plan.items:
                item.data = {**(item.data or {}), READY: True}
            apply(store, ctx, plan)
        send(p.url, bodies[3])
        p.settle()
        assert p.api.bodies[-1]["messages"][3]["content"][0]["content"] == PRUNED_PLACEHOLDER
    with Store(p.db) as store, store.transaction():
        for seq, moment in ((1, "2026-11-28T09:30:00+00:00"), (2, "2026-11-28T09:31:05+00:00")):
            store.connection.execute("UPDATE requests SET created_at = ? WHERE session_id = ? AND seq = ?",
                                     [moment, session_id, seq])
        activity = policy_activity(SessionContext.load(store, session_id, Config()).events)
    assert activity is not None and activity.request == 2 and activity.state == "applied"
    yield Launch.open(p.db, session_id)


@pytest.mark.usefixtures("frozen", "no_toasts")
class TestPolicyShown:
    def test_a_stored_session_a_policy_pruned(self, snap_compare: SnapCompare, policy_launch: Launch) -> None:
        async def opened(pilot: Pilot[None]) -> None:
            app = pilot.app
            assert isinstance(app, WorkbenchApp)
            await until(pilot, lambda: "policy default · last: pruned 1 at request 2" in panel(app))

        assert snap(snap_compare, WorkbenchApp(policy_launch), opened)
