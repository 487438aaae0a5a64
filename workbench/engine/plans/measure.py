"""Exact measurement and application of a plan.

A planner's totals are estimates (the calibrated difference of each changed
part, summed). :func:`measure` replaces them with the exact budget before and
after, by projecting the plan on a copy of the context, and shares the exact
difference out over the items (largest remainder), so the items always add up
to ``tokens_before - tokens_after``. :func:`apply` commits what was measured:
blobs of offloaded results, new messages (an archive digest) and the overlay
events, in one transaction.

The one way a plan is measured, whatever made it (a strategy, a steering key,
an archive, the agent's pruning tools): a plan may add a message (the digest)
and needs blobs stored, and the copy is built once (the context's own budget
is the "before").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from workbench.engine.context.session import SessionContext, reported_input
from workbench.engine.context.view import ContextView
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.pivot_trial import after_pivot
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store

NEW_MESSAGE = "new_message"
"""``PlanItem.data`` key: the message this item adds to the transcript (fields of :class:`Message`; its ``id`` is
the item's message unless the spec names another, as a compaction's pivot carries its boundary marker)."""


def new_messages(ctx: SessionContext, plan: Plan) -> list[Message]:
    """The messages the plan appends, as they will be stored."""
    out: list[Message] = []
    for item in plan.items:
        spec: dict[str, Any] | None = item.data.get(NEW_MESSAGE) if item.data else None
        if spec is None:
            continue
        out.append(
            Message(
                id=str(spec.get("id", item.message_id)),
                session_id=ctx.session.id,
                index=len(ctx.messages) + len(out),
                role=spec.get("role", "user"),
                kind=spec.get("kind", "message"),
                parts=[TextPart(text=str(spec.get("text", "")))],
                agent_visible=bool(spec.get("agent_visible", True)),
                user_visible=bool(spec.get("user_visible", True)),
                created_at=datetime.now(UTC),
                source=dict(spec.get("source") or {"plan": plan.plan_id}),  # the spec's names its plan its own way
            )
        )
    return out


def dated_events(plan: Plan) -> list[OverlayEvent]:
    """The plan's events, dated now: calibration then knows every request so far was sent before them."""
    now = datetime.now(UTC)
    return [event.model_copy(update={"created_at": now}) for event in plan.events()]


def trial(ctx: SessionContext, plan: Plan) -> SessionContext:
    """A copy of the context with the plan applied: one projection, of only what a pivot keeps when the plan
    starts the context afresh (a compaction, see :mod:`pivot_trial`)."""
    added = new_messages(ctx, plan)
    events = [*ctx.events, *dated_events(plan)]
    builder = after_pivot(ctx, plan, added, events)
    return SessionContext(
        ctx.session,
        [*ctx.messages, *added],
        events,
        ctx.counter,
        ctx.config,
        ctx.calibrator,
        ctx.fixed_items,
        builder=builder,
        peak_input=max([ctx.peak_input(), *map(reported_input, added)]),  # (else worked out over every message)
    )


def allocate(items: Sequence[PlanItem], total: int) -> None:
    """Share ``total`` over the items in proportion to their estimates; integers that add up exactly."""
    if not items:
        return
    weights = [item.tokens_saved for item in items]
    weight = sum(weights)
    shares = [total * w / weight for w in weights] if weight else [total / len(items)] * len(items)
    values = [math.floor(s) for s in shares]
    order = sorted(range(len(items)), key=lambda k: shares[k] - values[k], reverse=True)
    remainder = total - sum(values)
    step = 0
    while remainder != 0:  # float error can leave more than one pass; each pass moves one token per item
        k = order[step % len(order)]
        values[k] += 1 if remainder > 0 else -1
        remainder += -1 if remainder > 0 else 1
        step += 1
    for item, value in zip(items, values, strict=True):
        item.tokens_saved = value


