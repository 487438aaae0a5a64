"""What the model sees of a message once the overlay has had its say: placeholders, references, badges.

Split from ``projection.py`` so the view builder stays about building the view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from workbench.engine.context.wire_offload import file_reference
from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from workbench.engine.transcript.overlay import Offload, OverlayState

PRUNED_PLACEHOLDER = "[Old tool result content cleared]"
PRUNED_INPUT_PLACEHOLDER = "[content pruned: superseded by a later read]"
KEPT_INPUT_KEYS = frozenset({"path", "file_path", "notebook_path", "filePath"})


def offload_reference(offload: Offload, original: str) -> str:
    """The context-replacement text of spec 001 §2 (a proxied agent's: :func:`wire_offload.file_reference`)."""
    if offload.path:
        return file_reference(offload, original)
    size = offload.byte_size or len(original.encode())
    return (
        f'[Tool result stored — {size:,} bytes from "{offload.tool_name or "tool"}".\n'
        f"First 200 chars: {original[:200]}]\n"
        f'Use the "read_result" tool with ref_id="{offload.ref_id}" to read specific portions.'
    )


def pruned_input(tool_input: Mapping[str, Any], replacement: str = PRUNED_INPUT_PLACEHOLDER) -> dict[str, Any]:
    return {
        key: value if key in KEPT_INPUT_KEYS or value is None or isinstance(value, bool | int | float) else replacement
        for key, value in tool_input.items()
    }


def pruned_part(part: Part, replacement: str | None = None) -> Part:
    """How a pruned part is shown: a result's output replaced (images dropped), a call's input cut to its paths."""
    if isinstance(part, ToolResultPart):
        return part.model_copy(update={"text": PRUNED_PLACEHOLDER if replacement is None else replacement, "images": ()})
    if isinstance(part, ToolUsePart):
        return part.model_copy(
            update={"input": pruned_input(part.input, PRUNED_INPUT_PLACEHOLDER if replacement is None else replacement)}
        )
    return part



def effective_parts(overlay: OverlayState, message: Message) -> list[Part]:
    """The message's parts as the model receives them: pruned, distilled or offloaded ones replaced, unless the
    message is pinned (a pinned message is sent as written)."""
    if message.id in overlay.pinned:
        return list(message.parts)
    out: list[Part] = []
    replacements = overlay.replacements
    for position, part in enumerate(message.parts):
        key = (message.id, position)
        if isinstance(part, ToolResultPart):
            offload = overlay.offloaded.get(key)
            if overlay.is_pruned(message.id, position):
                part = pruned_part(part, replacements.get(key, replacements.get((message.id, None))))
            elif offload is not None:
                part = part.model_copy(update={"text": offload_reference(offload, part.text), "images": ()})
        elif isinstance(part, ToolUsePart) and key in overlay.pruned:
            part = pruned_part(part, replacements.get(key))
        out.append(part)
    return out

PINNED_WHY = "sent as written: strategies pass over it, compaction keeps it"
"""Why a pinned ([PERSIST]) message is left as it is, where a user reads it: the detail pane, ``workbench plan``."""


def badges_of(overlay: OverlayState, message: Message) -> tuple[str, ...]:
    ov = overlay
    badges: list[str] = []
    if message.id in ov.pinned:
        badges.append("PERSIST")
    if message.id in ov.summaries or message.kind == "summary":
        badges.append("summary")
    positions = range(len(message.parts)) if message.id not in ov.pinned else range(0)
    if any(ov.is_pruned(message.id, i) for i in positions):
        badges.append("pruned")
    if any((message.id, i) in ov.offloaded for i in positions):
        badges.append("offloaded")
    if any(isinstance(p, ToolResultPart) and p.is_error for p in message.parts):
        badges.append("error")
    return tuple(badges)


def preview_text(parts: Iterable[Part], width: int = 120) -> str:
    """A one-line summary of a message's parts, for lists."""
    for part in parts:
        match part:
            case TextPart(text=text) if text.strip():
                return one_line(text, width)
            case ToolUsePart(name=name, input=tool_input):
                return f"{name}({', '.join(f'{k}={v!r}' for k, v in list(tool_input.items())[:2])})"[:width]
            case ToolResultPart(text=text, is_error=err):
                return (("error: " if err else "→ ") + one_line(text, width))[:width]
            case ThinkingPart(text=text):
                return ("thinking: " + one_line(text, width))[:width]
            case ImagePart(media_type=mt, name=name):
                return f"[Attached {mt}: {name or 'image'}]"
    return ""


def one_line(text: str, width: int) -> str:
    """``" ".join(text.split())[:width]``, reading only as much of ``text`` as that needs: the whitespace-joined
    words of a prefix are a prefix of the whole text's, and a tool output can be megabytes long."""
    limit = 2 * width + 16
    while True:
        head = text[:limit]
        line = " ".join(head.split())
        if len(line) >= width or len(head) == len(text):
            return line[:width]
        limit *= 4
