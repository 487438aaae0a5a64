"""The compaction pane: preview (heuristic and a streaming model), edit, apply, undo, cancel, history."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import Collapsible, Select, TextArea
from tui_fixtures import (  # noqa: F401
    SIZE,
    SUMMARY_TEXT,
    GatedProvider,
    demo_launch,
    flat,
    isolated_dirs,
    record_toasts,
    settle,
    stored,
    summary_provider,
    text_of,
    until,
)

from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.compactions import CompactionHistoryScreen
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.message_list import MessageList


@pytest.mark.anyio
async def test_preview_edit_apply_and_undo(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        before = stored(app)
        used = before.budget().used
        await pilot.press("c")
        await settle(pilot)
        pane = app.main_screen.query_one(CompactionPane)
        assert app.main_screen.has_class("-compacting") and pane.phase == "ready" and pane.plan is not None
        plan = pane.plan
        facts = flat(text_of(pane.query_one("#compaction-facts")))
        assert f"{plan.before_tokens:,} → {plan.after_tokens:,} tokens" in facts
        assert f"summarised {len(plan.summarized)} messages" in facts and "kept verbatim" in facts
        assert "preserved" in facts and "heuristic" in facts
        assert pane.summary_text == plan.summary
        assert pane.query_one("#compaction-summary", TextArea).has_focus
        assert not before.overlay.pivots  # a preview changes nothing

        await pilot.press("ctrl+t")
        assert not pane.query_one("#compaction-prompt", Collapsible).collapsed
        assert plan.prompt[:40].split("\n")[0] in text_of(pane.query_one("#compaction-prompt-text"))

        edited = "[Previous conversation summary]\n\nEdited by hand: the --since option is done and tested."
        pane.query_one("#compaction-summary", TextArea).load_text(edited)
        await pilot.press("ctrl+s")
        await settle(pilot)
        ctx = stored(app)
        assert len(ctx.overlay.pivots) == 1
        summary = next(m for m in ctx.messages if m.id == ctx.overlay.pivots[0].summary_id)
        assert summary.text == edited
        assert ctx.budget().used < used
        assert not app.main_screen.has_class("-compacting")
        row = app.main_screen.query_one(MessageList).selected_row
        assert row is not None and row.message.id == summary.id and "summary" in row.badges
        assert any(n.startswith(f"Compacted: {plan.before_tokens:,} →") for n in said)

        await pilot.press("C")
        await settle(pilot)
        assert isinstance(app.screen, CompactionHistoryScreen)
        assert [e.plan_id for e in app.screen.entries] == [plan.plan_id]
        await pilot.press("escape")

        await pilot.press("u")
        await settle(pilot)
        undone = stored(app)
        assert not undone.overlay.pivots and undone.budget().used == used


@pytest.mark.anyio
async def test_cancel_changes_nothing(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        count = len(stored(app).messages)
        await pilot.press("c")
        await settle(pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert not app.main_screen.has_class("-compacting")
        assert app.main_screen.query_one(MessageList).has_focus
        ctx = stored(app)
        assert not ctx.overlay.pivots and len(ctx.messages) == count


@pytest.mark.anyio
async def test_the_model_summary_streams_in(demo_launch: Launch) -> None:
    gate = GatedProvider(None, after=2)  # type: ignore[arg-type]
    app = WorkbenchApp(replace(demo_launch, summary_provider=summary_provider(gate)))
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        pane = app.main_screen.query_one(CompactionPane)
        assert pane.plan is not None and pane.plan.summarizer == "heuristic"
        pane.query_one("#compaction-summariser", Select).value = "llm"  # asks again, with the model
        await until(pilot, gate.reached.is_set)
        await until(pilot, lambda: pane.summary_text == SUMMARY_TEXT[:48])
        assert pane.phase == "waiting" and pane.plan is None
        assert "48 characters so far" in text_of(pane.query_one("#compaction-spinner"))
        await pilot.press("ctrl+s")  # nothing to apply yet
        assert any("wait for the summary" in n for n in said)

        gate.release.set()
        await settle(pilot)
        assert pane.phase == "ready" and pane.plan is not None and pane.plan.summarizer == "llm"
        assert SUMMARY_TEXT in pane.summary_text
        await pilot.press("ctrl+s")
        await settle(pilot)
        ctx = stored(app)
        summary = next(m for m in ctx.messages if m.id == ctx.overlay.pivots[-1].summary_id)
        assert SUMMARY_TEXT in summary.text and summary.source["summarizer"] == "llm"
