"""The overlay applied to a request an agent is about to send: what the user steered, on the wire.

Only the blocks the overlay changes are rewritten, through the same ``effective_parts`` the projection
uses, so the request forwarded equals what the workbench shows. Everything else (ids, the pairing of
``tool_use`` and ``tool_result``, cache marks, unknown fields) is passed as it came. Pinned messages are
never touched. A result offloaded to a file (``context.wire_offload``) is written to it, from what the agent
sent, before the request that points the agent at it goes upstream.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.engine.context.effective import effective_parts
from workbench.engine.context.wire_offload import is_offload_path
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.blocks import part_block
from workbench.engine.transcript.models import ToolResultPart
from workbench.engine.transcript.overlay import OverlayState
from workbench.engine.transcript.request_blocks import RawMessage, transcript_message


def touched_messages(overlay: OverlayState) -> set[str]:
    """Messages with a part the overlay replaces (pinned ones excepted)."""
    return ({message_id for message_id, _ in overlay.pruned} | {message_id for message_id, _ in overlay.offloaded}) \
        - overlay.pinned


def write_offload(path: str, text: str) -> None:
    """The whole result, where its reference says it is (once: the name is the content's hash). The folder
    gets a ``.gitignore`` so the agent's repository does not pick the files up."""
    if not is_offload_path(path):
        raise WorkbenchError(f"refusing to write an offloaded result outside a .workbench/offload folder: {path}")
    target = Path(path)
    if target.exists():
        return
    if not target.parent.parent.parent.is_dir():
        raise WorkbenchError(f"the agent's working directory {target.parent.parent.parent} is not on this machine")
    target.parent.mkdir(parents=True, exist_ok=True)
    ignore = target.parent.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_bytes(b"*\n")
    partial = target.with_suffix(f".{os.getpid()}.part")
    partial.write_bytes(text.encode())
    partial.replace(target)


def steer_message(raw: RawMessage, message_id: str, overlay: OverlayState) -> dict[str, Any] | None:
    """``raw`` with the overlay's replacements, or None when it changes nothing."""
    content = raw.get("content")
    if not isinstance(content, list):
        return None
    message = transcript_message("", 0, "", raw, 0).model_copy(update={"id": message_id})
    effective = effective_parts(overlay, message)
    out: list[Any] | None = None
    for position, (part, shown) in enumerate(zip(message.parts, effective, strict=True)):
        if shown is part:
            continue
        block = part_block(shown)
        if block is None:
            continue
        offload = overlay.offloaded.get((message_id, position))
        if offload is not None and offload.path and isinstance(part, ToolResultPart) \
                and not overlay.is_pruned(message_id, position):
            write_offload(offload.path, part.text)
        original = content[position]
        if isinstance(original, Mapping) and "cache_control" in original:
            block["cache_control"] = original["cache_control"]
        out = out if out is not None else list(content)
        out[position] = block
    return None if out is None else {**raw, "content": out}


def steer_messages(messages: Sequence[Any], ids: Sequence[str], overlay: OverlayState) -> dict[int, dict[str, Any]]:
    """The messages the overlay changes, by position, with its replacements applied (``ids``: the transcript
    id of each message); empty when it changes nothing, so the client's bytes can go upstream as they are."""
    touched = touched_messages(overlay)
    steered: dict[int, dict[str, Any]] = {}
    if not touched:
        return steered
    for index, message_id in enumerate(ids[:len(messages)]):
        if message_id in touched and isinstance(messages[index], Mapping):
            changed = steer_message(messages[index], message_id, overlay)
            if changed is not None:
                steered[index] = changed
    return steered


def changed_blocks(messages: Sequence[Any], steered: Mapping[int, Mapping[str, Any]]) -> set[tuple[int, int]]:
    """(message, block) positions where :func:`steer_messages` replaced a block."""
    out: set[tuple[int, int]] = set()
    for i, after in steered.items():
        for j, (a, b) in enumerate(zip(messages[i].get("content") or (), after.get("content") or (), strict=False)):
            if a is not b:
                out.add((i, j))
    return out
