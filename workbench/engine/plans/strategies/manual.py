"""Changes the user asks for, one message at a time: pin, unpin, prune, restore, offload, inline, archive,
unarchive.

Each is a plan with origin ``user``, so it is listed, measured, and undone like
any strategy's. Pinning ([PERSIST], spec 000 §1) keeps a message through
compaction; pinned messages keep their transcript order. Pruning a message
prunes its tool results, or, for a write or edit call, the content of its input.
Archiving a message archives the other half of its tool pairs with it (``archive.plan_archive_message``).
"""

from __future__ import annotations

from collections.abc import Iterable

from workbench.engine.context.projection import pruned_part
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.strategies.archive import plan_archive_message
from workbench.engine.plans.strategies.base import Costs, add_item, finish, new_plan, session_index
from workbench.engine.plans.strategies.names import MANUAL_ACTIONS
from workbench.engine.plans.strategies.offload import offload_item, refuse
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import Message, ToolResultPart, ToolUsePart

__all__ = ["MANUAL_ACTIONS", "find_message", "plan_action", "refuse_for_proxied", "refuse_pinned"]


def find_message(ctx: SessionContext, ref: str) -> Message:
    """A message by id, or by its 1-based position in the transcript (as the message list numbers it)."""
    for message in ctx.messages:
        if message.id == ref:
            return message
    if ref.isdigit() and 1 <= int(ref) <= len(ctx.messages):
        return ctx.messages[int(ref) - 1]
    raise WorkbenchError(f"no message {ref!r} in session {ctx.session.id} (give an id or a position 1–{len(ctx.messages)})")


def _ordered(ctx: SessionContext, message_ids: Iterable[str]) -> list[str]:
    wanted = set(message_ids)
    return [m.id for m in ctx.messages if m.id in wanted]


def plan_pin(ctx: SessionContext, message_ids: Iterable[str]) -> Plan:
    plan = new_plan(ctx, "pin", origin="user")
    for message_id in _ordered(ctx, message_ids):
        if message_id not in ctx.overlay.pinned:
            add_item(plan, message_id, "pin", None, "pinned by the user: kept through compaction", 0)
    return finish(plan)


def plan_unpin(ctx: SessionContext, message_ids: Iterable[str]) -> Plan:
    plan = new_plan(ctx, "unpin", origin="user")
    for message_id in _ordered(ctx, message_ids):
        if message_id in ctx.overlay.pinned:
            add_item(plan, message_id, "unpin", None, "unpinned by the user", 0)
    return finish(plan)


def plan_prune(ctx: SessionContext, message: Message, config: StrategiesConfig) -> Plan:
    """The message's tool results, or the input of its write / edit calls."""
    plan = new_plan(ctx, "prune", origin="user")
    item = ctx.view().item_for(message.id)
    if item is None:
        return finish(plan)
    costs = Costs(ctx)
    overlay = ctx.overlay
    for n, part in enumerate(message.parts):
        if overlay.is_pruned(message.id, n):
            continue
        if isinstance(part, ToolResultPart) or (
            isinstance(part, ToolUsePart) and part.name in config.supersede_writes.write_tools
        ):
            what = "output" if isinstance(part, ToolResultPart) else "written content"
            add_item(plan, message.id, "prune", n, f"{what} pruned by the user",
                     costs.part_saving(item.parts[n], pruned_part(part)))
    return finish(plan)


def plan_restore(ctx: SessionContext, message: Message) -> Plan:
    plan = new_plan(ctx, "restore", origin="user")
    for message_id, part_index in sorted(ctx.overlay.pruned, key=lambda k: (k[1] is not None, k[1] or 0)):
        if message_id == message.id:
            add_item(plan, message_id, "restore", part_index, "restored by the user", 0)
    return finish(plan)


def plan_offload_message(ctx: SessionContext, message: Message) -> Plan:
    plan = new_plan(ctx, "offload", origin="user")
    index = session_index(ctx)
    costs = Costs(ctx)
    for result in index.results:
        if result.message_id == message.id and not result.changed:
            offload_item(plan, index, costs, result, "offloaded by the user")
    return finish(plan)


def plan_inline(ctx: SessionContext, message: Message) -> Plan:
    plan = new_plan(ctx, "inline", origin="user")
    for message_id, part_index in sorted(ctx.overlay.offloaded, key=lambda k: k[1] or 0):
        if message_id == message.id:
            add_item(plan, message_id, "inline", part_index, "brought back inline by the user", 0)
    return finish(plan)


def refuse_for_proxied(ctx: SessionContext, action: str) -> None:
    """Offload leaves content the agent must read back; an agent behind the proxy reads it from a file with its own
    tool, so it is offered only where its requests carry one (``context.wire_offload``). Archiving one message
    leaves no digest to read on from (its messages just leave the request, and come back with unarchive): offered
    to every agent."""
    if action != "archive":
        refuse(ctx, action)


CHANGES_CONTENT = frozenset({"prune", "offload", "archive"})


def refuse_pinned(ctx: SessionContext, action: str, plan: Plan, message: Message) -> Plan:
    """A pinned message is sent as written, everywhere: a plan that would change it (or, for an archive, the other
    half of its tool calls) is refused, with the reason (one with nothing to do is returned, and says so)."""
    pinned = ctx.overlay.pinned
    if action not in CHANGES_CONTENT or not plan.items or not pinned:
        return plan
    if message.id in pinned:
        raise WorkbenchError(f"message #{message.index + 1} is pinned, so it is sent as written: unpin it to {action} it")
    partner = next((item.message_id for item in plan.items if item.message_id in pinned), None)
    if partner is not None:
        position = next(m.index + 1 for m in ctx.messages if m.id == partner)
        raise WorkbenchError(f"message #{position}, the other half of message #{message.index + 1}'s tool calls, is "
                             f"pinned, so it is sent as written: unpin it to {action} them")
    return plan


def refuse_assistant_first(ctx: SessionContext, plan: Plan, message: Message) -> Plan:
    """The model's first message is a user's (the API refuses any other): an archive that would leave an
    assistant's message first is refused."""
    leaving = {item.message_id for item in plan.items if item.action == "archive"}
    if not leaving:
        return plan
    first = next((item for item in ctx.view().items if item.kind == "message" and item.message_id not in leaving),
                 None)
    if first is not None and first.role == "assistant":
        raise WorkbenchError(f"message #{message.index + 1} cannot be archived: the model would then start with the "
                             "assistant's message after it, which the API refuses; compact instead")
    return plan


def plan_action(ctx: SessionContext, action: str, message: Message, config: StrategiesConfig) -> Plan:
    """The plan of one manual action on one message (the CLI's pin / unpin / prune / … commands, the app's keys)."""
    refuse_for_proxied(ctx, action)
    plan = refuse_pinned(ctx, action, _planned(ctx, action, message, config), message)
    return refuse_assistant_first(ctx, plan, message) if action == "archive" else plan


def _planned(ctx: SessionContext, action: str, message: Message, config: StrategiesConfig) -> Plan:
    match action:
        case "pin":
            return plan_pin(ctx, [message.id])
        case "unpin":
            return plan_unpin(ctx, [message.id])
        case "prune":
            return plan_prune(ctx, message, config)
        case "restore":
            return plan_restore(ctx, message)
        case "offload":
            return plan_offload_message(ctx, message)
        case "inline":
            return plan_inline(ctx, message)
        case "archive" | "unarchive":
            return plan_archive_message(ctx, message, undo=action == "unarchive")
    raise WorkbenchError(f"unknown action {action!r}; one of {', '.join(MANUAL_ACTIONS)}")
