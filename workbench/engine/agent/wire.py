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
    return ModelRequest(model=model, system=system, messages=wire_messages(view), tools=tools, max_tokens=max_tokens)
