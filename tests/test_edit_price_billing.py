"""The predicted price of an edit against what an upstream that follows the API's cache rules bills for it.

A Claude Code-like client (a cache mark on the system prompt and one on the last block of its last message)
runs a long tool-calling session through the proxy against the loopback API with a prompt cache
(``loopback_cache``: entries by prefix hash, a 20-block lookback from each mark, 5-minute and 1-hour TTLs,
billed in its own tokens). An edit is priced, applied, and the agent's next request goes through the proxy
with the edit: the tokens the workbench said it would write again must be within 5% of what the upstream
billed as written, less the new turn's blocks, which any request writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
import pytest
from loopback_api import tool_use
from loopback_cache import PromptCache, tokens_of
from proxy_support import TOOLS, Proxied, proxied

from workbench.engine.context.pricing import token_cost
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.edit_price import EditPrice, edit_price, plan_changes
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.strategies.manual import find_message, plan_action
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.request_marks import request_marks
from workbench.engine.transcript.store import Store

MODEL = "claude-opus-4-6"
ROUNDS = 30
"""Tool calls in the session: 2 blocks each, 60 message blocks in all."""


def mark(ttl: str) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def system(ttl: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": "You are a careful coding agent. " * 40, "cache_control": mark(ttl)},
            {"type": "text", "text": "# claudeMd\nAlways run the tests."}]


def call(n: int) -> dict[str, Any]:
    return tool_use(f"toolu_{n:02d}", "Read", {"path": f"src/module_{n}.py"})


def result(n: int) -> dict[str, Any]:
    body = "".join(f"def function_{n}_{line}(value):\n    return value * {line}\n" for line in range(60))
    return {"type": "tool_result", "tool_use_id": f"toolu_{n:02d}", "content": body}


def history(rounds: int, ttl: str) -> list[dict[str, Any]]:
    """The first question and ``rounds`` tool calls with their results; the last block marked, as Claude Code
    marks it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Read the modules."}]}]
    for n in range(rounds):
        messages += [{"role": "assistant", "content": [call(n)]}, {"role": "user", "content": [result(n)]}]
    last = messages[-1]["content"][-1]
    messages[-1]["content"][-1] = {**last, "cache_control": mark(ttl)}
    return messages


def send(client: anthropic.Anthropic, rounds: int, ttl: str) -> None:
    client.messages.create(model=MODEL, max_tokens=1024, system=system(ttl), tools=TOOLS,  # type: ignore[arg-type]
                           messages=history(rounds, ttl))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Case:
    name: str
    rounds_back: int
    """The edit prunes the result of the tool call this many rounds before the last."""
    ttl: str
    later: timedelta
    """Time between the agent's latest request and the edit (and its next request)."""


CASES = [
    Case("near the end", 3, "5m", timedelta()),
    Case("in the middle, beyond 20 blocks from any mark", 18, "5m", timedelta()),
    Case("with a 1-hour TTL, ten minutes later", 5, "1h", timedelta(minutes=10)),
]


def session(p: Proxied, cache: PromptCache, ttl: str) -> str:
    p.api.queue(*(lambda body, n=n: cache.answer(body, [call(n)]) for n in range(1, ROUNDS + 2)))
    client = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
    for rounds in range(1, ROUNDS + 1):
        send(client, rounds, ttl)
    p.settle()
    with Store(p.db) as store:
        return next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")


def price_and_apply(db: Path, session_id: str, rounds_back: int, now: datetime) -> EditPrice:
    with Store(db) as store:
        ctx = SessionContext.load(store, session_id)
        target = find_message(ctx, str(2 * (ROUNDS - rounds_back) + 1))  # the result of that round's call
        plan = measure(ctx, plan_action(ctx, "prune", target, StrategiesConfig()))
        assert plan.tokens_saved > 0
        price = edit_price(ctx.view(), plan_changes(plan), request_marks(store, session_id), now)
        apply(store, ctx, plan)
    return price


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_predicted_rewrite_is_what_the_upstream_bills(tmp_path: Path, case: Case) -> None:
    with proxied(tmp_path) as p:
        cache = PromptCache()
        session_id = session(p, cache, case.ttl)
        cache.offset = case.later
        price = price_and_apply(p.db, session_id, case.rounds_back, datetime.now(UTC) + case.later)
        client = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        send(client, ROUNDS + 1, case.ttl)  # the agent's next request, through the proxy, with the edit
        sent = p.api.bodies[-1]["messages"]
        assert "content" in sent[-1]["content"][0] and sent[-3]["content"][0]["tool_use_id"]
        billed = cache.bills[-1]
        new_turn = sum(tokens_of(block) for message in sent[-2:] for block in message["content"])
        rewritten = billed.written - new_turn

        assert not price.cold and price.ttl == case.ttl
        assert rewritten > 0
        assert abs(price.rewritten - rewritten) <= 0.05 * rewritten, (price.rewritten, rewritten, price.describe())
        if case.ttl == "1h":
            assert billed.written_1h == billed.written, "the upstream wrote at the hour's price"
            assert price.extra_cost is not None
            one_hour = token_cost(price.rewritten, MODEL, "cache_write_1h")
            assert price.extra_cost < one_hour and price.extra_cost > token_cost(price.rewritten, MODEL,
                                                                                 "cache_write_5m") * 0.9
        edited_block = 2 * (ROUNDS - case.rounds_back)  # that message's index in the request
        after_edit = sum(tokens_of(b) for m in sent[edited_block:-2] for b in m["content"])
        if case.rounds_back > 10:  # no mark reaches back to the edit: the upstream resumed from the system prompt
            assert rewritten > after_edit * 1.2, "the lookback re-wrote more than what follows the edit"
        else:
            assert rewritten <= after_edit * 1.05


def test_a_five_minute_cache_is_cold_ten_minutes_later_on_both_sides(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        cache = PromptCache()
        session_id = session(p, cache, "5m")
        cache.offset = timedelta(minutes=10)
        price = price_and_apply(p.db, session_id, 3, datetime.now(UTC) + cache.offset)
        send(anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0), ROUNDS + 1, "5m")
    assert price.cold and price.extra_cost == 0 and price.payback == 0
    assert cache.bills[-1].read == 0, "the upstream's cache had expired too"
