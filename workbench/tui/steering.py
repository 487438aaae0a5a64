"""The steering keys as engine plans: the TUI-side adapter over ``engine.strategies``.

Pin, unpin, prune, restore, offload and inline come from the engine's manual
planners; archive / unarchive of one message is built here (the engine only
archives as a strategy), keeping a tool call and its results together so the
model never sees one without the other. Every plan is measured (exact tokens
before and after) and applied in one transaction by the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from workbench.engine.context import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.models import Message, ToolResultPart, ToolUsePart
from workbench.engine.plans import Plan, PlanItem
from workbench.engine.strategies.manual import MANUAL_ACTIONS, plan_action, refuse_for_proxied
from workbench.engine.strategies.measure import measure
from workbench.engine.strategies.settings import StrategiesConfig

Action = Literal["pin", "unpin", "prune", "restore", "offload", "inline", "archive", "unarchive"]
ACTIONS: tuple[Action, ...] = ("pin", "unpin", "prune", "restore", "offload", "inline", "archive", "unarchive")

PAST = {
    "pin": "pinned", "unpin": "unpinned", "prune": "pruned", "restore": "restored", "offload": "offloaded",
    "inline": "inlined", "archive": "archived", "unarchive": "unarchived",
}
NOTHING = {
    "pin": "is already pinned",
    "unpin": "is not pinned",
    "prune": "has no tool output or written content to prune (or it is not in context)",
    "restore": "has nothing pruned",
    "offload": "has no tool result to offload (or it is already pruned or offloaded)",
    "inline": "has nothing offloaded",
    "archive": "is already archived",
    "unarchive": "is not archived",
}


def find(ctx: SessionContext, message_id: str) -> Message:
    for message in reversed(ctx.messages):
        if message.id == message_id:
            return message
    raise WorkbenchError(f"message {message_id} is not in session {ctx.session.id}")


def tool_group(ctx: SessionContext, message: Message) -> list[str]:
    """The message with every message holding the other half of its tool calls / results, in order."""
    callers: dict[str, str] = {}
    holders: dict[str, set[str]] = {}
    for m in ctx.messages:
        for part in m.parts:
            if isinstance(part, ToolUsePart):
                callers[part.id] = m.id
            elif isinstance(part, ToolResultPart):
                holders.setdefault(part.tool_use_id, set()).add(m.id)
    by_id = {m.id: m for m in ctx.messages}
    group = {message.id}
    todo = [message.id]
    while todo:
        current = by_id[todo.pop()]
        linked: set[str] = set()
        for part in current.parts:
            if isinstance(part, ToolUsePart):
                linked |= holders.get(part.id, set())
            elif isinstance(part, ToolResultPart) and part.tool_use_id in callers:
                linked.add(callers[part.tool_use_id])
        for other in linked - group:
            group.add(other)
            todo.append(other)
    return [m.id for m in ctx.messages if m.id in group]


def plan_archive(ctx: SessionContext, message: Message, *, undo: bool = False) -> Plan:
    """Archive (hide from the model, keep in the transcript) a message and its tool pairs, or bring them back."""
    action: Literal["archive", "unarchive"] = "unarchive" if undo else "archive"
    plan = Plan(session_id=ctx.session.id, strategy=action, origin="user")
    archived = ctx.overlay.archived
    for message_id in tool_group(ctx, message):
        if (message_id in archived) == undo:
            reason = "archived by the user" if not undo else "brought back by the user"
            if message_id != message.id:
                reason += " (with its tool call / result)"
            plan.items.append(PlanItem(message_id=message_id, action=action, reason=reason))
    return plan


def plan_for_key(ctx: SessionContext, action: Action, message_id: str, config: StrategiesConfig) -> Plan:
    """The measured plan of one steering key on one message; it may have no items (nothing to do)."""
    message = find(ctx, message_id)
    if action in MANUAL_ACTIONS:
        plan = plan_action(ctx, action, message, config)
    elif action in ("archive", "unarchive"):
        refuse_for_proxied(ctx, action)
        plan = plan_archive(ctx, message, undo=action == "unarchive")
    else:
        raise WorkbenchError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    return measure(ctx, plan)


def describe(plan: Plan, positions: dict[str, int]) -> str:
    """``#12, #13``: where the plan's items are."""
    seen: list[int] = []
    for item in plan.items:
        position = positions.get(item.message_id)
        if position is not None and position not in seen:
            seen.append(position)
    shown = ", ".join(f"#{p}" for p in seen[:6]) + (" …" if len(seen) > 6 else "")
    return shown or "new message"


def positions_of(ctx: SessionContext, ids: Iterable[str] | None = None) -> dict[str, int]:
    """Message id -> 1-based transcript position (only ``ids`` when given)."""
    wanted = set(ids) if ids is not None else None
    return {m.id: n for n, m in enumerate(ctx.messages, start=1) if wanted is None or m.id in wanted}
