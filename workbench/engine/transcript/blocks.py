"""Parts as Messages API content blocks: the one form both the request and the budget use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from workbench.engine.transcript.models import ImagePart, Part, TextPart, ThinkingPart, ToolResultPart, ToolUsePart


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


def blocks_of(parts: Iterable[Part]) -> tuple[dict[str, Any], ...]:
    return tuple(b for b in (part_block(p) for p in parts) if b is not None)


def append_wire(wire: list[dict[str, Any]], role: str, blocks: tuple[Mapping[str, Any], ...]) -> None:
    """Add one message's blocks; consecutive same-role messages are joined, as the API requires.

    The joined message is a new dict, so lists handed out earlier never change.
    """
    if not blocks or role not in ("user", "assistant"):
        return
    if wire and wire[-1]["role"] == role:
        wire[-1] = {"role": role, "content": [*wire[-1]["content"], *blocks]}
    else:
        wire.append({"role": role, "content": list(blocks)})
