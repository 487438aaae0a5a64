"""The price of an edit to a proxied agent's context, and edits queued until its prompt cache is cold."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
from loopback_api import Reply, text, tool_use
from proxy_support import proxied, request

from workbench.engine.context.pricing import token_cost
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.edit_price import CACHE_LIFETIME, Change, edit_price
from workbench.engine.transcript.request_marks import request_marks
from workbench.engine.transcript.store import Store

MODEL = "claude-opus-4-6"


def turns(n: int) -> list[dict[str, Any]]:
    """``n`` rounds of a tool call and its (large) result, after a first question; the last block carries a
    cache mark, as Claude Code marks it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for i in range(n):
        messages += [
            {"role": "assistant", "content": [tool_use(f"toolu_{i}", "Read", {"path": f"f{i}.py"})]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                          "content": f"line {i}\n" * 400}]},
        ]
    return marked(messages)


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with a cache mark on their last block (and on no other message block)."""
    out = [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
           if isinstance(m["content"], list) else dict(m) for m in messages]
    last = out[-1]
    blocks = last["content"] if isinstance(last["content"], list) else [text(last["content"])]
    last["content"] = [*blocks[:-1], {**blocks[-1], "cache_control": {"type": "ephemeral"}}]
    return out


def record(tmp_path: Path) -> tuple[Path, str]:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("read them")]))
        anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0).messages.create(**request(turns(3)))
        p.settle()
        with Store(p.db) as store:
            return p.db, next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")


def test_an_early_edit_rewrites_the_cache_after_it_and_pays_back_over_later_requests(tmp_path: Path) -> None:
    db, session_id = record(tmp_path)
    with Store(db) as store:
        ctx = SessionContext.load(store, session_id)
        marks = request_marks(store, session_id)
    view = ctx.view()
    messages = [item for item in view.items if item.kind == "message"]
    first_result = messages[2]
    saved = first_result.tokens - 20
    now = datetime.now(UTC)
    assert marks is not None and marks.sent_at > now - timedelta(minutes=1)
    early = [Change(str(first_result.message_id), 0, saved)]
    warm = edit_price(view, early, marks, now)
    tail = sum(item.tokens for item in messages[2:])
    assert not warm.cold and warm.ttl == "5m"
    assert abs(warm.rewritten - (tail - saved)) <= 0.02 * tail, "from the edit to the last mark, in what the API counted"
    assert warm.extra_cost is not None and warm.saved_cost is not None
    expected = token_cost(warm.rewritten, MODEL, "cache_write_5m") - token_cost(warm.rewritten + saved, MODEL,
                                                                                "cache_read")
    assert abs(warm.extra_cost - expected) <= 0.05 * expected
    assert warm.payback is not None and warm.payback >= 1
    assert "writes" in warm.describe() and "pays back after" in warm.describe()
    assert f"{warm.warm_read:,} tokens read" in warm.assumption and warm.warm_read > tail

    later = edit_price(view, [Change(str(messages[-1].message_id), 0, 10)], marks, now)
    assert later.rewritten < warm.rewritten, "a later message breaks less of the cache"

    cold = edit_price(view, early, marks, now + CACHE_LIFETIME + timedelta(seconds=1))
    assert cold.cold and cold.extra_cost == 0 and cold.payback == 0 and "gone cold" in cold.describe()


def test_an_edit_past_the_last_mark_breaks_nothing_and_pays_back_immediately(tmp_path: Path) -> None:
    db, session_id = record(tmp_path)
    with Store(db) as store:
        ctx = SessionContext.load(store, session_id)
        marks = request_marks(store, session_id)
    view = ctx.view()
    answer = view.items[-1]  # the agent's answer to the latest request: not in any request yet
    price = edit_price(view, [Change(str(answer.message_id), 0, 5)], marks, datetime.now(UTC))
    assert price.rewritten == 0 and price.payback == 0 and "pays back immediately" in price.describe()


def test_a_queued_prune_waits_for_a_cold_cache_then_applies_from_that_request_on(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(*(Reply([text(f"answer {n}")]) for n in range(4)))
        api = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        history = turns(2)
        api.messages.create(**request(history))
        p.settle()
        with Store(p.db) as store:
            session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
            target = store.load_messages(session_id)[2]
        cli = [sys.executable, "-m", "workbench", "--db", str(p.db), "prune", session_id, target.id,
               "--when-cache-cold"]
        done = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "cache: the next request writes" in done.stdout and "queued" in done.stdout
        with Store(p.db) as store:
            view = SessionContext.load(store, session_id).view()
        assert "pruned" not in (view.item_for(target.id) or view.items[0]).badges, "queued: not in the view yet"

        history += [{"role": "assistant", "content": [text("answer 0")]}, {"role": "user", "content": "more"}]
        api.messages.create(**request(marked(history)))
        assert p.api.bodies[-1]["messages"][2] == history[2], "the cache is warm: nothing changes yet"

        for group in p.server.recorder.threads.groups().values():  # five minutes pass without a request
            for thread in group:
                assert thread.last_request_at is not None
                thread.last_request_at -= CACHE_LIFETIME + timedelta(seconds=1)
        history += [{"role": "assistant", "content": [text("answer 1")]}, {"role": "user", "content": "again"}]
        api.messages.create(**request(marked(history)))
        assert p.api.bodies[-1]["messages"][2]["content"][0]["content"] == PRUNED_PLACEHOLDER
        history += [{"role": "assistant", "content": [text("answer 2")]}, {"role": "user", "content": "last"}]
        api.messages.create(**request(marked(history)))
        assert p.api.bodies[-1]["messages"][2]["content"][0]["content"] == PRUNED_PLACEHOLDER, "and stays"
        p.settle()
        with Store(p.db) as store:
            view = SessionContext.load(store, session_id).view()
        item = view.item_for(target.id)
        assert item is not None and "pruned" in item.badges, "active now: the view shows what the agent gets"


def test_queueing_is_only_for_proxied_sessions(tmp_path: Path) -> None:
    from helpers import claude_fixture

    done = subprocess.run([sys.executable, "-m", "workbench", "--db", str(tmp_path / "w.db"), "prune",
                           str(claude_fixture("short")), "3", "--when-cache-cold"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "for proxied sessions" in done.stderr


def test_a_queued_prune_waits_an_hour_when_the_agent_asked_for_an_hours_cache(tmp_path: Path) -> None:
    def hour(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = marked(messages)
        last = out[-1]["content"][-1]
        last["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
        return out

    def pause(p: Any, length: timedelta) -> None:
        for group in p.server.recorder.threads.groups().values():
            for thread in group:
                assert thread.last_request_at is not None
                thread.last_request_at -= length

    with proxied(tmp_path) as p:
        p.api.queue(*(Reply([text(f"answer {n}")]) for n in range(4)))
        api = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        history = turns(2)
        api.messages.create(**request(hour(history)))
        p.settle()
        with Store(p.db) as store:
            session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
            target = store.load_messages(session_id)[2]
        cli = [sys.executable, "-m", "workbench", "--db", str(p.db), "prune", session_id, target.id,
               "--when-cache-cold"]
        done = subprocess.run(cli, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert "1h write price" in done.stdout and "it lives an hour" in done.stdout

        pause(p, CACHE_LIFETIME + timedelta(minutes=1))  # six minutes: an hour's cache is still warm
        history += [{"role": "assistant", "content": [text("answer 0")]}, {"role": "user", "content": "more"}]
        api.messages.create(**request(hour(history)))
        assert p.api.bodies[-1]["messages"][2]["content"][0]["content"] != PRUNED_PLACEHOLDER, "still waiting"

        pause(p, timedelta(hours=1, seconds=1))
        history += [{"role": "assistant", "content": [text("answer 1")]}, {"role": "user", "content": "again"}]
        api.messages.create(**request(hour(history)))
        assert p.api.bodies[-1]["messages"][2]["content"][0]["content"] == PRUNED_PLACEHOLDER, "gone cold: applied"
