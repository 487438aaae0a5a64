"""Rendering a ContextView into the Messages API request it describes.

This is the only way a request is made, so the request always contains exactly
the items the budget summed.
"""

from __future__ import annotations

from typing import Any

from workbench.engine.models import ImagePart, Part, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from workbench.engine.projection import ContextView
from workbench.engine.providers.base import ModelRequest, SystemBlock

SYSTEM_KINDS = ("system", "project", "memory", "skills")


def image_line(part: ImagePart) -> str:
    return f"[Attached {part.media_type}: {part.name or 'image'}]"


def part_block(part: Part) -> dict[str, Any] | None:
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text} if text else None
        case ThinkingPart(redacted=True):
            return None
        case ThinkingPart(text=text, signature=signature):
            return {"type": "thinking", "thinking": text, "signature": signature}
        case ToolUsePart(id=tool_id, name=name, input=tool_input):
            return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
        case ToolResultPart(tool_use_id=tool_id, text=text, images=images, is_error=is_error):
            content = text + "".join("\n" + image_line(i) for i in images)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
            if is_error:
                block["is_error"] = True
            return block
        case ImagePart():
            return {"type": "text", "text": image_line(part)}
    return None


def wire_messages(view: ContextView) -> list[dict[str, Any]]:
    """Messages in API shape; consecutive same-role messages are joined, as the API requires."""
    out: list[dict[str, Any]] = []
    for item in view.items:
        if item.kind != "message" or item.role not in ("user", "assistant"):
            continue
        blocks = [b for b in (part_block(p) for p in item.parts) if b is not None]
        if not blocks:
            continue
        if out and out[-1]["role"] == item.role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": item.role, "content": blocks})
    return out


def build_request(view: ContextView, model: str, max_tokens: int) -> ModelRequest:
    system = [
        SystemBlock(text="\n".join(p.text for p in item.parts if isinstance(p, TextPart)), cache=item.cacheable)
        for item in view.items
        if item.kind in SYSTEM_KINDS
    ]
    tools = [dict(t) for item in view.items if item.kind == "tools" for t in item.tools]
    return ModelRequest(model=model, system=system, messages=wire_messages(view), tools=tools, max_tokens=max_tokens)
