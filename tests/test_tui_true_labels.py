"""Labels users found untrue or empty (issue #37, point 6), each checked on the text the user sees.

The palette's pin help lost its ``[PERSIST]`` to markup; inspect said "cost cost not known"; the scripted demo's
budget said "reported by the API"; the toast after an undo said "u undoes it"; a pin "saved 0 tokens"; an
imported transcript was "read-only" while its steering keys worked; an imported compaction was dated by the
import and showed "?"; the agent pane invited a message under a box saying the demo had finished.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import cc_assistant, cc_usage, cc_user, claude_fixture, text_block, write_jsonl
from textual.pilot import Pilot
from textual.widgets import DataTable
from tui_fixtures import (  # noqa: F401  (fixtures are found by name)
    SIZE,
    autoplay,
    compacted_launch,
    demo_launch,
    flat,
    isolated_dirs,
    script_launch,
    settle,
    stored,
    text_of,
    tui_script,
    until,
)

from workbench.cli import main
from workbench.engine.context.budget import SCRIPTED_LABEL
from workbench.engine.transcript.models import ToolResultPart
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.compactions import NOT_RECORDED, CompactionHistoryScreen
from workbench.tui.widgets.agent_input import AgentInput
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.live_stream import LiveStream
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.timeline import Timeline


def toasts(app: WorkbenchApp) -> list[str]:
    """The notifications on screen, as painted (``run_test(notifications=True)`` shows them)."""
    return [flat(text_of(toast).replace("▌", " ")) for toast in app.screen.query("Toast")]  # (its edge: ▌)


async def toast_saying(pilot: Pilot[None], start: str) -> str:
    """The newest toast on screen that starts with ``start`` (waiting for it)."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    await until(pilot, lambda: any(t.startswith(start) for t in toasts(app)))
    return [t for t in toasts(app) if t.startswith(start)][-1]


async def cursor_on_a_user_message(pilot: Pilot[None]) -> int:
    app = pilot.app
    assert isinstance(app, WorkbenchApp) and app.main_screen.screen_state is not None
    messages = app.main_screen.screen_state.messages
    index = next(i for i, m in enumerate(messages) if m.role == "user" and m.index > 5)
    app.main_screen.query_one(MessageList).cursor = index
    await pilot.pause()
    return index + 1


# --- 1. the command palette ---------------------------------------------------------------


@pytest.mark.anyio
async def test_the_palette_shows_the_persist_badge_in_the_pin_help(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: bool(app.screen.query("CommandList")))
        for key in "Pin / unpin":
            await pilot.press("space" if key == " " else key)
        commands = app.screen.query_one("CommandList")
        await until(pilot, lambda: "Pin / unpin the message" in flat(text_of(commands)))
        shown = flat(text_of(commands))
        assert "Keep it through compaction and strategies (its badge: [PERSIST])" in shown
        assert "()" not in shown


# --- 2. inspect's cost line --------------------------------------------------------------


def test_inspect_says_cost_not_known_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [cc_user("u1", "hello"),
               cc_assistant("a1", "msg_1", [text_block("hi")], cc_usage(1_000, 10), model="mystery-model-9")]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    assert main(["inspect", str(path), "--db", str(tmp_path / "wb.db")]) == 0
    out = capsys.readouterr().out
    assert "cost not known: no price for mystery-model-9 · 0 of 1 requests priced" in out
    assert "cost cost" not in out


# --- 3. the scripted demo's budget ------------------------------------------------------------


