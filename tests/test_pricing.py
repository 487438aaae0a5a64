"""Cost: the price table applied to reported usage, checked against the real transcripts read independently."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CLAUDE_FIXTURES,
    REPO_ROOT,
    cc_assistant,
    cc_usage,
    cc_user,
    claude_fixture,
    last_usage_by_id,
    raw_records,
    text_block,
    write_jsonl,
)

from workbench.cli import main
from workbench.engine.context.pricing import CostTally, price_table, prices_for, request_cost, session_cost, token_cost
from workbench.engine.context.report import inspect_report
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.limits import KNOWN_MODELS, family
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import Message, TextPart, Usage
from workbench.engine.transcript.store import Store

TABLE = tomllib.loads((REPO_ROOT / "workbench" / "data" / "prices.toml").read_text(encoding="utf-8"))


def _independent_cost(path: Path) -> tuple[float, dict[str, float]]:
    """Group the raw assistant lines by ``message.id``, take the last line's usage, multiply by the table."""
    models: dict[str, str] = {}
    for _, record in raw_records(path):
        if record.get("type") == "assistant":
            models[record["message"]["id"]] = record["message"]["model"]
    per_request: dict[str, float] = {}
    for message_id, usage in last_usage_by_id(path).items():
        entry = TABLE["models"][re.sub(r"-\d{8}$", "", models[message_id])]
        sent = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        long = entry.get("long_context")
        rates = long if long and sent > long["above"] else entry
        one_hour = usage.get("cache_creation", {}).get("ephemeral_1h_input_tokens", 0)
        per_request[message_id] = (
            usage["input_tokens"] * rates["input"]
            + usage["output_tokens"] * rates["output"]
            + (usage["cache_creation_input_tokens"] - one_hour) * rates["cache_write_5m"]
            + one_hour * rates["cache_write_1h"]
            + usage["cache_read_input_tokens"] * rates["cache_read"]
        ) / 1_000_000
    return sum(per_request.values()), per_request


@pytest.mark.parametrize("key", sorted(CLAUDE_FIXTURES))
def test_real_claude_code_session_cost_equals_usage_times_the_table(key: str, tmp_path: Path) -> None:
    path = claude_fixture(key)
    expected_total, expected = _independent_cost(path)
    assert len(expected) == CLAUDE_FIXTURES[key].assistant_ids
    with Store(tmp_path / "wb.db") as store:
        session_id = import_file(store, path).session.id
        report = inspect_report(SessionContext.load(store, session_id))
    cost = report["cost"]
    assert cost["basis"] == "reported" and cost["unpriced_models"] == []
    assert {r["message_id"]: r["usd"] for r in cost["requests"]} == pytest.approx(expected)
    assert cost["usd"] == pytest.approx(expected_total)
    assert expected_total > 0
    for request in report["requests"]:
        assert request["cost_usd"] == pytest.approx(expected[request["message_id"]])


def test_one_hour_cache_writes_cost_more_than_five_minute_ones(tmp_path: Path) -> None:
    """The opus fixtures write to the one-hour cache: priced at the 5-minute rate they would cost less."""
    path = claude_fixture("short")
    with Store(tmp_path / "wb.db") as store:
        session_id = import_file(store, path).session.id
        ctx = SessionContext.load(store, session_id)
    (message,) = [m for m in ctx.messages if m.usage]
    assert message.usage is not None and message.usage.cache_creation_1h_input_tokens == 13_835
    five_minutes = message.usage.model_copy(update={"cache_creation_1h_input_tokens": 0})
    assert request_cost(message.usage) - request_cost(five_minutes) == pytest.approx(13_835 * (10 - 6.25) / 1e6)


@pytest.mark.parametrize(
    ("model", "entry"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-8", "claude-opus-4-8"),
        ("claude-opus-4-6[1m]", "claude-opus-4-6"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-haiku-4-5", "claude-haiku-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
    ],
)
def test_prices_for_reads_every_form_of_an_id(model: str, entry: str) -> None:
    prices = prices_for(model)
    assert prices is not None and prices.model == entry and prices.exact
    assert prices.as_of == price_table().as_of == TABLE["as_of"]


def test_an_unknown_claude_id_is_priced_by_family_and_says_so() -> None:
    prices = prices_for("claude-opus-9-1")
    assert prices is not None and not prices.exact and family(prices.model) == "opus"
    assert prices.model == next(k for k in TABLE["models"] if family(k) == "opus")
    assert prices_for("gpt-6.2-sol") is None and prices_for(None) is None and prices_for("") is None
    assert request_cost(Usage(input_tokens=1000, output_tokens=1000), "gpt-6.2-sol") == 0.0
    assert prices_for("gpt-5.7") is None, "a newer OpenAI version is not priced as an older one"


def test_long_context_rates_apply_to_the_whole_request_above_the_threshold() -> None:
    under = Usage(input_tokens=10, cache_read_input_tokens=199_990, output_tokens=1_000)
    over = Usage(input_tokens=11, cache_read_input_tokens=199_990, output_tokens=1_000)
    assert request_cost(under, "claude-sonnet-4-5") == pytest.approx((10 * 3 + 199_990 * 0.3 + 1_000 * 15) / 1e6)
    assert request_cost(over, "claude-sonnet-4-5") == pytest.approx((11 * 6 + 199_990 * 0.6 + 1_000 * 22.5) / 1e6)
    # Opus 4.6's 1M context is billed at the standard rates.
    assert request_cost(over, "claude-opus-4-6") == pytest.approx((11 * 5 + 199_990 * 0.5 + 1_000 * 25) / 1e6)


def test_token_cost_prices_tokens_at_one_rate() -> None:
    assert token_cost(1_000_000, "claude-opus-4-8") == pytest.approx(5.0)
    assert token_cost(1_000_000, "claude-opus-4-8", "cache_read") == pytest.approx(0.5)
    assert token_cost(1_000_000, "claude-sonnet-4-5", "input", input_total=300_000) == pytest.approx(6.0)
    assert token_cost(1_000, "mystery-model") == 0.0


def test_the_table_prices_every_claude_model_the_limits_table_knows() -> None:
    claude = {k for k in KNOWN_MODELS if k.startswith("claude-")}
    assert claude == {k for k in TABLE["models"] if k.startswith("claude-")}
    for name, entry in ((k, v) for k, v in TABLE["models"].items() if k.startswith("claude-")):
        assert entry["cache_write_1h"] == pytest.approx(2 * entry["input"]), name
        assert entry["cache_write_5m"] == pytest.approx(1.25 * entry["input"], rel=0.05), name
        assert entry["output"] == pytest.approx(5 * entry["input"]), name


def _message(index: int, usage: Usage | None, model: str = "claude-haiku-4-5") -> Message:
    return Message(id=f"m{index}", session_id="s", index=index, role="assistant", parts=[TextPart(text="x")],
                   model=model, usage=usage)


def test_session_cost_says_on_what_it_rests() -> None:
    reported = session_cost([_message(0, Usage(input_tokens=1_000_000, model="claude-haiku-4-5"))])
    assert (reported.basis, reported.label, reported.usd) == ("reported", "$1.00", pytest.approx(1.0))
    synthetic = session_cost([_message(0, Usage(input_tokens=1_000_000, model="claude-haiku-4-5", synthetic=True))])
    assert synthetic.basis == "estimated" and synthetic.label == "≈$1.00 est."
    nothing = session_cost([_message(0, None)])
    assert nothing.basis == "none" and nothing.label == "cost not known: no usage reported"
    unpriced = session_cost([_message(0, Usage(input_tokens=5, model="gpt-6-sol"), model="gpt-6-sol")])
    assert unpriced.unpriced == ("gpt-6-sol",) and unpriced.label == "cost not known: no price for gpt-6-sol"
    mixed = session_cost([_message(0, Usage(input_tokens=1_000_000, model="claude-haiku-4-5")),
                          _message(1, Usage(input_tokens=5, model="gpt-6-sol"), model="gpt-6-sol")])
    assert mixed.label == "$1.00 + unpriced" and [r.priced for r in mixed.requests] == [True, False]


def test_a_kept_tally_is_restored_with_its_tables_date_without_reading_the_table() -> None:
    """Reopening a session shows its stored cost; the price table is read only to price a new request."""
    tally = CostTally().add_all([_message(0, Usage(input_tokens=1_000_000, model="claude-haiku-4-5"))])
    figures, columns = tally.state({"m0": 0})
    state = json.loads(json.dumps(figures))
    stored = {name: memoryview(column.tobytes()).cast(column.typecode) for name, column in columns.items()}  # as read
    price_table.cache_clear()
    restored = CostTally.restore(state, stored, ["m0"]).result()
    assert price_table.cache_info().currsize == 0  # not read
    assert restored.usd == pytest.approx(1.0) and restored.label == "$1.00"
    assert restored.as_of == price_table().as_of
    assert [(r.message_id, r.usd) for r in restored.requests] == [(r.message_id, r.usd) for r in tally.result().requests]
    older = {key: value for key, value in state.items() if key != "as_of"}  # kept before the date was
    assert CostTally.restore(older, stored, ["m0"]).result().as_of == price_table().as_of


def test_a_live_session_adds_each_response_to_its_cost(tmp_path: Path) -> None:
    records = [cc_user("u1", "hello"), cc_assistant("a1", "msg_1", [text_block("hi")], cc_usage(1_000_000, 0),
                                                     model="claude-haiku-4-5")]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    with Store(tmp_path / "wb.db") as store:
        ctx = SessionContext.load(store, import_file(store, path).session.id)
    assert ctx.cost().usd == pytest.approx(1.0)
    ctx.append(_message(2, Usage(output_tokens=200_000, model="claude-haiku-4-5")).model_copy(
        update={"session_id": ctx.session.id}))
    assert ctx.cost().usd == pytest.approx(2.0) and len(ctx.cost().requests) == 2


def test_inspect_prints_the_cost_per_request_and_per_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = claude_fixture("subagent")
    expected_total, _ = _independent_cost(path)
    assert main(["inspect", str(path), "--db", str(tmp_path / "wb.db")]) == 0
    out = capsys.readouterr().out
    assert f"cost ${expected_total:,.2f} · 12 of 12 requests priced" in out
    assert "Requests" in out and out.count("claude-opus-4-6") >= 12
    assert main(["inspect", str(path), "--json", "--db", str(tmp_path / "wb.db")]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert report["cost"]["label"] == f"${expected_total:,.2f}"
    assert report["cost"]["prices_as_of"] == TABLE["as_of"].isoformat()


def test_openai_models_are_priced_without_a_cache_write_premium() -> None:
    """OpenAI caches prefixes by itself: a cache write costs the input rate, a hit the cached-input rate."""
    openai = {k: v for k, v in TABLE["models"].items() if not k.startswith("claude-")}
    assert "gpt-5.5" in openai and set(openai) <= set(KNOWN_MODELS) | {"gpt-5.4-mini", "gpt-5.4-nano", "gpt-5-mini",
                                                                       "gpt-5-nano", "gpt-4.1-mini", "gpt-4o-mini"}
    for name, entry in openai.items():
        assert entry["cache_write_5m"] == entry["cache_write_1h"] == entry["input"], name
        assert entry["cache_read"] < entry["input"] < entry["output"], name
    usage = Usage(input_tokens=1_000, cache_read_input_tokens=9_000, output_tokens=100, model="openai/gpt-5.5")
    assert request_cost(usage) == pytest.approx((1_000 * 5.0 + 9_000 * 0.5 + 100 * 30.0) / 1e6)
    mini = prices_for("gpt-5-mini-2025-08-07")
    assert mini is not None and mini.model == "gpt-5-mini"
