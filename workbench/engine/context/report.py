"""The inspect report: a session's budget, requests and compactions as plain data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.engine.context.attribution import tool_tokens
from workbench.engine.context.effective import preview_text
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.limits import model_warning
from workbench.engine.transcript.importers.reading import SkippedLine
from workbench.engine.transcript.models import Part, ToolResultPart, ToolUsePart
from workbench.engine.transcript.redaction import redact

PREVIEW_WIDTH = 60


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
        "heaviest": [heavy.as_json() for heavy in heaviest(ctx)],
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


@dataclass(frozen=True, slots=True)
class HeavyMessage:
    """One of the largest messages in context, named by what it holds rather than by its id."""

    position: int
    """1-based position in the transcript."""
    role: str
    message_id: str
    tokens: int
    tools: tuple[str, ...]
    """The tools it calls, or whose results it carries."""
    preview: str
    """Its first words as the model gets them, on one line, key-like secrets redacted."""

    def as_json(self) -> dict[str, Any]:
        return {"position": self.position, "role": self.role, "message_id": self.message_id, "tokens": self.tokens,
                "tools": list(self.tools), "preview": self.preview}


def heaviest(ctx: SessionContext, limit: int = 10, width: int = PREVIEW_WIDTH) -> list[HeavyMessage]:
    """The largest messages in context, heaviest first."""
    items = [i for i in ctx.view().items if i.kind == "message" and i.index is not None]
    calls = {p.id: p.name for i in items for p in i.parts if isinstance(p, ToolUsePart)}
    items.sort(key=lambda i: i.tokens, reverse=True)
    return [HeavyMessage(int(i.index or 0) + 1, i.role or "", i.message_id or "", i.tokens, _tools(i.parts, calls),
                         redact(preview_text(i.parts, width))) for i in items[:limit]]


def _tools(parts: Sequence[Part], calls: Mapping[str, str]) -> tuple[str, ...]:
    names = (p.name if isinstance(p, ToolUsePart) else calls.get(p.tool_use_id, "?")
             for p in parts if isinstance(p, ToolUsePart | ToolResultPart))
    return tuple(dict.fromkeys(names))