@pytest.mark.anyio
async def test_the_scripted_demo_budget_and_timeline_say_the_script_counted_it(script_launch: Launch) -> None:
    app = WorkbenchApp(replace(script_launch, approval="approve"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")  # the first scripted message: its answers carry the script's own usage
        await settle(pilot)
        budget = stored(app).budget()
        assert (budget.source, budget.scripted) == ("reported", True)
        panel = flat(text_of(app.main_screen.query_one(BudgetPanel)))
        assert SCRIPTED_LABEL in panel and "counted by the scripted demo, not an API" in panel
        assert "reported by the API" not in panel
        legend = flat(text_of(app.main_screen.query_one(Timeline)))  # the chart's line says whose sizes it draws
        assert "━scripted ━est." in legend and "reported" not in legend


# --- 4, 5. the toasts after a change -----------------------------------------------------------


@pytest.mark.anyio
async def test_pin_undo_redo_toasts_say_what_happened_and_which_key_takes_it_back(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        position = await cursor_on_a_user_message(pilot)
        used = app.main_screen.screen_state.budget.used  # type: ignore[union-attr]

        await pilot.press("p")
        await settle(pilot)
        pinned = await toast_saying(pilot, f"Pinned #{position}")
        assert "compaction keeps it word for word and strategies leave it alone" in pinned
        assert f"the context is unchanged ({used:,} tokens)" in pinned and pinned.endswith("u undoes it.")
        assert "saves 0" not in pinned

        app.clear_notifications()
        await pilot.press("u")
        await settle(pilot)
        undid = await toast_saying(pilot, "Undid pin")
        assert undid.endswith("r redoes it.") and "u undoes it" not in undid

        app.clear_notifications()
        await pilot.press("r")
        await settle(pilot)
        redid = await toast_saying(pilot, "Redid pin")
        assert redid.endswith("u undoes it.")


@pytest.mark.anyio
async def test_a_prune_and_its_undo_say_the_tokens_each_way(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        state = app.main_screen.screen_state
        assert state is not None
        before = state.budget.used
        index = next(i for i, m in enumerate(state.messages)
                     if any(isinstance(p, ToolResultPart) and len(p.text) > 400 for p in m.parts))
        app.main_screen.query_one(MessageList).cursor = index
        await pilot.pause()
        await pilot.press("x")
        await settle(pilot)
        after = stored(app).budget().used
        assert after < before
        pruned = await toast_saying(pilot, f"Pruned #{index + 1}")
        assert f"{before:,} → {after:,} tokens (saves {before - after:,} tokens). u undoes it." in pruned

        app.clear_notifications()
        await pilot.press("u")
        await settle(pilot)
        undid = await toast_saying(pilot, "Undid prune")
        assert f"{after:,} → {before:,} tokens (adds {before - after:,} tokens). r redoes it." in undid


# --- 6. an imported transcript is steerable, not read-only ----------------------------------------


@pytest.mark.anyio
async def test_an_imported_transcript_says_what_steering_changes(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        info = app.main_screen.query_one(InfoBar)
        assert info.mode == "imported"
        assert "read-only" not in flat(text_of(info))
        box = app.main_screen.query_one(AgentInput)
        assert box.disabled and box.border_title == "Imported"
        assert box.placeholder == ("imported claude code transcript, no agent to message · steering stays in the "
                                   "workbench; the file is never changed")
        source = Path(stored(app).session.source_path or "")
        written = source.read_bytes()

        await cursor_on_a_user_message(pilot)
        await pilot.press("p")  # what the label promises: the keys work, and the file stays as it was
        await settle(pilot)
        assert stored(app).overlay.pinned
        assert source.read_bytes() == written


@pytest.mark.anyio
async def test_a_followed_transcript_is_read_only_and_its_keys_say_so(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    shutil.copyfile(claude_fixture("short"), path)
    app = WorkbenchApp(Launch.watch(path))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        assert app.main_screen.query_one(InfoBar).mode == "read-only"
        assert app.main_screen.query_one(AgentInput).placeholder.startswith("read-only: this transcript is being "
                                                                           "followed, not stored")
        await pilot.press("x")  # on the message the list follows (the last)
        refused = await toast_saying(pilot, "prune: this transcript is being followed, not stored")
        assert "import it first" in refused
        assert path.read_bytes() == claude_fixture("short").read_bytes()


# --- 7. an imported compaction's history --------------------------------------------------------


@pytest.mark.anyio
async def test_an_imported_compaction_shows_when_claude_code_compacted(compacted_launch: Launch) -> None:
    app = WorkbenchApp(compacted_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("C")
        await until(pilot, lambda: isinstance(app.screen, CompactionHistoryScreen))
        table = app.screen.query_one(DataTable)
        assert table.row_count == 1
        when, trigger, summarizer, before, after, summarised, _, state = table.get_row_at(0)
        # The compact_boundary record's own timestamp (2026-02-11T21:18:41Z) and compactMetadata.
        assert (when, trigger, before) == ("2026-02-11 21:18", "auto", "167,094")
        assert summarizer == "recorded in the transcript" and state == "applied"
        assert after == summarised == NOT_RECORDED
        painted = flat(text_of(table))
        assert "not recorded" in painted and "?" not in painted


# --- 8. the agent pane and the message box agree ------------------------------------------------------


@pytest.mark.anyio
async def test_a_finished_demo_says_so_in_the_agent_pane_too(script_launch: Launch) -> None:
    played = autoplay(script_launch)
    app = WorkbenchApp(played)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        await until(pilot, lambda: box.border_subtitle == "the demo has finished")
        session = stored(app).session.id
    app = WorkbenchApp(replace(played, script=None, target=session))  # opened again: nothing in flight
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        box = app.main_screen.query_one(AgentInput)
        assert "demo script is finished" in box.placeholder
        pane = flat(text_of(app.main_screen.query_one(LiveStream)))
        assert "The demo has finished: ctrl+o opens another session." in pane
        assert "Type a message below" not in pane


@pytest.mark.anyio
async def test_a_demo_waiting_for_enter_says_where_its_next_message_is(script_launch: Launch) -> None:
    app = WorkbenchApp(replace(script_launch, approval="approve"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = flat(text_of(app.main_screen.query_one(LiveStream)))
        assert "the demo's next message waits below; Enter sends it" in pane
