"""Trying a plan that starts the context afresh at a pivot (a compaction) without replaying the session.

A replay keeps nothing from before a pivot but the pinned messages, and from the pivot on it projects each
message as the live view already did; replaying a 10,000-message session to measure a compaction spends
nearly all its time on items it then drops. :func:`after_pivot` starts a builder from the live view's
surviving items instead (as resuming from a compaction checkpoint does) and adds the plan's new messages:
O(kept), not O(session). Whenever the plan could change anything else it says None and the caller replays.

What it builds equals the replay in the items (tokens, parts, badges), the totals, the estimate and so the
budget, the requests and the excluded messages; only the record of the new pivot's own compaction differs
(a replay notes its estimate of the context just before the pivot, which only a replay knows), and no budget
reads it. ``tests/test_pivot_trial.py`` holds it to that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from workbench.engine.context.effective import badges_of
from workbench.engine.context.projection import ContextItem, ViewBuilder
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.transcript.models import Message
from workbench.engine.transcript.overlay import OverlayEvent, OverlayState, fold

PIVOT_ACTIONS = frozenset({"pin", "summary", "pivot"})
"""What a plan may do besides its pivot and still start afresh: pin a message it keeps, mark its own summary."""


def _pivot(plan: Plan, added: Sequence[Message]) -> PlanItem | None:
    """The plan's one pivot, when the plan is a fresh start: pins and summaries of its own new messages, whose
    last is the pivot's summary (a replay's estimate then restarts from the kept items alone, as here)."""
    pivots = [item for item in plan.items if item.action == "pivot"]
    if len(pivots) != 1 or not added or any(item.action not in PIVOT_ACTIONS for item in plan.items):
        return None
    added_ids = {m.id for m in added}
    if any(item.action == "summary" and item.message_id not in added_ids for item in plan.items):
        return None
    data = pivots[0].data or {}
    return pivots[0] if data.get("summary_id") == added[-1].id else None


def _kept(ctx: SessionContext, plan: Plan, pivot: PlanItem, added: Sequence[Message],
          overlay: OverlayState) -> tuple[list[ContextItem], list[ContextItem]] | None:
    """The live view's message items a replay keeps past the pivot, and those it drops; None when the view's
    order around the pivot is not the transcript's (then which survive is for a replay to say)."""
    messages = [item for item in ctx.view().items if item.kind == "message"]
    new = next((m for m in added if m.id == pivot.message_id), None)
    start = len(messages) if new is not None else next(
        (p for p, item in enumerate(messages) if item.message_id == pivot.message_id), None)
    at = new.index if new is not None else messages[start].index if start is not None else None
    if start is None or at is None:
        return None
    before, after = messages[:start], messages[start:]
    if any(item.index is None or item.index < at for item in after):
        return None
    # Only a summary shown first may sit before the pivot and come after it in the transcript, and only when
    # pinned: a replay reaches it after the pivot and puts it first again.
    if any((item.index or 0) > at and (p > 0 or item.message_id not in overlay.pinned) for p, item in enumerate(before)):
        return None
    shown = {item.message_id for item in messages}
    if any(item.action == "pin" and item.message_id not in shown for item in plan.items):
        return None  # a pin would bring back a message the view does not hold
    kept = [item for item in before if item.message_id in overlay.pinned]
    dropped = [item for item in before if item.message_id not in overlay.pinned]
    return _badged(ctx, kept, overlay) + after, dropped


def _badged(ctx: SessionContext, items: list[ContextItem], overlay: OverlayState) -> list[ContextItem]:
    """The items with the badges the plan's overlay gives them (a message it pins shows so)."""
    newly = {item.message_id for item in items if item.message_id not in ctx.overlay.pinned}
    if not newly:
        return items
    by_id = {m.id: m for m in ctx.messages if m.id in newly}
    return [replace(item, badges=badges_of(overlay, by_id[item.message_id])) if item.message_id in by_id else item
            for item in items]


def after_pivot(
    ctx: SessionContext, plan: Plan, added: Sequence[Message], events: Sequence[OverlayEvent]
) -> ViewBuilder | None:
    """The builder a replay of ``ctx`` with ``plan`` applied ends with, started from the kept items, or None
    when ``plan`` is not a fresh start at a pivot. ``added``: the plan's new messages as they will be stored;
    ``events``: the context's overlay events and the plan's."""
    pivot = _pivot(plan, added)
    if pivot is None:
        return None
    overlay = fold(events)
    found = _kept(ctx, plan, pivot, added, overlay)
    if found is None:
        return None
    kept, dropped = found
    view = ctx.view()
    builder = ViewBuilder(ctx.session.id, overlay, ctx.counter, ctx.builder.calibrator, ctx.builder.model,
                          ctx.fixed_items)
    excluded = {**view.excluded, **{item.message_id: "before-compaction" for item in dropped if item.message_id}}
    builder.seed(kept, compactions=view.compactions, excluded=excluded, requests=view.requests,
                 cache_hit_rate=view.cache_hit_rate)
    return builder.add_all(added)
