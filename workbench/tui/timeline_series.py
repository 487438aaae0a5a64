"""The timeline chart's series (context size per request), grown one request at a time.

A live session adds a request with most assistant messages; the series, the places of the drops and the
envelope of a long series are kept up to date in O(that request), so a streamed message never walks the
transcript again. A change of the overlay starts a new series (the session's view was rebuilt anyway), built
in bulk: an opened session's 25,000 requests cost no Python step each beyond reading their numbers, and their
messages' times are worked out only when the overlay holds a dated change to place.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from workbench.engine.context.budget import Budget
from workbench.engine.context.pricing import SessionCost
from workbench.engine.context.request_log import RequestEstimate, RequestLog
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.tui.widgets.rows import RowTable

DROP_ACTIONS = {"prune": "prune", "offload": "offload", "archive": "archive"}
"""Overlay actions the timeline marks as drops (besides compactions)."""
TIMELINE_BUCKETS = 100
"""A series of more than twice this many requests is drawn as at most this many stretches of requests, each
by its lowest and highest request: the chart's plot is 46 cells, 92 braille dots, wide (the timeline is
52 columns), so 200 points are two a dot; drawing all 25,000 requests of a 50,000-message session takes
0.45 s for the same picture (it took over a second with plotext), and 200 points at most 5 ms. The
stretches are a power of two requests long, so a new request changes only the last one (and when their
number would pass the limit, neighbours merge in pairs)."""


@dataclass(frozen=True, slots=True)
class Drop:
    """Something that made the context smaller, placed between two requests."""

    at: float
    """Request position (0-based, fractional: between request ``int(at)`` and the next)."""
    kind: str
    """``compaction``, ``prune``, ``offload`` or ``archive``."""
    tokens: int = 0


@dataclass(frozen=True)
class TimelineData:
    """Context size per request: what the API reported and what the engine had estimated just before."""

    reported: tuple[int, ...] = ()
    estimated: tuple[int, ...] = ()
    drops: tuple[Drop, ...] = ()
    next_estimate: int | None = None
    """The live estimate of the next request, drawn after the last one."""
    warn_at: int = 0
    compact_at: int = 0
    cost: str = ""
    """What the session's requests cost so far (``SessionCost.short``), shown in the title."""
    last_cost: str = ""
    """What the latest request cost."""
    scripted: bool = False
    """The "reported" sizes came from a scripted provider (the offline demo), not from an API."""

    @property
    def key(self) -> tuple[object, ...]:
        """Equal keys draw the same chart (redrawn only when this changes: not on every budget change)."""
        return (self.reported, self.estimated, self.drops, self.warn_at, self.compact_at)


