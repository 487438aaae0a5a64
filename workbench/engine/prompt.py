"""The sections that precede the conversation: system prompt and tool definitions."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.engine.models import TextPart
from workbench.engine.projection import ContextItem
from workbench.engine.tokens import MESSAGE_OVERHEAD, TokenCounter

BASE_INSTRUCTIONS = (
    "You are a careful software engineering agent working inside a project workspace. "
    "Use the tools to read, search, edit and run things; prefer small verified steps; "
    "say plainly what you changed and what is left to do."
)
USAGE_NOTE_AT = 0.80


def usage_note(percent: float) -> str:
    """Spec 001 §7: a non-cacheable nudge once the context is 80% full."""
    return (
        f"[Context: {percent:.0f}% used. You can call compact_context to free space "
        "before continuing with large operations.]"
    )


def system_item(counter: TokenCounter, text: str, *, cacheable: bool, component: str = "system") -> ContextItem:
    tokens = counter.count_text(text) + MESSAGE_OVERHEAD
    return ContextItem(
        kind="system", tokens=tokens, components={component: tokens}, parts=(TextPart(text=text),),
        raw_tokens=tokens, cacheable=cacheable,
    )


def tools_item(counter: TokenCounter, definitions: Sequence[Mapping[str, Any]]) -> ContextItem | None:
    if not definitions:
        return None
    tokens = counter.count_text(json.dumps(list(definitions), ensure_ascii=False))
    return ContextItem(kind="tools", tokens=tokens, components={"tools": tokens}, raw_tokens=tokens,
                       tools=tuple(definitions))


def fixed_items(
    counter: TokenCounter,
    instructions: str,
    definitions: Sequence[Mapping[str, Any]],
    percent_used: float | None = None,
) -> list[ContextItem]:
    items = [system_item(counter, instructions, cacheable=True)]
    if percent_used is not None and percent_used >= USAGE_NOTE_AT * 100:
        items.append(system_item(counter, usage_note(percent_used), cacheable=False))
    tools = tools_item(counter, definitions)
    if tools is not None:
        items.append(tools)
    return items
