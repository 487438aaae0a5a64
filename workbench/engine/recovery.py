"""The context-limit recovery cascade (spec 000): cheap overlay changes before a summary."""

from __future__ import annotations

import json
import uuid

from workbench.engine.context import SessionContext
from workbench.engine.models import ToolResultPart, ToolUsePart
from workbench.engine.overlay import OverlayEvent
from workbench.engine.projection import PRUNED_PLACEHOLDER

LARGEST_TO_PRUNE = 3


def recovery_events(ctx: SessionContext) -> list[OverlayEvent]:
    """Prune duplicate tool results (keeping the newest), then the largest remaining ones."""
    plan = uuid.uuid4().hex
    view = ctx.view()
    calls: dict[str, str] = {}
    results: list[tuple[str, int, str, int]] = []  # message, part, tool_use_id, tokens
    for item in view.items:
        for position, part in enumerate(item.parts):
            if isinstance(part, ToolUsePart):
                calls[part.id] = f"{part.name}:{json.dumps(part.input, sort_keys=True)}"
            elif (
                isinstance(part, ToolResultPart)
                and part.text != PRUNED_PLACEHOLDER
                and item.message_id
                and item.message_id not in ctx.overlay.pinned
            ):
                results.append((item.message_id, position, part.tool_use_id, ctx.counter.count_part(part)))
    seen: set[str] = set()
    targets: list[tuple[str, int, str]] = []
    for message_id, position, tool_use_id, _ in reversed(results):
        key = calls.get(tool_use_id)
        if key is not None and key in seen:
            targets.append((message_id, position, "duplicate of a newer identical tool call"))
        elif key is not None:
            seen.add(key)
    chosen = {(m, p) for m, p, _ in targets}
    remaining = sorted((r for r in results if (r[0], r[1]) not in chosen), key=lambda r: r[3], reverse=True)
    for message_id, position, _, tokens in remaining[:LARGEST_TO_PRUNE]:
        targets.append((message_id, position, f"one of the largest tool outputs ({tokens:,} tokens)"))
    return [
        OverlayEvent(id=f"{plan}:{n}", session_id=ctx.session.id, plan_id=plan, action="prune", message_id=m,
                     part_index=p, origin="strategy", reason=f"recovery: {why}")
        for n, (m, p, why) in enumerate(targets)
    ]
