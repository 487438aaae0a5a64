"""The inspect report: a session's budget, requests and compactions as plain data."""

from __future__ import annotations

from typing import Any

from workbench.engine.context.attribution import tool_tokens
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.limits import model_warning
from workbench.engine.transcript.importers.reading import SkippedLine
from workbench.engine.transcript.redaction import redact


def inspect_report(ctx: SessionContext, skipped_lines: list[SkippedLine] | None = None) -> dict[str, Any]:
    """The ``workbench inspect --json`` object; keys may be added, never renamed."""
    view = ctx.view()
    budget = ctx.budget()
    cost = ctx.cost()
    request_usd = {r.message_id: r.usd for r in cost.requests if r.priced}
    stored_skips = ctx.session.metadata.get("skipped_lines", [])
    skipped = [s.model_dump() for s in skipped_lines] if skipped_lines is not None else stored_skips
    return {
        "format": ctx.session.source_format,
        "session_id": ctx.session.id,
        "title": redact(ctx.session.title) if ctx.session.title else None,  # a report is made to be shared
        "model": ctx.model,
        "known_model": budget.known_model,
        "context_window": budget.context_window,
        "window_note": ctx.window()[1],
        "model_warning": model_warning(ctx.model, ctx.config.models),
        "output_reserve": budget.output_reserve,
        "effective_window": budget.effective_window,
        "messages": len(ctx.messages),
        "messages_in_context": sum(1 for item in view.items if item.kind == "message"),
        "tool_definitions": [
            {"name": name, "tokens": tokens}
            for item in view.items if item.kind == "tools" for name, tokens in tool_tokens(ctx.counter, item.tools)
        ],
        "skipped_lines": skipped,
        "skipped_records": ctx.session.metadata.get("skipped_records", {}),
        "budget": {
            "used": budget.used,
            "percent": budget.percent,
            "free": budget.free,
            "level": budget.level,
            "source": budget.source,
            "source_label": budget.source_label(),
            "steered": budget.steered,
            "reported": budget.reported,
            "components": budget.components,
            "thresholds": {"warn": budget.warn_at, "compact": budget.compact_at, "block": budget.block_at},
        },
        "requests": [
            {
                "message_id": r.message_id,
                "model": r.model,
                "reported_input_tokens": r.reported_input_tokens,
                "estimated_input_tokens": r.estimated_input_tokens,
                "anchor_input_tokens": r.anchor_input_tokens,
                "anchorless": r.anchorless,
                "cost_usd": request_usd.get(r.message_id),
            }
            for r in view.requests
        ],
        "cost": {
            "usd": cost.usd,
            "basis": cost.basis,
            "label": cost.label,
            "prices_as_of": cost.as_of.isoformat() if cost.as_of else None,
            "unpriced_models": list(cost.unpriced),
            "requests": [
                {"message_id": r.message_id, "model": r.model, "usd": r.usd if r.priced else None,
                 "synthetic": r.synthetic}
                for r in cost.requests
            ],
        },
        "compactions": [
            {
                "message_id": c.message_id,
                "trigger": c.trigger,
                "reported_pre_tokens": c.reported_pre_tokens,
                "estimated_pre_tokens": c.estimated_pre_tokens,
            }
            for c in view.compactions
        ],
    }


def heaviest(ctx: SessionContext, limit: int = 10) -> list[tuple[int, str, str, int]]:
    """(position, role, message id, tokens) of the largest messages in context, heaviest first."""
    items = [i for i in ctx.view().items if i.kind == "message" and i.index is not None]
    items.sort(key=lambda i: i.tokens, reverse=True)
    return [(int(i.index or 0) + 1, i.role or "", i.message_id or "", i.tokens) for i in items[:limit]]
