"""A ContextView as the Messages API request it describes.

This is the only way a request is made, so the request always contains exactly
the items the budget summed.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import takewhile
from typing import Any

from workbench.engine.context.projection import ContextView
from workbench.engine.providers.base import ModelRequest, SystemBlock
from workbench.engine.settings.sections import API_BREAKPOINT_LIMIT
from workbench.engine.transcript.models import TextPart

SYSTEM_KINDS = ("system", "project", "memory", "skills")


def wire_messages(view: ContextView) -> list[Mapping[str, Any]]:
    """The view's messages in API shape (kept up to date by the projection as messages arrive)."""
    return list(view.wire)


def build_request(view: ContextView, model: str, max_tokens: int) -> ModelRequest:
    sections = list(takewhile(lambda item: item.kind != "message", view.items))
    system = [
        SystemBlock(text="\n".join(p.text for p in item.parts if isinstance(p, TextPart)), cache=item.cacheable)
        for item in sections
        if item.kind in SYSTEM_KINDS
    ]
    tools = [dict(t) for item in sections if item.kind == "tools" for t in item.tools]
    messages = wire_messages(view)
    marks = sum(block.cache for block in system) + sum("cache_control" in tool for tool in tools)
    if marks < API_BREAKPOINT_LIMIT and messages:
        messages[-1] = marked(messages[-1])
    return ModelRequest(model=model, system=system, messages=messages, tools=tools, max_tokens=max_tokens)


UNMARKABLE = ("thinking", "redacted_thinking")
"""Blocks the API takes no cache mark on."""


def marked(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """``message`` with a cache mark on its last block that takes one (a copy: the wire is shared), so the
    next step of the turn reads everything up to here from the cache."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    for position in range(len(blocks) - 1, -1, -1):
        block = blocks[position]
        if block.get("type") in UNMARKABLE or (block.get("type") == "text" and not block.get("text")):
            continue
        blocks[position] = {**block, "cache_control": {"type": "ephemeral"}}
        return {**message, "content": blocks}
    return message
