"""In the app, a strategy's plan and a compaction on a proxied session ask first what they do to the agent's
prompt cache, as a prune does; the answer decides whether and when they are applied."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_edit_price_cli import recorded
from textual.message import Message
from tui_fixtures import SIZE, flat, settle, text_of, until

from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store
from workbench.tui import messages as msg
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.cache_price import CachePriceScreen
from workbench.tui.widgets.compaction_pane import CompactionPane

pytestmark = pytest.mark.anyio


def small_tail() -> Config:
    return Config(compaction=CompactionConfig(tail_min=500, tail_max=1500))


async def test_a_strategy_plan_on_a_proxied_session_is_priced_first_and_can_wait_for_a_cold_cache(
        tmp_path: Path) -> None:
    db, session_id = recorded(tmp_path)
    seen: list[Message] = []
    app = WorkbenchApp(Launch.open(db, session_id))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        await pilot.press("S")
        await settle(pilot)
        await pilot.press("enter")  # apply the highlighted plan: dedup
        await settle(pilot)
        assert isinstance(app.screen, CachePriceScreen), "the price to the agent's cache is asked first"
        assert app.screen.what == "apply dedup"
        shown = flat(text_of(app.screen.query_one("#cache-text")))
        assert "writes" in shown and "write price" in shown
        assumption = flat(text_of(app.screen.query_one("#cache-assumption")))
        assert assumption.startswith("Assumes the cache was warm at the last request: ")
        await pilot.press("escape")
        await settle(pilot)
        assert not any(isinstance(m, msg.PlanApplied) for m in seen), "cancelled: nothing applied"

        await pilot.press("S")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
    with Store(db) as store:
        events = [e for e in store.load_overlay(session_id) if e.plan_id and not e.undone]
    assert events and all(e.data.get("when") == "cache-cold" for e in events), "queued until the cache is cold"


async def test_a_compaction_on_a_proxied_session_is_priced_first_and_cannot_wait(tmp_path: Path) -> None:
    db, session_id = recorded(tmp_path)
    seen: list[Message] = []
    app = WorkbenchApp(Launch.open(db, session_id, config=small_tail()))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        pane = app.main_screen.query_one(CompactionPane)
        await until(pilot, lambda: pane.phase == "ready")
        pane.focus()
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, CachePriceScreen) and app.screen.what == "compact"
        assert not app.screen.query("#cold"), "a compaction's summary is of now: it does not wait"
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, CachePriceScreen), "w does nothing here"
        await pilot.press("escape")
        await settle(pilot)
        assert pane.phase == "ready", "back to the preview, to apply later"
        assert not any(isinstance(m, msg.CompactionApplied) for m in seen)
        await pilot.press("ctrl+s")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await until(pilot, lambda: any(isinstance(m, msg.CompactionApplied) for m in seen))
