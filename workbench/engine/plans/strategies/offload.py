"""Offloading results already in context (spec 001 §2).

The agent offloads a new result over the threshold as it runs the tool; this
planner does the same for results that are already there (an imported session,
a threshold lowered later). Applying stores each result in the blob table and
records an ``offload`` event; the model then sees the spec's reference text and
reads the rest with ``read_result``. ``inline`` (undo, or by hand) brings the
output back; the blob stays.

A proxied agent has no ``read_result``: its result goes to a file in its working directory that it reads
with its own tool (``context.wire_offload``), and a session whose agent cannot do that is refused.
"""

from __future__ import annotations

import hashlib

from workbench.engine.context.projection import offload_reference
from workbench.engine.context.session import SessionContext
from workbench.engine.context.wire_offload import line_count, offload_path, reader_of, refusal
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.strategies.base import (
    Costs,
    Result,
    SessionIndex,
    add_item,
    finish,
    new_plan,
    session_index,
)
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.overlay import Offload

NOT_OFFLOADED_TOOLS = frozenset({"read_result"})
"""Reading a stored result back must not store it again."""


def ref_id(session_id: str, message_id: str, part_index: int) -> str:
    """The same part always gets the same reference, so a re-offload after an inline reuses its blob."""
    digest = hashlib.blake2b(f"{session_id}\0{message_id}\0{part_index}".encode(), digest_size=6).hexdigest()
    return f"r-{digest}"


def offload_item(
    plan: Plan, index: SessionIndex, costs: Costs, result: Result, reason: str, size: int | None = None
) -> bool:
    """Add the offload of one result if it makes the context smaller; ``size``: its output's bytes, if known."""
    message_id = result.message_id
    if size is None:
        size = len(result.part.text.encode())
    reader = reader_of(index.ctx.session)
    text = result.part.text
    path = "" if reader is None else offload_path(reader.cwd, text)
    offload = Offload(ref_id=ref_id(index.ctx.session.id, message_id, result.part_index), tool_name=result.tool_name,
                      byte_size=size, path=path, lines=line_count(text) if path else 0)
    saving = costs.output_saving(index.tokens(result), offload_reference(offload, text))
    if saving <= 0:
        return False
    data: dict[str, object] = {"ref_id": offload.ref_id, "tool_name": offload.tool_name, "byte_size": size}
    if path:
        data |= {"path": path, "lines": offload.lines}
    add_item(plan, message_id, "offload", result.part_index, reason, saving, data)
    return True


def refuse(ctx: SessionContext, action: str) -> None:
    """A :class:`WorkbenchError` saying why, when the session's agent could not read the content back."""
    reason = refusal(ctx.session, action)
    if reason is not None:
        raise WorkbenchError(reason)


def plan_offload(ctx: SessionContext, config: StrategiesConfig) -> Plan:
    refuse(ctx, "offload")
    threshold = config.offload.threshold
    plan = new_plan(ctx, "offload")
    index = session_index(ctx)
    costs = Costs(ctx)
    for result in index.results:
        if 4 * result.chars <= threshold:
            continue  # at most four bytes a character: cannot be over (most results, so asked first)
        if result.changed or result.message_id in index.pinned_ids or result.tool_name in NOT_OFFLOADED_TOOLS:
            continue
        text = result.part.text
        size = len(text) if text.isascii() else len(text.encode())
        if size > threshold:
            offload_item(plan, index, costs, result, f"{size:,}-byte result of {result.tool_name or 'a tool'}", size)
    return finish(plan)
