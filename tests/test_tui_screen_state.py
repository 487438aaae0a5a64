"""The screen state kept one engine event at a time equals the state built from scratch.

Real transcripts (tests/fixtures) are fed to a context a message at a time, as a live session grows, with
budget-only events, overlay changes (prunes dated before and after the requests that follow, undo) and the
fixture's own compaction in between; after each event the kept state must show exactly what a full
recompute shows, and a state handed out earlier must still show what it showed then.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from helpers import CLAUDE_FIXTURES, claude_fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.engine.context.request_log import RequestEstimate
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import Message, Session, TextPart, ToolResultPart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter
from workbench.tui.screen_state import ScreenState, StateKeeper
from workbench.tui.timeline_series import TIMELINE_BUCKETS, TimelineSeries
from workbench.tui.widgets.rows import RowTable

Loaded = tuple[Session, list[Message], list[OverlayEvent]]
_COUNTER = TokenCounter()


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Loaded]:
    """Each Claude Code fixture imported into a real store and read back, as the app reads it."""
    out: dict[str, Loaded] = {}
    with Store(tmp_path_factory.mktemp("screen-state") / "wb.db") as store:
        for key in CLAUDE_FIXTURES:
            session_id = import_file(store, claude_fixture(key)).session.id
            out[key] = (store.get_session(session_id), store.load_messages(session_id), store.load_overlay(session_id))
            _COUNTER.cache.update(store.token_cache(session_id))
    return out


def shown(state: ScreenState) -> tuple[Any, ...]:
    """Everything the screens read of a state."""
    rows = state.rows
    count = len(rows)
    return (
        state.session.id,
        [m.id for m in state.messages],
        [rows.row(i) for i in range(count)],
        [rows.index_of(m.id) for m in state.messages],
        rows.in_context,
        {call: ref for call, ref in rows.tool_calls.items() if ref.position <= count},
        state.budget,
        state.timeline,
        state.undoable,
        state.redoable,
        state.cost,
        state.subagents,
    )


class Live:
    """A context that grows as a live session does, its kept state checked against a full recompute."""

    def __init__(self, session: Session, messages: list[Message], events: list[OverlayEvent]) -> None:
        self.pending = list(messages)
        self.ctx = SessionContext(session, [], events, _COUNTER)
        self.keeper = StateKeeper()
        self.earlier: list[tuple[ScreenState, tuple[Any, ...]]] = []
        self.plans = 0

    def check(self) -> ScreenState:
        kept = self.keeper.state(self.ctx, {"m": ("child",)})
        fresh = ScreenState.compute(self.ctx, subagents={"m": ("child",)})
        assert shown(kept) == shown(fresh)
        self.earlier.append((kept, shown(fresh)))
        return kept

    def append(self, count: int) -> None:
        for message in self.pending[:count]:
            self.ctx.append(message)
        del self.pending[:count]

    def prune(self, pick: int, later: bool) -> bool:
        """Prune a tool result already shown, dated ten minutes after (``later``: the requests that follow come before it) or before the newest message."""
        results = [(m, i) for m in self.ctx.messages for i, p in enumerate(m.parts) if isinstance(p, ToolResultPart)]
        newest = next((m.created_at for m in reversed(self.ctx.messages) if m.created_at is not None), None)
        if not results or newest is None:
            return False
        message, part = results[pick % len(results)]
        self.plans += 1
        when = newest + timedelta(minutes=10) if later else newest - timedelta(minutes=5)
        self.ctx.apply_events([OverlayEvent(id=f"e{self.plans}", session_id=self.ctx.session.id,
                                            plan_id=f"p{self.plans}", action="prune", message_id=message.id,
                                            part_index=part, tokens_saved=100, created_at=when)])
        return True

    def undo(self) -> None:
        live = [e for e in self.ctx.events if not e.undone and e.origin == "user"]
        if live:
            plan = live[-1].plan_id
            self.ctx.events = [e.model_copy(update={"undone": True}) if e.plan_id == plan else e
                               for e in self.ctx.events]
            self.ctx.apply_events([])

    def earlier_states_unchanged(self) -> None:
        for state, then in self.earlier:
            assert shown(state) == then


@pytest.mark.parametrize("key", list(CLAUDE_FIXTURES))
def test_feeding_a_transcript_message_by_message_keeps_the_state_a_full_recompute_gives(
    key: str, loaded: dict[str, Loaded]
) -> None:
    session, messages, events = loaded[key]
    live = Live(session, messages, events)  # the fixture's own overlay (its compaction) from the start
    grown = 0
    while live.pending:
        live.append(1)
        state = live.check()
        grown += state.rows.table is live.keeper.state(live.ctx).rows.table  # a budget-only event: kept as it is
    assert len(live.check().messages) == len(messages)
    assert grown == len(messages), "a budget-only event never rebuilds the table"
    live.earlier_states_unchanged()


def test_a_message_after_the_last_state_grows_it_in_place(loaded: dict[str, Loaded]) -> None:
    """Appending is the cheap path (the same table grows); an overlay change is the rebuild."""
    session, messages, _ = loaded["258c7280"]
    live = Live(session, messages[:50], [])
    live.append(10)
    first = live.check()
    live.append(1)
    assert live.check().rows.table is first.rows.table
    assert live.prune(0, later=True)
    assert live.check().rows.table is not first.rows.table
    assert len(first.messages) == 10 and len(first.rows) == 10  # the earlier state still shows ten
    with pytest.raises(IndexError):
        first.rows.row(10)
    assert first.rows.index_of(messages[10].id) is None


def test_a_summary_written_after_the_kept_tail_goes_first_and_the_state_follows(
    loaded: dict[str, Loaded],
) -> None:
    """A compaction whose summary comes after the messages it keeps: the summary joins the view before them
    (the view did not just grow), so the state is rebuilt, not grown."""
    session, messages, _ = loaded["session-196820da"]
    tail = messages[:12]
    summary = Message(id="summary", session_id=session.id, index=len(tail), role="user", kind="summary",
                      source={"compaction": "p1"}, parts=[TextPart(text="What happened so far.")])
    pivot = OverlayEvent(id="e1", session_id=session.id, plan_id="p1", action="pivot", message_id=tail[6].id,
                         origin="compaction", data={"summary_id": "summary", "trigger": "auto"})
    live = Live(session, [*tail, summary], [pivot])
    while live.pending:
        live.append(1)
        live.check()
    assert live.check().rows.row(len(tail)).item is not None, "the summary is in context"
    live.earlier_states_unchanged()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["append", "budget", "prune", "undo"]), st.integers(0, 40), st.booleans()),
                min_size=1, max_size=25))
def test_any_sequence_of_events_keeps_the_state_a_full_recompute_gives(
    loaded: dict[str, Loaded], ops: list[tuple[str, int, bool]]
) -> None:
    session, messages, events = loaded["session-196820da"]
    live = Live(session, messages, events)
    for op, n, flag in ops:
        if op == "append":
            live.append(n + 1)
        elif op == "prune":
            live.prune(n, later=flag)
        elif op == "undo":
            live.undo()
        live.check()
    live.append(len(live.pending))
    live.check()
    live.earlier_states_unchanged()


def _request_rows(values: list[int]) -> tuple[RowTable, list[RequestEstimate]]:
    messages = [Message(id=f"a{i}", session_id="s", index=i, role="assistant", parts=[TextPart(text="x")])
                for i in range(len(values))]
    table = RowTable()
    table.add(messages, (), 0, {})
    requests = [RequestEstimate(f"a{i}", None, value, value + 7, None) for i, value in enumerate(values)]
    return table, requests


def _envelope(values: list[int]) -> list[int]:
    """What the chart draws of a long series, by its definition: stretches a power of two requests long, as
    few as fit in TIMELINE_BUCKETS, each as its first lowest and first highest request in their order."""
    if len(values) <= 2 * TIMELINE_BUCKETS:
        return values
    width = 1
    while -(-len(values) // width) > TIMELINE_BUCKETS:
        width *= 2
    points: list[int] = []
    for start in range(0, len(values), width):
        stretch = range(start, min(start + width, len(values)))
        low, high = min(stretch, key=values.__getitem__), max(stretch, key=values.__getitem__)
        points += [values[i] for i in sorted((low, high))]
    return points


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 9 * TIMELINE_BUCKETS), st.sampled_from([3, 200_000]), st.randoms(use_true_random=False))
def test_a_long_series_grown_one_request_at_a_time_draws_what_it_draws_built_at_once(
    count: int, spread: int, rnd: random.Random
) -> None:
    """Past 2 × TIMELINE_BUCKETS requests the chart shows stretches of requests: the same ones however the
    series grew, at most 2 × TIMELINE_BUCKETS points, each stretch's lowest and highest request kept (the
    first of equals: a small spread makes many)."""
    values = [rnd.randint(0, spread) for _ in range(count)]
    table, requests = _request_rows(values)
    at_once = TimelineSeries.build(requests, table, ())
    grown = TimelineSeries(())
    for request in requests:
        grown.add([request], table)
    budget = SessionContext(Session(id="s"), [], []).budget()
    drawn = at_once.data(budget, None)
    assert grown.data(budget, None) == drawn
    assert len(drawn.reported) <= max(len(values), 2 * TIMELINE_BUCKETS)
    if values:
        assert max(values) in drawn.reported and min(values) in drawn.reported  # every peak and drop stays
    assert list(drawn.reported) == _envelope(values)
    assert list(drawn.estimated) == [value + 7 for value in _envelope(values)]
