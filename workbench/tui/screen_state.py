"""What the screens show of one session at one moment, made on the engine thread and handed to the UI.

The engine thread owns the :class:`SessionContext` and mutates it as the agent
runs; the UI never reads it. After every change that matters the engine thread
posts a :class:`ScreenState` (the transcript as of then, the Budget, the row table, the timeline
series), which its :class:`StateKeeper` keeps up to date one event at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from workbench.engine.context.budget import Budget
from workbench.engine.context.pricing import SessionCost
from workbench.engine.context.projection import ViewBuilder
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.policy_activity import policy_activity, policy_line
from workbench.engine.transcript.models import Message, Session
from workbench.engine.transcript.overlay import NOT_UNDOABLE_ORIGINS, OverlayEvent
from workbench.tui.timeline_series import TimelineData, TimelineSeries
from workbench.tui.widgets.rows import MessageRows, RowTable


@dataclass(frozen=True)
class ScreenState:
    """Everything the screens show about one session at one moment."""

    session: Session
    messages: Sequence[Message]
    """The transcript as of this state (a later state's messages are not in it)."""
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
    policy: str = ""
    """What the proxy's policy last did to the session (``PolicyActivity.line``), or empty if it did nothing."""

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
    ) -> ScreenState:
        """Rows, budget and timeline from scratch: the O(messages) work, for the engine thread (a live
        session keeps its state with a :class:`StateKeeper` instead)."""
        return StateKeeper().state(ctx, subagents, subagent_peaks)


class StateKeeper:
    """The open session's screen state, kept up to date on the engine thread.

    A message appended, a usage report or a budget change costs O(that change): the transcript, the view's
    lookups and the timeline's series grow in place (each state posted reads only its own prefix of them). The
    state is built from scratch, in O(messages), only when the view was rebuilt rather than grown: another
    context (a session opened or reloaded), an overlay change, a compaction placing its summary first.
    """

    def __init__(self) -> None:
        self._ctx: SessionContext | None = None
        self._builder: ViewBuilder | None = None
        self._generation = -1
        self._events = 0
        self._items = 0
        self._requests = 0
        self._table = RowTable()
        self._timeline = TimelineSeries(())
        self._undo = (0, False)
        self._policy = ""

    def state(self, ctx: SessionContext, subagents: dict[str, tuple[str, ...]] | None = None,
              subagent_peaks: dict[str, int] | None = None, policy: str | None = None) -> ScreenState:
        """The state of ``ctx`` now: grown from the last one when the context only grew since. ``policy``: the
        one the proxy serving the app runs (``Launch.policy``), said for its sessions until it acts."""
        builder = ctx.builder
        if self._grew(ctx):
            table = self._table
            new = ctx.messages[table.count:]
            table.add(new, builder.items, self._items, builder.excluded)
            self._timeline.add(builder.estimator.requests[self._requests:], table, (m.id for m in new))
        else:
            self._table = table = RowTable.build(ctx.messages, builder.items, builder.excluded)
            self._timeline = TimelineSeries.build(builder.estimator.requests, table, ctx.events)
            self._undo = undo_state(ctx.events)
            running = policy if ctx.session.source_format == "proxy" else None
            self._policy = policy_line(policy_activity(ctx.events), running)
        self._ctx, self._builder, self._generation = ctx, builder, builder.generation
        self._events, self._items, self._requests = len(ctx.events), len(builder.items), len(builder.estimator.requests)
        budget, cost = ctx.budget(), ctx.cost()
        rows = MessageRows(table, budget.used, subagent_peaks)
        undoable, redoable = self._undo
        return ScreenState(
            session=ctx.session,
            messages=rows.messages,
            budget=budget,
            rows=rows,
            timeline=self._timeline.data(budget, cost),
            undoable=undoable,
            redoable=redoable,
            subagents=dict(subagents or {}),
            subagent_peaks=dict(subagent_peaks or {}),
            cost=cost,
            policy=self._policy,
        )

    def _grew(self, ctx: SessionContext) -> bool:
        """Whether ``ctx`` is the context of the last state with only messages (and requests) added since."""
        builder = ctx.builder
        return (ctx is self._ctx and builder is self._builder and builder.generation == self._generation
                and len(ctx.events) == self._events and ctx.messages is self._table.messages
                and len(builder.items) >= self._items and len(builder.estimator.requests) >= self._requests)


def undo_state(events: Sequence[OverlayEvent]) -> tuple[int, bool]:
    """How many plans undo can revert, and whether redo has something (the newest plans undone)."""
    order: dict[str, bool] = {}
    for event in events:
        if event.origin in NOT_UNDOABLE_ORIGINS:
            continue
        order[event.plan_id] = event.undone
    states = list(order.values())
    return sum(1 for undone in states if not undone), bool(states) and states[-1]
