"""The price of an edit, unit by unit: the cache rules it follows, the TTL it prices, and how it reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workbench.engine.context.pricing import format_usd, prices_for, token_cost
from workbench.engine.context.view import ContextItem, ContextView
from workbench.engine.plans.edit_price import Change, EditPrice, edit_price
from workbench.engine.providers.cache_rules import LOOKBACK, bill, found_entry, live_entries
from workbench.engine.transcript.request_marks import MarkAt, RequestMarks, ttl_of

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
MODEL = "claude-opus-4-6"


@pytest.mark.parametrize(("usd", "shown"), [
    (0.0, "$0.00"), (0.0004, "< $0.001"), (0.00000001, "< $0.001"), (0.001, "$0.001"), (0.0042, "$0.004"),
    (0.25, "$0.25"), (1234.5, "$1,234.50"), (-0.0042, "-$0.004"), (-0.0001, "> -$0.001"),
])
def test_amounts_under_a_cent_say_so_rather_than_reading_as_nothing(usd: float, shown: str) -> None:
    assert format_usd(usd) == shown


def test_a_mark_finds_an_entry_at_most_twenty_positions_back_counting_its_own() -> None:
    assert found_entry([40], {40 - LOOKBACK + 1: None}, 100) == 40 - LOOKBACK + 1
    assert found_entry([40], {40 - LOOKBACK: None}, 100) == -1, "one further back is out of reach"
    assert found_entry([40, 10], {5: None, 30: None}, 100) == 30, "the longest prefix any mark found"
    assert found_entry([40], {30: None}, 30) == -1, "an entry at or after the first change no longer matches"
    assert found_entry([40], {25: None, 29: None}, 30) == 29


def test_a_request_reads_up_to_the_entry_writes_up_to_its_last_mark_and_sends_the_rest_uncached() -> None:
    tokens = [100] * 10
    marks = [MarkAt(2, "1h", NOW), MarkAt(7, "5m", NOW)]
    billed = bill(tokens, marks, {2: "1h"}, first_changed=5)
    assert (billed.read, dict(billed.written), billed.uncached, billed.hit) == (300, {"5m": 500}, 200, 2)
    cold = bill(tokens, marks, {}, first_changed=10)
    assert dict(cold.written) == {"1h": 300, "5m": 500} and cold.read == 0


def test_the_ttl_a_mark_asks_for_sets_how_long_its_entry_lives() -> None:
    assert ttl_of({"type": "ephemeral", "ttl": "1h"}) == "1h"
    assert ttl_of({"type": "ephemeral"}) == ttl_of({"type": "ephemeral", "ttl": "5m"}) == "5m"
    marks = [MarkAt(3, "5m", NOW), MarkAt(9, "1h", NOW)]
    assert live_entries(marks, NOW + timedelta(minutes=4)) == {3: "5m", 9: "1h"}
    assert live_entries(marks, NOW + timedelta(minutes=10)) == {9: "1h"}
    assert live_entries(marks, NOW + timedelta(minutes=61)) == {}


def _session(ttl: str, rounds: int = 30) -> tuple[ContextView, RequestMarks]:
    """A view of ``rounds`` 1,000-token messages after a 2,000-token prompt, and a latest request that marked
    the prompt and its last message (one block each) with ``ttl``, as did every request before it."""
    items = [ContextItem(kind="system", tokens=2_000, components={"system": 2_000})]
    items += [ContextItem(kind="message", tokens=1_000, components={"user": 1_000}, message_id=f"m{n}",
                          role="user" if n % 2 == 0 else "assistant") for n in range(rounds)]
    view = ContextView(session_id="s", model=MODEL, items=tuple(items), estimate_source="estimated")
    tl = "1h" if ttl == "1h" else "5m"
    earlier = tuple(MarkAt(position, tl, NOW) for position in [0, *range(1, rounds)])
    marks = RequestMarks(sent_at=NOW, prompt_blocks=1, messages=tuple((f"m{n}", 1) for n in range(rounds)),
                         marks=(MarkAt(0, tl, NOW), MarkAt(rounds, tl, NOW)), earlier=earlier, added_blocks=1,
                         usage=None)
    return view, marks


def test_an_hour_ttl_stays_warm_after_ten_minutes_and_writes_at_twice_the_input_price() -> None:
    later = NOW + timedelta(minutes=10)
    view, hour = _session("1h")
    change = [Change("m25", 0, 600)]
    warm = edit_price(view, change, hour, later)
    assert not warm.cold and warm.ttl == "1h" and warm.rewritten == 5_000 - 600
    prices = prices_for(MODEL)
    assert prices is not None and prices.standard.cache_write_1h == 2 * prices.standard.input
    expected = token_cost(4_400, MODEL, "cache_write_1h") - token_cost(5_000, MODEL, "cache_read")
    assert warm.extra_cost == pytest.approx(expected)
    assert "1h write price" in warm.describe() and "an hour" in warm.assumption

    view, five = _session("5m")
    assert edit_price(view, change, five, later).cold, "the five-minute cache is gone after ten"
    fresh = edit_price(view, change, five, NOW + timedelta(minutes=1))
    assert fresh.extra_cost == pytest.approx(token_cost(4_400, MODEL, "cache_write_5m")
                                             - token_cost(5_000, MODEL, "cache_read"))
    assert fresh.extra_cost is not None and warm.extra_cost > fresh.extra_cost


def test_an_edit_beyond_the_lookback_rewrites_from_the_prompt() -> None:
    view, marks = _session("5m")
    far = edit_price(view, [Change("m3", 0, 600)], marks, NOW)
    assert far.rewritten == 30_000 - 600, "no mark reaches back to m2: everything after the system prompt"
    assert f"{32_000:,} tokens read" in far.assumption


def test_the_read_price_comes_from_the_models_row_of_the_table() -> None:
    view, marks = _session("5m")
    change = [Change("m29", 0, 500)]
    cheap = edit_price(ContextView("s", "claude-opus-4-6", view.items, "estimated"), change, marks, NOW)
    dear = edit_price(ContextView("s", "claude-opus-4-1", view.items, "estimated"), change, marks, NOW)
    assert cheap.saved_cost == pytest.approx(token_cost(500, "claude-opus-4-6", "cache_read"))
    assert dear.saved_cost == pytest.approx(token_cost(500, "claude-opus-4-1", "cache_read"))


def test_pays_back_immediately_when_the_edit_costs_nothing_more() -> None:
    free = EditPrice(rewritten=100, saved=400, cold=False, extra_cost=0.0, saved_cost=0.0002)
    assert free.payback == 0 and "pays back immediately" in free.describe()
    assert "after 0" not in free.describe()
    tiny = EditPrice(rewritten=100, saved=40, cold=False, extra_cost=0.0004, saved_cost=0.00002)
    assert "(< $0.001 more)" in tiny.describe() and "(< $0.001 per request)" in tiny.describe()
    assert "pays back after 20 requests" in tiny.describe()
