"""Immutable pictures of one session, made on the engine thread and handed to the UI.

The engine thread owns the :class:`SessionContext` and mutates it as the agent
runs; the UI never reads it. After every change that matters the engine thread
builds a :class:`SessionSnapshot` (the transcript as a tuple, the frozen
ContextView, the Budget, the row table, the timeline series) and posts it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from workbench.engine.budget import Budget
from workbench.engine.context import SessionContext
from workbench.engine.models import Message, Session
from workbench.engine.overlay import OverlayEvent
from workbench.engine.pricing import SessionCost
from workbench.engine.projection import ContextView
from workbench.engine.subagent_links import find_subagents as find_subagents  # where the app looks for it
from workbench.tui.widgets.rows import MessageRows

DROP_ACTIONS = {"prune": "prune", "offload": "offload", "archive": "archive"}
"""Overlay actions the timeline marks as drops (besides compactions)."""
TIMELINE_BUCKETS = 200
"""A longer series is drawn as this many stretches of requests, each by its lowest and highest request: a chart
is a few hundred dots wide (braille: two a cell), and plotting all 25,000 requests of a 50,000-message session
took over a second of its first frame for the same picture."""


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

    @property
    def key(self) -> tuple[object, ...]:
        """Equal keys draw the same chart (redrawn only when this changes: not on every budget change)."""
        return (self.reported, self.estimated, self.drops, self.warn_at, self.compact_at)


@dataclass(frozen=True)
class SessionSnapshot:
    """Everything the screens show about one session at one moment."""

    session: Session
    messages: tuple[Message, ...]
    view: ContextView
    budget: Budget
    rows: MessageRows
    timeline: TimelineData
    undoable: int = 0
    """Applied plans that undo can revert."""
    redoable: bool = False
    subagents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Parent message id -> sub-agent session ids started from it."""
    subagent_peaks: dict[str, int] = field(default_factory=dict)
    """Parent message id -> the peak input its sub-agents reported (shown on its row)."""
    cost: SessionCost | None = None
    """What the session's requests cost."""

    @property
    def title(self) -> str:
        return self.session.title or self.session.id

    @classmethod
    def compute(
        cls,
        ctx: SessionContext,
        *,
        subagents: dict[str, tuple[str, ...]] | None = None,
        subagent_peaks: dict[str, int] | None = None,
    ) -> SessionSnapshot:
        """Projection, budget, rows and timeline: the O(messages) work, for the engine thread."""
        messages = tuple(ctx.messages)
        view = ctx.view()
        budget = ctx.budget()
        rows = MessageRows(messages, view, budget.used, subagent_peaks)
        undoable, redoable = _undo_state(ctx.events)
        cost = ctx.cost()
        return cls(
            session=ctx.session,
            messages=messages,
            view=view,
            budget=budget,
            rows=rows,
            timeline=timeline_data(messages, view, ctx.events, budget, cost),
            undoable=undoable,
            redoable=redoable,
            subagents=dict(subagents or {}),
            subagent_peaks=dict(subagent_peaks or {}),
            cost=cost,
        )


def _undo_state(events: Sequence[OverlayEvent]) -> tuple[int, bool]:
    """How many plans undo can revert, and whether redo has something (the newest plans undone)."""
    from workbench.engine.plans import NOT_UNDOABLE_ORIGINS

    order: dict[str, bool] = {}
    for event in events:
        if event.origin in NOT_UNDOABLE_ORIGINS:
            continue
        order[event.plan_id] = event.undone
    states = list(order.values())
    return sum(1 for undone in states if not undone), bool(states) and states[-1]


def timeline_data(
    messages: Sequence[Message], view: ContextView, events: Sequence[OverlayEvent], budget: Budget,
    cost: SessionCost | None = None,
) -> TimelineData:
    """The series of the timeline chart, with compactions and prunes placed between requests."""
    requests = view.requests
    wanted = {r.message_id for r in requests}
    for event in events:
        if event.action == "pivot":
            wanted.add(str(event.data.get("marker_id") or event.message_id))
    position: dict[str, int] = {}
    created: dict[str, datetime | None] = {}
    for index, message in enumerate(messages):
        if message.id in wanted:
            position[message.id] = index
            created[message.id] = message.created_at
    request_positions = sorted(p for r in requests if (p := position.get(r.message_id)) is not None)
    request_times = sorted(_naive(t) for r in requests if (t := created.get(r.message_id)) is not None)
    drops: list[Drop] = []
    for event in events:
        if event.undone:
            continue
        if event.action == "pivot":
            at = position.get(str(event.data.get("marker_id") or event.message_id))
            if at is not None:
                before = bisect_left(request_positions, at)
                drops.append(Drop(before - 0.5, "compaction", event.tokens_saved))
        elif event.action in DROP_ACTIONS and event.origin != "import" and event.created_at is not None:
            before = bisect_right(request_times, _naive(event.created_at))
            drops.append(Drop(before - 0.5, DROP_ACTIONS[event.action], event.tokens_saved))
    reported = [r.reported_input_tokens for r in requests]
    estimated = [r.estimated_input_tokens for r in requests]
    if len(reported) > 2 * TIMELINE_BUCKETS:
        reported, estimated, drops = _envelope(reported, estimated, drops)
    merged: dict[tuple[float, str], int] = {}
    for drop in drops:  # one mark per place and kind: a plan's items share one
        merged[(drop.at, drop.kind)] = merged.get((drop.at, drop.kind), 0) + drop.tokens
    return TimelineData(
        reported=tuple(reported),
        estimated=tuple(estimated),
        drops=tuple(Drop(at, kind, tokens) for (at, kind), tokens in sorted(merged.items())),
        next_estimate=budget.used,
        warn_at=budget.warn_at,
        compact_at=budget.compact_at,
        cost=cost.short if cost is not None else "",
        last_cost=cost.last if cost is not None else "",
    )


def _envelope(reported: list[int], estimated: list[int], drops: list[Drop]) -> tuple[list[int], list[int], list[Drop]]:
    """The series as :data:`TIMELINE_BUCKETS` stretches of requests, each as two points, its lowest and its highest
    request in the order they happened (so every peak and every drop of the sawtooth stays); drops are placed
    on the same scale."""
    count = len(reported)
    points_r: list[int] = []
    points_e: list[int] = []
    for bucket in range(TIMELINE_BUCKETS):
        stretch = range(bucket * count // TIMELINE_BUCKETS, (bucket + 1) * count // TIMELINE_BUCKETS)
        low = min(stretch, key=reported.__getitem__)
        high = max(stretch, key=reported.__getitem__)
        for index in sorted((low, high)):
            points_r.append(reported[index])
            points_e.append(estimated[index])
    scale = 2 * TIMELINE_BUCKETS / count
    return points_r, points_e, [Drop((drop.at + 0.5) * scale - 0.5, drop.kind, drop.tokens) for drop in drops]


def _naive(moment: datetime) -> datetime:
    """UTC without a zone, so naive and aware times compare (naive ones are taken as UTC)."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment
