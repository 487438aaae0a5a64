"""The steering keys as engine plans: the TUI-side adapter over ``engine.strategies``.

Every key's plan comes from the engine's manual planners (the ones the CLI's
``workbench pin / prune / archive …`` use; archive keeps a tool call and its
results together). Every plan is measured (exact tokens before and after) and
applied in one transaction by the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.strategies.names import MANUAL_ACTIONS
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import Message

if TYPE_CHECKING:
    from workbench.engine.plans.plan import Plan

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


KEPT = {
    "pinned": "compaction keeps it word for word and strategies leave it alone",
    "unpinned": "compaction and strategies may change it again",
}
"""What a pin or unpin does instead of changing tokens: it changes what may be dropped later."""


def applied_notice(verb: str, what: str, before: int, after: int) -> str:
    """The toast after a steering change: what it did to the context, and the key that takes it back (u undoes,
    r redoes what u undid). A pin saves nothing, so it says what it does keep instead of "saves 0 tokens"."""
    saved = before - after
    if saved > 0:
        change = f"{before:,} → {after:,} tokens (saves {saved:,} tokens)"
    elif saved < 0:
        change = f"{before:,} → {after:,} tokens (adds {-saved:,} tokens)"
    else:
        change = f"the context is unchanged ({after:,} tokens)"
    if verb in KEPT:
        change = f"{KEPT[verb]}; {change}"
    back = "r redoes it" if verb == "undid" else "u undoes it"
    return f"{verb.capitalize()} {what}: {change}. {back}."


def find(ctx: SessionContext, message_id: str) -> Message:
    for message in reversed(ctx.messages):
        if message.id == message_id:
            return message
    raise WorkbenchError(f"message {message_id} is not in session {ctx.session.id}")


def plan_for_key(ctx: SessionContext, action: Action, message_id: str, config: StrategiesConfig) -> Plan:
    """The measured plan of one steering key on one message; it may have no items (nothing to do)."""
    from workbench.engine.plans.measure import measure  # deferred: the planners load with the first key pressed
    from workbench.engine.plans.strategies.manual import plan_action

    message = find(ctx, message_id)
    if action not in MANUAL_ACTIONS:
        raise WorkbenchError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    return measure(ctx, plan_action(ctx, action, message, config))


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