class TimelineSeries:
    """The requests of one view of a session, with what the chart draws of them (engine thread only)."""

    def __init__(self, events: Sequence[OverlayEvent]) -> None:
        self._events = tuple(events)
        self.reported: list[int] = []
        self.estimated: list[int] = []
        self._positions: list[int] = []
        """Transcript index of each request's message, sorted."""
        self._times: list[datetime] | None = None
        """When each request's message was written (UTC, naive), sorted; None until a drop is placed by them."""
        self._width = 1
        self._buckets: list[list[int]] = []
        """[lowest, highest] request of each stretch of ``_width`` requests."""
        self._markers = {_marker(e) for e in self._events if e.action == "pivot"}
        self._drops: list[Drop] = []
        self._drops_placed = False
        self._last_change: datetime | None = None
        """The latest overlay change dated: a request written no later moves that drop."""
        self._series: tuple[tuple[int, ...], tuple[int, ...], tuple[Drop, ...]] | None = None
        """What :meth:`data` last drew, while no request or drop came since."""

    @classmethod
    def build(cls, requests: Sequence[RequestEstimate], table: RowTable,
              events: Sequence[OverlayEvent]) -> TimelineSeries:
        """What :meth:`add` gives for all ``requests`` at once, in bulk."""
        series = cls(events)
        series.reported, series.estimated = (_field(requests, name) for name in _FIELDS)
        positions = [at for at in _positions(requests, table) if at is not None]
        positions.sort()  # requests come in transcript order: sorted already, checked in one pass
        series._positions = positions
        values, count = series.reported, len(series.reported)
        while -(-count // series._width) > TIMELINE_BUCKETS:
            series._width *= 2
        width = series._width
        series._buckets = [_stretch(values, start, min(start + width, count)) for start in range(0, count, width)]
        series._place_drops(table)
        return series

    def add(self, requests: Iterable[RequestEstimate], table: RowTable, new_messages: Iterable[str] = ()) -> None:
        """Requests the view gained (their messages are in ``table``); ``new_messages``: ids the transcript
        gained, which may be the marker of a compaction the overlay already holds. A drop already placed moves
        only when a request dated no later than its overlay change comes (a new request's message is the
        transcript's newest, so it never comes before a compaction's marker)."""
        moved = not self._drops_placed or any(message_id in self._markers for message_id in new_messages)
        for request in requests:
            self._series = None
            position = table.positions.get(request.message_id)
            if position is not None:
                insort(self._positions, position)
                times = self._times  # None: no drop is placed by time, so none can move
                created = table.messages.created_at(position) if times is not None else None
                if times is not None and created is not None:
                    when = _naive(created)
                    moved = moved or (self._last_change is not None and when <= self._last_change)
                    insort(times, when)
            self._append(request.reported_input_tokens, request.estimated_input_tokens)
        if moved:
            self._place_drops(table)

    def _append(self, reported: int, estimated: int) -> None:
        index = len(self.reported)
        self.reported.append(reported)
        self.estimated.append(estimated)
        values = self.reported
        if index // self._width == len(self._buckets):
            self._buckets.append([index, index])
        else:
            bucket = self._buckets[-1]
            if reported < values[bucket[0]]:
                bucket[0] = index
            if reported > values[bucket[1]]:
                bucket[1] = index
        if len(self._buckets) > TIMELINE_BUCKETS:
            self._width *= 2
            pairs = self._buckets
            self._buckets = [_merge(values, pairs[i], pairs[i + 1] if i + 1 < len(pairs) else None)
                             for i in range(0, len(pairs), 2)]

    def _place_drops(self, table: RowTable) -> None:
        """Each compaction before the first request after its marker, each other drop before the first
        request after it happened."""
        self._series = None
        self._drops_placed = True
        drops: list[Drop] = []
        for event in self._events:
            if event.undone:
                continue
            if event.action == "pivot":
                at = table.positions.get(_marker(event))
                if at is not None:
                    drops.append(Drop(bisect_left(self._positions, at) - 0.5, "compaction", event.tokens_saved))
            elif event.action in DROP_ACTIONS and event.origin != "import" and event.created_at is not None:
                before = bisect_right(self._request_times(table), _naive(event.created_at))
                drops.append(Drop(before - 0.5, DROP_ACTIONS[event.action], event.tokens_saved))
        self._drops = drops
        times = [_naive(e.created_at) for e in self._events
                 if not e.undone and e.action in DROP_ACTIONS and e.origin != "import" and e.created_at is not None]
        self._last_change = max(times, default=None)

    def _request_times(self, table: RowTable) -> list[datetime]:
        """When the requests' messages were written, sorted (worked out when first needed, then kept)."""
        if self._times is None:
            created = map(table.messages.created_at, self._positions)
            self._times = sorted(_naive(when) for when in created if when is not None)
        return self._times

    def data(self, budget: Budget, cost: SessionCost | None) -> TimelineData:
        """What the chart draws now: O(the chart's points), whatever the session's length."""
        if self._series is None:
            self._series = self._draw()
        reported, estimated, drops = self._series
        return TimelineData(
            reported=reported,
            estimated=estimated,
            drops=drops,
            next_estimate=budget.used,
            warn_at=budget.warn_at,
            compact_at=budget.compact_at,
            cost=cost.short if cost is not None else "",
            last_cost=cost.last if cost is not None else "",
            scripted=budget.scripted,
        )

    def _draw(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[Drop, ...]]:
        drops = self._drops
        if len(self.reported) <= 2 * TIMELINE_BUCKETS:
            reported, estimated = tuple(self.reported), tuple(self.estimated)
        else:  # each stretch as two points, its lowest and highest request in the order they happened
            points = [index for low, high in self._buckets for index in sorted((low, high))]
            reported = tuple(self.reported[i] for i in points)
            estimated = tuple(self.estimated[i] for i in points)
            scale = 2 / self._width
            drops = [Drop((drop.at + 0.5) * scale - 0.5, drop.kind, drop.tokens) for drop in drops]
        merged: dict[tuple[float, str], int] = {}
        for drop in drops:  # one mark per place and kind: a plan's items share one
            merged[(drop.at, drop.kind)] = merged.get((drop.at, drop.kind), 0) + drop.tokens
        return reported, estimated, tuple(Drop(at, kind, tokens) for (at, kind), tokens in sorted(merged.items()))


_FIELDS = ("reported_input_tokens", "estimated_input_tokens")


def _field(requests: Sequence[RequestEstimate], name: str) -> list[Any]:
    """That field of every request: read from its columns where the requests are stored (a resumed view's)."""
    if isinstance(requests, RequestLog):
        return requests.field(name)
    return list(map(attrgetter(name), requests))


def _positions(requests: Sequence[RequestEstimate], table: RowTable) -> list[int | None]:
    """Each request's message by its position: a resumed view's requests keep theirs (no message's position is
    looked up by its id, so the table's map of them is not made)."""
    if isinstance(requests, RequestLog):
        return requests.positions(table.positions.get)
    return [table.positions.get(request.message_id) for request in requests]


def _stretch(values: list[int], start: int, stop: int) -> list[int]:
    """The first lowest and the first highest of ``values[start:stop]``, by index (what :meth:`_append` keeps)."""
    part = values[start:stop]
    return [start + part.index(min(part)), start + part.index(max(part))]


def _merge(values: Sequence[int], first: list[int], second: list[int] | None) -> list[int]:
    """Two neighbouring stretches as one: the first lowest and the first highest request of both."""
    if second is None:
        return first
    low = second[0] if values[second[0]] < values[first[0]] else first[0]
    high = second[1] if values[second[1]] > values[first[1]] else first[1]
    return [low, high]


def _marker(event: OverlayEvent) -> str:
    return str(event.data.get("marker_id") or event.message_id)


def _naive(moment: datetime) -> datetime:
    """UTC without a zone, so naive and aware times compare (naive ones are taken as UTC)."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment
