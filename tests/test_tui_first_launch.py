"""The bare ``workbench``: the demo at work on a database with nothing to show, the latest session otherwise;
the focus where keys act on the list, never in the message box unasked; no empty sessions left behind."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import store_short_session
from textual.widget import Widget
from tui_fixtures import (  # noqa: F401
    SIZE,
    GatedProvider,
    isolated_dirs,
    script_launch,
    settle,
    stored,
    text_of,
    tui_script,
    until,
)

from workbench.commands import app as app_command
from workbench.commands._common import Environment
from workbench.engine.providers.base import Provider
from workbench.engine.transcript.models import Session
from workbench.engine.transcript.sessions import listed_sessions
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import DEMO_SCRIPT, Launch
from workbench.tui.screens.approval import ApprovalScreen
from workbench.tui.screens.help import HelpScreen
from workbench.tui.widgets.agent_input import AgentInput
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.live_stream import LiveStream


def _bare_launch(db: Path, monkeypatch: pytest.MonkeyPatch) -> Launch:
    """What the bare ``workbench`` would run on ``db`` (the app itself is not started)."""
    launched: list[Launch] = []
    monkeypatch.setattr(app_command, "run", lambda launch: launched.append(launch) or 0)
    env = Environment(argparse.Namespace(db=db, config=None))
    assert app_command.open_tui(env, None) == 0
    return launched[0]


def _quick(launch: Launch) -> Launch:
    """The same launch without the pauses meant for watching it."""
    return replace(launch, chunk_delay=0.0, turn_pause=0.0, step_pause=0.0)


def test_an_empty_database_plays_the_demo_with_its_tools_approved(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _bare_launch(tmp_path / "wb.db", monkeypatch)
    assert (launch.script, launch.autoplay, launch.approval) == (DEMO_SCRIPT, True, "approve")
    assert launch.reuse_unplayed  # an unplayed demo session from an earlier launch is played, not a new one


def test_a_database_with_sessions_opens_the_most_recent_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "wb.db"
    with Store(db) as store:
        store_short_session(store, "older")
        store_short_session(store, "newer")
        store.save_session(Session(id="killed-run", title="Scripted: demo", source_format="engine"))  # empty
    launch = _bare_launch(db, monkeypatch)
    assert (launch.target, launch.script, launch.approval) == ("newer", None, "ask")


@pytest.mark.anyio
async def test_the_demo_plays_by_itself_and_shows_the_product_at_work(tmp_path: Path) -> None:
    """No key pressed: every turn goes, no approval is asked, the list keeps the focus throughout; then
    the compaction pane shows the pinned message it kept, and ``?`` opens the help (not the input box)."""
    app = WorkbenchApp(_quick(Launch.welcome(tmp_path / "wb.db")))
    focused: set[str] = set()
    asked = False
    async with app.run_test(size=(120, 32)) as pilot:
        main = app.main_screen

        def finished() -> bool:
            nonlocal asked
            asked |= isinstance(app.screen, ApprovalScreen)
            if isinstance(app.focused, Widget):
                focused.add(type(app.focused).__name__)
            live = main.live
            return live.turns > 0 and live.turn == live.turns and not live.working and not app.pending

        await until(pilot, finished, timeout=120)
        await settle(pilot)
        assert not asked, "the demo's tool calls are approved for it"
        assert focused == {"MessageList"}, f"the focus went to {focused}"
        ctx = stored(app)
        assert ctx.overlay.pivots and ctx.overlay.pinned
        assert ctx.budget().percent > 50
        facts = text_of(main.query_one(CompactionPane).query_one("#compaction-facts"))
        assert "PERSIST" in facts and "#1" in facts and "kept verbatim" in facts
        assert "scripted demo" in str(main.query_one(LiveStream).border_title)
        assert main.query_one(AgentInput).value == ""

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert main.query_one(AgentInput).value == ""


@pytest.mark.anyio
async def test_relaunching_never_adds_an_empty_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A demo quit before its first message leaves nothing behind; the next plain launch plays the demo again."""
    db = tmp_path / "wb.db"
    for _ in range(3):
        launch = _bare_launch(db, monkeypatch)
        assert launch.script == DEMO_SCRIPT
        app = WorkbenchApp(replace(launch, autoplay=False))  # quit before anything is sent
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.main_screen.screen_state is not None and not app.main_screen.screen_state.messages
            await pilot.press("q")
        deadline = time.monotonic() + 10  # the engine thread closes the session after the app has gone
        while _sessions(db) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert _sessions(db) == []


def _sessions(db: Path) -> list[str]:
    with Store(db) as store:
        return [s.id for s, _ in store.list_sessions()]


@pytest.mark.anyio
async def test_what_the_user_types_meanwhile_stays_in_the_box(script_launch: Launch) -> None:
    """``demo --no-autoplay``: the next scripted message never replaces the user's own words."""
    gate: list[GatedProvider] = []

    def wrap(provider: Provider) -> Provider:
        gate.append(GatedProvider(provider, after=2))
        return gate[0]  # type: ignore[return-value]

    app = WorkbenchApp(replace(script_launch, approval="approve", wrap_provider=wrap))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        await pilot.press("enter")  # the first scripted message goes
        await until(pilot, lambda: bool(gate) and gate[0].reached.is_set())
        await pilot.press(*"my own words")  # typed while the agent works
        gate[0].release.set()
        await settle(pilot)
        assert box.value == "my own words" and not box.has_class("-prefilled")


def test_the_session_picker_does_not_list_empty_runs(tmp_path: Path) -> None:
    with Store(tmp_path / "wb.db") as store:
        store_short_session(store, "full")
        store.save_session(Session(id="killed", source_format="engine"))
        assert [s.id for s, _ in listed_sessions(store)] == ["full"]
