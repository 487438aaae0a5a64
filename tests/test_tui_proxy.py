"""``workbench proxy`` on a terminal: the app waits for an agent, opens its session when the first request
arrives, follows it as more arrive, and what is pruned with a key is gone from the agent's next request.
The agent is the real anthropic SDK, the proxy a real server on a loopback port."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import pytest
from loopback_api import Reply, text, tool_use
from proxy_support import proxied, request
from textual.message import Message
from tui_fixtures import (
    SIZE,
    flat,
    isolated_dirs,  # noqa: F401 - autouse: HOME is an empty temporary folder
    settle,
    text_of,
    until,
)

from workbench.engine.context.effective import PINNED_WHY
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.plans.compaction_prompt import SUMMARY_PREFIX
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.tui import messages as msg
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.cache_price import CachePriceScreen
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList

pytestmark = pytest.mark.anyio
SHOWN_WITHIN = 3.0
"""Seconds: the app polls every half second; slack for a loaded test machine."""


def turns() -> list[dict[str, Any]]:
    """A question, a tool call and its result; the last block carries a cache mark, as Claude Code's does."""
    return [
        {"role": "user", "content": "What does setup.py say?"},
        {"role": "assistant", "content": [tool_use("toolu_1", "Read", {"path": "setup.py"})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "setup()\n" * 300,
                                      "cache_control": {"type": "ephemeral"}}]},
    ]


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the cache mark on the last block only, as Claude Code moves it along."""
    def plain(content: Any) -> Any:
        return [{k: v for k, v in b.items() if k != "cache_control"} for b in content] if isinstance(content, list) \
            else [text(content)]

    out = [{**m, "content": plain(m["content"])} for m in messages]
    last = out[-1]["content"]
    last[-1] = {**last[-1], "cache_control": {"type": "ephemeral"}}
    return out


def shown(app: WorkbenchApp) -> int:
    snapshot = app.main_screen.screen_state
    return len(snapshot.messages) if snapshot is not None else -1


async def send(url: str, messages: list[dict[str, Any]]) -> None:
    client = anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0)
    await asyncio.to_thread(client.messages.create, **request(marked(messages)))


async def test_the_app_opens_the_first_proxied_session_follows_it_and_steers_the_next_request(tmp_path: Path) -> None:
    seen: list[Message] = []
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("It calls setup().")]), Reply([text("Yes.")]), Reply([text("Done.")]))
        app = WorkbenchApp(Launch.proxy(p.db, p.url))
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await settle(pilot)
            assert "proxy · waiting" in flat(text_of(app.main_screen.query_one(InfoBar)))
            await send(p.url, turns())
            await until(pilot, lambda: shown(app) == 4, timeout=SHOWN_WITHIN)
            info = flat(text_of(app.main_screen.query_one(InfoBar)))
            assert "proxied" in info

            # The next request arrives: the list follows it.
            later = [*turns(), {"role": "assistant", "content": [text("It calls setup().")]},
                     {"role": "user", "content": "Sure?"}]
            await send(p.url, later)
            await until(pilot, lambda: shown(app) == 6, timeout=SHOWN_WITHIN)

            # Prune the tool result with the key: the agent's next request carries the placeholder.
            messages = app.main_screen.query_one(MessageList)
            messages.focus()
            messages.cursor = 2
            await pilot.press("x")
            await settle(pilot)
            assert isinstance(app.screen, CachePriceScreen), "the price to the agent's cache is shown first"
            price = flat(text_of(app.screen.query_one("#cache-text")))
            assert "writes" in price and "tokens to the cache again" in price and "smaller" in price
            await pilot.press("enter")
            await settle(pilot)
            assert not [m for m in seen if isinstance(m, msg.CommandFailed)]
            assert any(isinstance(m, msg.PlanApplied) for m in seen)
            await send(p.url, [*later, {"role": "assistant", "content": [text("Yes.")]},
                               {"role": "user", "content": "Thanks"}])
            sent = p.api.bodies[-1]["messages"][2]["content"][0]
            assert sent["content"] == PRUNED_PLACEHOLDER
            p.settle()  # the answer is stored: wait until the app shows it, so the next key acts on what is there
            await until(pilot, lambda: shown(app) == 8, timeout=SHOWN_WITHIN)

            # Archive the tool call (with its result, the other half of the pair): both leave the next request.
            seen.clear()
            messages.cursor = 1
            await pilot.press("a")
            await settle(pilot)
            if isinstance(app.screen, CachePriceScreen):
                await pilot.press("enter")
                await settle(pilot)
            assert not [m for m in seen if isinstance(m, msg.CommandFailed)]
            history = [*later, {"role": "assistant", "content": [text("Yes.")]}, {"role": "user", "content": "Thanks"},
                       {"role": "assistant", "content": [text("Done.")]}, {"role": "user", "content": "Bye"}]
            p.api.queue(Reply([text("Bye.")]))
            await send(p.url, history)
            archived = p.api.bodies[-1]["messages"]
            assert "toolu_1" not in str(archived) and len(archived) == len(history) - 2


async def test_steering_by_another_process_shows_within_a_second_or_so(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")]))
        await send(p.url, turns())
        p.settle()
        with Store(p.db) as store:
            session = next(s for s, _ in store.list_sessions() if s.source_format == "proxy")
            result = store.load_messages(session.id)[2]
        app = WorkbenchApp(Launch.open(p.db, session.id))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert shown(app) == 4
            with Store(p.db) as store:
                store.add_overlay_events([OverlayEvent(id="other", session_id=session.id, plan_id="other",
                                                       action="prune", message_id=result.id, part_index=0)])

            def pruned() -> bool:
                snapshot = app.main_screen.screen_state
                return snapshot is not None and "pruned" in snapshot.rows.row(2).badges

            await until(pilot, pruned, timeout=SHOWN_WITHIN)


async def test_an_edit_can_wait_for_the_agents_cache_to_go_cold(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")]), Reply([text("again")]))
        await send(p.url, turns())
        p.settle()
        with Store(p.db) as store:
            session = next(s for s, _ in store.list_sessions() if s.source_format == "proxy")
        app = WorkbenchApp(Launch.open(p.db, session.id))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            messages = app.main_screen.query_one(MessageList)
            messages.focus()
            messages.cursor = 2
            await pilot.press("x")
            await settle(pilot)
            assert isinstance(app.screen, CachePriceScreen)
            await pilot.press("w")
            await settle(pilot)
            snapshot = app.main_screen.screen_state
            assert snapshot is not None and "pruned" not in snapshot.rows.row(2).badges, "queued, not applied"
        with Store(p.db) as store:
            [event] = [e for e in store.load_overlay(session.id) if e.action == "prune"]
        assert event.data.get("when") == "cache-cold"
        later = [*turns(), {"role": "assistant", "content": [text("ok")]}, {"role": "user", "content": "more"}]
        await send(p.url, later)
        assert p.api.bodies[-1]["messages"][2] == marked(later)[2], "the cache is warm: the edit waits"


async def test_a_pinned_message_is_refused_for_pruning_and_a_compaction_reaches_the_agents_next_request(
    tmp_path: Path,
) -> None:
    from wire_steering import CONFIG, history, plain_messages

    seen: list[Message] = []
    conversation = history(1)
    with proxied(tmp_path) as p:
        p.api.queue(*(Reply([text("Noted.")]) for _ in range(3)))
        app = WorkbenchApp(Launch.proxy(p.db, p.url, CONFIG))
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await settle(pilot)
            await send(p.url, conversation)
            p.settle()
            await until(pilot, lambda: shown(app) == len(conversation) + 1, timeout=10)
            messages = app.main_screen.query_one(MessageList)
            messages.focus()
            messages.cursor = 2
            await pilot.press("p")
            await settle(pilot)
            if isinstance(app.screen, CachePriceScreen):
                await pilot.press("enter")
            await until(pilot, lambda: any(isinstance(m, msg.PlanApplied) for m in seen), timeout=10)
            await settle(pilot)
            detail = flat(text_of(app.main_screen.query_one(MessageDetail).query_one("#detail-body")))
            assert f"pinned {PINNED_WHY}" in detail, "the detail pane says why strategies pass over it"
            seen.clear()
            await pilot.press("x")
            await settle(pilot)
            failed = [m for m in seen if isinstance(m, msg.CommandFailed)]
            assert failed and "#3 is pinned" in failed[0].text and "\n" not in failed[0].text

            await pilot.press("c")
            await until(pilot, lambda: any(isinstance(m, msg.CompactionPreviewed) for m in seen), timeout=20)
            await settle(pilot)
            await pilot.press("ctrl+s")
            await settle(pilot)
            if isinstance(app.screen, CachePriceScreen):
                await pilot.press("enter")
            await until(pilot, lambda: any(isinstance(m, msg.CompactionApplied) for m in seen), timeout=20)
            later = [*conversation, {"role": "assistant", "content": [text("Noted.")]},
                     {"role": "user", "content": [text("Go on.")]}]
            await send(p.url, later)
            sent = p.api.bodies[-1]["messages"]
            assert len(sent) < len(later)
            assert sent[0]["content"][0]["text"].startswith(SUMMARY_PREFIX)
            assert plain_messages(sent[-2:]) == plain_messages(later[-2:]), "the kept tail as the agent sent it"


async def test_c_with_the_model_summariser_asks_the_proxied_sessions_upstream_with_the_workbenchs_own_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import Select
    from wire_steering import CONFIG, history

    from workbench.tui.widgets.compaction_pane import CompactionPane

    own = "sk-ant-api03-the-workbench-own-key-42"
    monkeypatch.setenv("ANTHROPIC_API_KEY", own)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    conversation = history(1)
    summary = "The user asked to fix calc.py; it was fixed and the notes updated."
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("Noted.")]), Reply([text(summary)]))
        app = WorkbenchApp(Launch.proxy(p.db, p.url, CONFIG))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await send(p.url, conversation)
            p.settle()
            await until(pilot, lambda: shown(app) == len(conversation) + 1, timeout=10)
            await pilot.press("c")
            pane = app.main_screen.query_one(CompactionPane)
            await until(pilot, lambda: pane.plan is not None, timeout=20)
            pane.query_one("#compaction-summariser", Select).value = "llm"
            await until(pilot, lambda: pane.plan is not None and pane.plan.summarizer == "llm", timeout=20)
            assert summary in pane.summary_text
        summarising = p.api.message_requests[-1]
        sent_key = summarising.headers.get("x-api-key") or summarising.headers["authorization"].removeprefix("Bearer ")
        assert sent_key == own, "the workbench's own key, not the agent's"
        assert "summar" in str(summarising.body).lower() and len(p.api.message_requests) == 2
