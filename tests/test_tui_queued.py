"""Queued edits in the app: ``w`` in the price dialog queues an edit and says so, Q lists the queued edits,
and x cancels one, which then never reaches the agent (checked on what the loopback upstream received)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
import pytest
from loopback_api import Reply, text
from proxy_support import proxied, request
from test_proxy_cache import turns
from textual.app import App, ComposeResult
from textual.message import Message
from textual.widgets import DataTable, Static
from tui_fixtures import (
    SIZE,
    isolated_dirs,  # noqa: F401 - autouse: HOME is an empty temporary folder
    settle,
    until,
)

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.plans.edit_price import CACHE_LIFETIME
from workbench.engine.plans.plan import HistoryEntry
from workbench.engine.transcript.store import Store
from workbench.tui import messages as msg
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.cache_price import CachePriceScreen
from workbench.tui.screens.queued import QueuedEditsScreen
from workbench.tui.widgets.message_list import MessageList

pytestmark = pytest.mark.anyio


async def send(url: str, messages: list[dict[str, Any]]) -> None:
    client = anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0)
    await asyncio.to_thread(client.messages.create, **request(messages))


def rows(app: WorkbenchApp) -> int:
    table: DataTable[str] = app.screen.query_one("#queued-table", DataTable)
    return table.row_count


async def test_queued_edits_are_listed_and_one_is_cancelled_before_it_reaches_the_agent(tmp_path: Path) -> None:
    seen: list[Message] = []
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")]), Reply([text("again")]))
        history = turns(2)
        await send(p.url, history)
        p.settle()
        with Store(p.db) as store:
            session = next(s for s, _ in store.list_sessions() if s.source_format == "proxy")
        app = WorkbenchApp(Launch.open(p.db, session.id))
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await settle(pilot)
            messages = app.main_screen.query_one(MessageList)
            messages.focus()
            for row in (2, 4):
                messages.cursor = row
                await pilot.press("x")
                await settle(pilot)
                assert isinstance(app.screen, CachePriceScreen)
                await pilot.press("w")
                await settle(pilot)
            notices = [m.text for m in seen if isinstance(m, msg.Notice)]
            assert len([n for n in notices if n.startswith("Queued: prune #")]) == 2, notices
            assert not [m for m in seen if isinstance(m, msg.PlanApplied)], "a queued edit is not said applied"

            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueuedEditsScreen))
            assert rows(app) == 2
            await pilot.press("x")  # the first, #3
            await settle(pilot)
            assert not isinstance(app.screen, QueuedEditsScreen)
            await until(pilot, lambda: any(isinstance(m, msg.Notice) and m.text.startswith("Cancelled the queued")
                                           for m in seen))
            cancelled = next(m.text for m in seen if isinstance(m, msg.Notice) and m.text.startswith("Cancelled"))
            assert "prune of #3" in cancelled
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueuedEditsScreen))
            assert rows(app) == 1
            await pilot.press("escape")
        for group in p.server.recorder.threads.groups().values():  # the agent's cache goes cold
            for thread in group:
                assert thread.last_request_at is not None
                thread.last_request_at -= CACHE_LIFETIME + timedelta(seconds=1)
        later = [*history, {"role": "assistant", "content": [text("ok")]}, {"role": "user", "content": "more"}]
        await send(p.url, later)
        sent = p.api.bodies[-1]["messages"]
        assert sent[2] == later[2], "the cancelled edit never reached the agent"
        assert sent[4]["content"][0]["content"] == PRUNED_PLACEHOLDER, "the one left applied"


class QueuedOnly(App[None]):
    """The queued edits screen over an empty app, with fixed entries: a snapshot of the screen alone."""

    def compose(self) -> ComposeResult:
        yield Static("a proxied session")

    def on_mount(self) -> None:
        at = datetime(2026, 11, 28, 17, 30, tzinfo=UTC)
        entries = [
            HistoryEntry(plan_id="plan-a", strategy="prune", origin="user", created_at=at, actions=["prune"], items=1,
                         tokens_saved=2_378, undone=False, state="queued", message_ids=["m3"]),
            HistoryEntry(plan_id="plan-b", strategy="offload", origin="user", created_at=at + timedelta(minutes=2),
                         actions=["offload"], items=1, tokens_saved=12_510, undone=False, state="queued",
                         message_ids=["m5"]),
        ]
        self.push_screen(QueuedEditsScreen(entries, {"m3": 3, "m5": 5}))


def test_the_queued_edits_screen(snap_compare: Any) -> None:
    assert snap_compare(QueuedOnly(), terminal_size=(110, 20))
