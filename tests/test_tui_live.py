"""The live agent in the TUI: the input box, streaming, approvals, autoplay, the automatic compaction."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from tui_fixtures import (  # noqa: F401
    SIZE,
    GatedProvider,
    autoplay,
    flat,
    isolated_dirs,
    record_toasts,
    script_launch,
    settle,
    stored,
    text_of,
    tui_script,
    until,
)

from workbench.engine.context.session import SCRIPT_KEY
from workbench.engine.providers.base import Provider
from workbench.engine.providers.scripted import END_OF_SCRIPT, Script
from workbench.engine.transcript.models import ToolResultPart
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.approval import ApprovalScreen
from workbench.tui.widgets.agent_input import HINT, AgentInput
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.live_stream import LiveStream
from workbench.tui.widgets.message_list import MessageList

FIRST = "[PERSIST] Read notes.md and fix the greeting in app.py."
SECOND = "Check the change against the rules, please."


def workspace(app: WorkbenchApp) -> Path:
    return Path(stored(app).session.metadata["workspace"])


async def approve_next(pilot: Pilot[None], key: str) -> tuple[ApprovalScreen, str]:
    """Answer the next approval modal with ``key``; the modal and what it showed."""
    await until(pilot, lambda: isinstance(pilot.app.screen, ApprovalScreen))
    screen = pilot.app.screen
    assert isinstance(screen, ApprovalScreen)
    shown = " ".join(flat(text_of(w)) for w in [screen.query_one("#approval-box"), *screen.query(Static)])
    await pilot.press(key)
    return screen, shown


@pytest.mark.anyio
async def test_the_next_scripted_message_waits_in_the_input_box(script_launch: Launch) -> None:
    app = WorkbenchApp(replace(script_launch, approval="approve"))
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        assert box.has_focus and box.value == FIRST
        assert box.border_subtitle == f"demo message 1 of 2 · {HINT}"
        assert app.main_screen.query_one(InfoBar).mode == "demo 0/2"

        await pilot.press("enter")
        await settle(pilot)
        ctx = stored(app)
        users = [m for m in ctx.messages if m.role == "user" and m.kind == "message"]
        assert [m.text for m in users] == [FIRST.removeprefix("[PERSIST] ")]
        assert users[0].id in ctx.overlay.pinned  # [PERSIST] pins it
        assert (workspace(app) / "app.py").read_text() == 'print("Hello, world!")\n'
        assert box.value == SECOND and box.border_subtitle == f"demo message 2 of 2 · {HINT}"
        assert app.main_screen.query_one(InfoBar).mode == "demo 1/2"
        assert app.main_screen.query_one(MessageList).row_count == len(ctx.messages)
        assert app.main_screen.screen_state.budget.level == "warn"  # type: ignore[union-attr]
        assert any("context at 7" in n for n in said)  # the engine's warning, as a toast


@pytest.mark.anyio
async def test_autoplay_runs_the_whole_script_and_compacts(script_launch: Launch) -> None:
    app = WorkbenchApp(autoplay(script_launch))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        ctx = stored(app)
        users = [m.text for m in ctx.messages if m.role == "user" and m.kind == "message"]
        assert users[:2] == [FIRST.removeprefix("[PERSIST] "), SECOND]
        assert ctx.overlay.pivots, "the small window makes the agent compact by itself"
        pane = app.main_screen.query_one(CompactionPane)
        assert app.main_screen.has_class("-compacting") and pane.mode == "live" and pane.phase == "done"
        facts = flat(text_of(pane.query_one("#compaction-facts")))
        assert "auto" in facts and "→" in facts and "heuristic" in facts
        assert pane.summary_text.startswith("[Previous conversation summary]") or pane.summary_text
        info = app.main_screen.query_one(InfoBar)
        assert (info.status, info.mode) == ("idle", "demo 2/2 · autoplay")
        assert "demo script is finished" in app.main_screen.query_one(AgentInput).placeholder

        await pilot.press("escape")
        assert not app.main_screen.has_class("-compacting")
        pivots = len(ctx.overlay.pivots)
        await pilot.press("u")  # one key undoes the latest compaction
        await settle(pilot)
        assert len(stored(app).overlay.pivots) == pivots - 1


@pytest.mark.anyio
async def test_approval_modal_refuses_and_approves(script_launch: Launch) -> None:
    app = WorkbenchApp(script_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        screen, shown = await approve_next(pilot, "n")
        assert screen.call.name == "edit_file" and "Run edit_file?" in shown
        await settle(pilot)
        ctx = stored(app)
        refused = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolResultPart) and p.is_error]
        assert [p.text for p in refused] == ["The user did not approve this tool call."]
        assert (workspace(app) / "app.py").read_text() == 'print("Hello, world.")\n'

    app = WorkbenchApp(script_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        _, shown = await approve_next(pilot, "y")
        assert "Hello, world!" in shown
        await settle(pilot)
        assert (workspace(app) / "app.py").read_text() == 'print("Hello, world!")\n'


@pytest.mark.anyio
async def test_the_demo_countdown_approves_by_itself(script_launch: Launch) -> None:
    # Four seconds on screen: a loaded machine's test still sees the question before it answers itself.
    app = WorkbenchApp(replace(script_launch, approval="countdown", countdown=4))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        assert "approving by itself" in text_of(app.screen.query_one("#approval-countdown"))
        await settle(pilot)
        assert (workspace(app) / "app.py").read_text() == 'print("Hello, world!")\n'


@pytest.mark.anyio
async def test_streaming_text_shows_while_the_model_answers(script_launch: Launch) -> None:
    gate: list[GatedProvider] = []

    def wrap(provider: Provider) -> Provider:
        gate.append(GatedProvider(provider, after=4))  # three chunks of thinking, one of text
        return gate[0]  # type: ignore[return-value]

    app = WorkbenchApp(replace(script_launch, approval="approve", wrap_provider=wrap))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: bool(gate) and gate[0].reached.is_set())
        stream = app.main_screen.query_one(LiveStream)
        await until(pilot, lambda: stream.thinking.startswith("The notes should say") and stream.text != "")
        assert app.main_screen.query_one(InfoBar).status == "streaming"
        assert stream.text == "Reading the notes first,"  # one 24-character chunk
        assert "▍" in text_of(stream)
        gate[0].release.set()
        await settle(pilot)
        assert app.main_screen.query_one(InfoBar).status == "idle"


@pytest.mark.anyio
async def test_typing_a_message_and_reopening_the_session_without_a_key(script_launch: Launch, tmp_path: Path) -> None:
    app = WorkbenchApp(replace(script_launch, approval="approve"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        box.value = ""
        await pilot.press(*"[PERSIST] my own words", "enter")
        await settle(pilot)
        ctx = stored(app)
        mine = next(m for m in ctx.messages if m.role == "user")
        assert mine.text == "my own words" and mine.id in ctx.overlay.pinned
        session_id = ctx.session.id

    # The same session, opened again without an API key: the script that played it resumes it where it
    # stopped, its next message waiting in the box.
    app = WorkbenchApp(replace(Launch.open(script_launch.db, session_id), approval="approve"))  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        assert not box.disabled and app.main_screen.query_one(InfoBar).mode != "read-only"
        script = Script.load(Path(script_launch.script or ""))
        assert box.value == script.turns[0].user, "the scripted turn the earlier run had not sent yet"
        before = len(stored(app).messages)
        await pilot.press("enter")
        await settle(pilot)
        answer = next(m for m in reversed(stored(app).messages) if m.role == "assistant")
        assert len(stored(app).messages) > before and answer.text != END_OF_SCRIPT

    # A session the agent ran on the Anthropic API (no script), without a key: it says how to continue it.
    with Store(script_launch.db) as store:  # type: ignore[arg-type]
        session = store.get_session(session_id)
        del session.metadata[SCRIPT_KEY]
        store.save_session(session)
    app = WorkbenchApp(Launch.open(script_launch.db, session_id))  # type: ignore[arg-type]
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        assert box.disabled and "set ANTHROPIC_API_KEY to continue it" in box.placeholder
        assert app.main_screen.query_one(InfoBar).mode == "no API key"
        await pilot.press("i")
        assert any("ANTHROPIC_API_KEY" in n for n in said)


@pytest.mark.anyio
async def test_a_stored_engine_session_continues_with_a_provider(script_launch: Launch, tmp_path: Path) -> None:
    """``workbench open SESSION`` on an engine session, with a provider (the Anthropic one when a key is set)."""
    from workbench.engine.providers.scripted import Script, ScriptedProvider, ScriptTurn

    app = WorkbenchApp(replace(script_launch, approval="approve"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        session_id = stored(app).session.id
        before = len(stored(app).messages)

    reply = Script(name="reply", turns=[ScriptTurn(user="", responses=[[{"text": "Continuing where we left off."}]])])
    launch = replace(Launch.open(script_launch.db, session_id),  # type: ignore[arg-type]
                     provider_factory=lambda: ScriptedProvider(reply))
    app = WorkbenchApp(launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        assert not box.disabled and app.main_screen.query_one(InfoBar).mode == "live"
        await pilot.press("i", *"go on", "enter")
        await settle(pilot)
        ctx = stored(app)
        assert len(ctx.messages) == before + 2
        assert ctx.messages[-2].text == "go on" and ctx.messages[-1].text == "Continuing where we left off."


@pytest.mark.anyio
async def test_spec001_slash_compact_in_the_message_box_does_what_c_does(script_launch: Launch) -> None:
    app = WorkbenchApp(replace(script_launch, approval="approve"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")  # the script's first turn, so there is a conversation
        await settle(pilot)
        sent = len(stored(app).messages)
        box = app.main_screen.query_one(AgentInput)
        box.focus()
        box.value = ""
        await pilot.press(*"/compact keep the greeting rules", "enter")
        await settle(pilot)
        pane = app.main_screen.query_one(CompactionPane)
        assert app.main_screen.has_class("-compacting") and pane.plan is not None
        assert pane.plan.focus == "keep the greeting rules" == pane.focus_text
        assert box.value == "" and len(stored(app).messages) == sent  # nothing went to the agent
