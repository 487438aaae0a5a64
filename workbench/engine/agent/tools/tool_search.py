"""``tool_search``: find deferred tool definitions and make them available for this turn (spec 001 §5)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from workbench.engine.agent.deferral import DeferralManager

MAX_LISTED = 50
DESCRIPTION_CHARS = 240
SCHEMA_CHARS = 400
"""Results stay short (below the offload threshold): the full definitions are in the next request's tools."""


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _schema(schema: object) -> str:
    compact = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return compact if len(compact) <= SCHEMA_CHARS else "(long; the full schema is in the tool's definition)"


class ToolSearch(Tool):
    name = "tool_search"
    description = (
        "Search the tools that were deferred to save context, by keywords from their name or purpose "
        "(e.g. 'github issue'). Matching tools become callable from your next request in this turn."
    )

    class Input(BaseModel):
        query: str = Field(description="keywords from the tool's name or description")
        max_results: int = Field(default=5, ge=1, le=20)

    def __init__(self, manager: DeferralManager) -> None:
        self.manager = manager

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        if not self.manager.deferred:
            return ToolOutput("No tools are deferred: every tool is already available.")
        found = self.manager.search(args.query, args.max_results)
        if not found:
            names = sorted(self.manager.deferred)
            more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
            listed = ", ".join(names[:MAX_LISTED]) + more
            return ToolOutput(f"No deferred tool matches {args.query!r}. Deferred tools: {listed}")
        self.manager.promote(d["name"] for d in found)
        blocks = [f"{d['name']}: {_short(str(d.get('description') or '(no description)'), DESCRIPTION_CHARS)}\n"
                  f"input_schema: {_schema(d.get('input_schema', {}))}" for d in found]
        plural = "s" if len(found) != 1 else ""
        header = f"{len(found)} tool{plural} found; callable from your next request in this turn:"
        return ToolOutput(header + "\n\n" + "\n\n".join(blocks))
