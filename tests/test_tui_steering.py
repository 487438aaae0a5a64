"""Every steering key, driven with Pilot, checked on the engine's stored state (not only on pixels)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from tui_fixtures import SIZE, demo_launch, flat, isolated_dirs, record_toasts, settle, stored, text_of  # noqa: F401

from workbench.engine.plans.plan import history
from workbench.engine.transcript.models import Message, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.plans import PlanScreen
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.message_list import MessageList


async def select(pilot: Pilot[None], predicate: object) -> Message:
    """Put the cursor on the first message matching ``predicate``."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    snapshot = app.main_screen.screen_state
    assert snapshot is not None
    index = next(i for i, m in enumerate(snapshot.messages) if predicate(m))  # type: ignore[operator]
    app.main_screen.query_one(MessageList).cursor = index
    await pilot.pause()
    return snapshot.messages[index]


def has_result(message: Message) -> bool:
    return any(isinstance(p, ToolResultPart) and len(p.text) > 400 for p in message.parts)


@pytest.mark.anyio
async def test_pin_unpin_undo_redo(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        target = await select(pilot, lambda m: m.role == "user" and m.index > 5 and m.id)
        assert target.id not in stored(app).overlay.pinned

        await pilot.press("p")
        await settle(pilot)
        assert target.id in stored(app).overlay.pinned
        assert "PERSIST" in app.main_screen.query_one(MessageList).selected_row.badges  # type: ignore[union-attr]
        assert any(n.startswith("Pinned #") and "tokens" in n and "u undoes it" in n for n in said)

        await pilot.press("u")
        await settle(pilot)
        assert target.id not in stored(app).overlay.pinned
        await pilot.press("r")
        await settle(pilot)
        assert target.id in stored(app).overlay.pinned

        await pilot.press("p")  # the same key unpins a pinned message
        await settle(pilot)
        assert target.id not in stored(app).overlay.pinned
        assert [e.strategy for e in history(stored(app)) if e.origin == "user"] == ["pin", "unpin"]


@pytest.mark.anyio
async def test_prune_and_restore(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        before = app.main_screen.screen_state.budget.used  # type: ignore[union-attr]
        target = await select(pilot, has_result)
        part = next(n for n, p in enumerate(target.parts) if isinstance(p, ToolResultPart))

        await pilot.press("x")
        await settle(pilot)
        ctx = stored(app)
        assert ctx.overlay.is_pruned(target.id, part)
        assert ctx.budget().used < before
        saved = before - ctx.budget().used
        assert any(f"(saves {saved:,} tokens)" in n for n in said)
        body = flat(text_of(app.main_screen.query_one("#detail-body")))
        assert "what the model sees (pruned: a placeholder)" in body
        assert "[Old tool result content cleared]" in body
        assert "original, kept in the transcript" in body
        # The figure is no longer what the API reported: the panel says so, and by how much (issue 17).
        budget = ctx.budget()
        assert (budget.source, budget.steered) == ("calibrated", saved)
        label = f"calibrated: reported {budget.used + saved:,} − {saved:,} steered since"
        assert label in flat(text_of(app.main_screen.query_one(BudgetPanel)))
        assert "reported by the API" not in flat(text_of(app.main_screen.query_one(BudgetPanel)))

        await pilot.press("x")
        await settle(pilot)
        assert not stored(app).overlay.is_pruned(target.id, part)
        assert stored(app).budget().used == before
        assert "reported by the API" in flat(text_of(app.main_screen.query_one(BudgetPanel)))


@pytest.mark.anyio
async def test_offload_and_inline(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        target = await select(pilot, has_result)
        part = next(n for n, p in enumerate(target.parts) if isinstance(p, ToolResultPart))
        original = target.parts[part]
        assert isinstance(original, ToolResultPart)

        await pilot.press("o")
        await settle(pilot)
        ctx = stored(app)
        offload = ctx.overlay.offloaded.get((target.id, part))
        assert offload is not None
        with Store(app.launch.db) as store:  # type: ignore[arg-type]
            assert store.read_blob(ctx.session.id, offload.ref_id) == original.text
        body = flat(text_of(app.main_screen.query_one("#detail-body")))
        assert "what the model sees (offloaded: a reference)" in body
        assert f'ref_id="{offload.ref_id}"' in body
        assert "original, kept in the transcript and the blob table" in body

        await pilot.press("o")
        await settle(pilot)
        assert (target.id, part) not in stored(app).overlay.offloaded


@pytest.mark.anyio
async def test_archive_keeps_tool_pairs_together(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        caller = await select(pilot, lambda m: m.role == "assistant" and any(isinstance(p, ToolUsePart)
                                                                           for p in m.parts) and m.index > 3)
        call_ids = {p.id for p in caller.parts if isinstance(p, ToolUsePart)}
        snapshot = app.main_screen.screen_state
        assert snapshot is not None
        holders = {m.id for m in snapshot.messages
                   if any(isinstance(p, ToolResultPart) and p.tool_use_id in call_ids for p in m.parts)}
        assert holders

        await pilot.press("a")
        await settle(pilot)
        archived = stored(app).overlay.archived
        assert {caller.id, *holders} <= archived
        assert app.main_screen.query_one(MessageList).selected_row.archived  # type: ignore[union-attr]

        await pilot.press("a")
        await settle(pilot)
        assert not ({caller.id, *holders} & stored(app).overlay.archived)


@pytest.mark.anyio
async def test_nothing_to_undo_is_said(tmp_path: Path) -> None:
    from tui_fixtures import synthetic_context

    ctx = synthetic_context(10)
    with Store(tmp_path / "s.db") as store:
        store.save_session(ctx.session)
        store.save_messages(ctx.messages, ctx.counter)
    app = WorkbenchApp(Launch.open(tmp_path / "s.db", ctx.session.id))
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        assert any("undo: nothing to undo" in n for n in said)
        await pilot.press("r")
        await settle(pilot)
        assert any("redo: nothing to redo" in n for n in said)


@pytest.mark.anyio
async def test_nothing_to_do_is_said_and_changes_nothing(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        recorded = history(stored(app))
        await select(pilot, lambda m: m.role == "user" and not m.tool_results())
        await pilot.press("x")
        await settle(pilot)
        assert any("has no tool output or written content to prune" in n for n in said)
        assert history(stored(app)) == recorded


@pytest.mark.anyio
async def test_strategy_plan_view_applies_or_dismisses(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        before = stored(app).budget().used
        await pilot.press("S")
        await settle(pilot)
        assert isinstance(app.screen, PlanScreen)
        best = max(app.screen.plans, key=lambda p: p.tokens_saved)
        assert best.items and app.screen.current is best
        painted = flat(text_of(app.screen.query_one("#plans-summary")))
        assert f"saves {best.tokens_saved:,}" in painted

        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, PlanScreen)
        assert stored(app).budget().used == before

        await pilot.press("S")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        ctx = stored(app)
        assert ctx.budget().used == before - best.tokens_saved
        assert history(ctx)[-1].strategy == best.strategy
        assert any(n.startswith(f"Applied {best.strategy}") for n in said)

        await pilot.press("u")
        await settle(pilot)
        assert stored(app).budget().used == before