def measure(ctx: SessionContext, plan: Plan) -> Plan:
    """Exact tokens before and after (the budget's ``used``), and item savings that add up to them.

    Each item saves what its message's item in the view lost (shared by the planner's estimates between
    items of one message), so no item claims more than its message holds in context; the budget moves
    by the sum of those changes, and any difference (rounding) is shared out in proportion. A pivot drops
    everything before it, so in a plan with one the pivot saves the whole difference (net of the summary
    and pins that come with it, which save nothing themselves)."""
    measure_on(ctx, plan)
    return plan


def measure_on(ctx: SessionContext, plan: Plan) -> SessionContext:
    """:func:`measure`, returning the copy with the plan applied (the next plan of a chain is measured on it)."""
    before = ctx.budget()
    plan.tokens_before = before.used
    if not plan.items:
        plan.tokens_after, plan.budget_after = before.used, before
        return ctx
    tried = trial(ctx, plan)
    plan.budget_after = tried.budget()
    plan.tokens_after = plan.budget_after.used
    pivots = [item for item in plan.items if item.action == "pivot"]
    if pivots:
        for item in plan.items:
            item.tokens_saved = 0
        allocate(pivots, plan.tokens_saved)
        return tried
    _exact_weights(plan.items, ctx.view(), tried.view())
    allocate(plan.items, plan.tokens_saved)
    return tried


def _exact_weights(items: Sequence[PlanItem], before: ContextView, after: ContextView) -> None:
    """Set each item's saving to its share of its message's change between the two views."""
    shown_before = {i.message_id: i.tokens for i in before.items if i.message_id is not None}
    shown_after = {i.message_id: i.tokens for i in after.items if i.message_id is not None}
    by_message: dict[str, list[PlanItem]] = {}
    for item in items:
        by_message.setdefault(item.message_id, []).append(item)
    for message_id, group in by_message.items():
        change = shown_before.get(message_id, 0) - shown_after.get(message_id, 0)
        allocate(group, change)


def _blobs(ctx: SessionContext, plan: Plan) -> list[tuple[str, str, str]]:
    """(ref_id, tool name, content) of every result the plan offloads."""
    by_id = {m.id: m for m in ctx.messages}
    out = []
    for item in plan.items:
        if item.action != "offload":
            continue
        message = by_id.get(item.message_id)
        part = message.parts[item.part_index] if message and item.part_index is not None and item.part_index < len(message.parts) else None
        if not isinstance(part, ToolResultPart):
            raise WorkbenchError(f"plan {plan.strategy}: {item.message_id} has no tool result at part {item.part_index}")
        data = item.data or {}
        out.append((str(data["ref_id"]), str(data.get("tool_name", "")), part.text))
    return out


def apply(store: Store, ctx: SessionContext, plan: Plan) -> list[Message]:
    """Commit the plan in one transaction; returns the messages it added. A crash leaves no part of it."""
    if not plan.items:
        return []
    added = new_messages(ctx, plan)
    blobs = _blobs(ctx, plan)

    def save_blobs() -> None:
        for ref_id, tool_name, content in blobs:
            store.save_blob(ctx.session.id, ref_id, tool_name, content)

    commit(store, ctx, dated_events(plan), added, within=save_blobs)
    return added


def commit(
    store: Store,
    ctx: SessionContext,
    events: Sequence[OverlayEvent],
    messages: Sequence[Message] = (),
    *,
    within: Callable[[], None] | None = None,
) -> None:
    """Write a change in one transaction (its new messages, its overlay events, and ``within``: whatever else
    must land with them, such as offloaded outputs or a compaction's checkpoint), then show it in the live
    context. Every change is applied through here: a strategy's plan, a compaction, a recovery step, the
    agent's own pins; a crash leaves no part of one."""
    with ctx.writing(store):
        if messages:
            store.save_messages(list(messages), ctx.counter)
        store.add_overlay_events(events)
        if within is not None:  # last: a checkpoint reads the events written before it
            within()
    for message in messages:
        ctx.append(message)
    if events:
        ctx.apply_events(events)
