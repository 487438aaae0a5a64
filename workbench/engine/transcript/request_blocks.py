"""Messages API request content as the transcript sees it: the identity of a message, and blocks as parts.

A proxied agent sends its whole history again with every request. A message is known by a hash of what
the model reads of it, leaving out what does not change that (``cache_control`` marks, fields set to
null), so the same message has the same key in every request that carries it, whether the response
stream wrote it or the client echoed it back.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from workbench.engine.transcript.openai_requests import AGENT_MEMORY

RawBlock = Mapping[str, Any]
RawMessage = Mapping[str, Any]
KEY_BYTES = 12
IGNORED = frozenset({"cache_control"})


def content_blocks(message: RawMessage) -> list[RawBlock]:
    """A message's content as a list of blocks (the API accepts a bare string for one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def identity_block(block: RawBlock) -> dict[str, Any]:
    """The block without what does not change what the model reads."""
    return {key: value for key, value in block.items() if key not in IGNORED and value is not None}


def digest(data: Any) -> str:
    """A short stable hash of JSON-able data (keys sorted)."""
    return hashlib.blake2b(orjson.dumps(data, option=orjson.OPT_SORT_KEYS), digest_size=KEY_BYTES).hexdigest()


def message_key(message: RawMessage) -> str:
    """The identity of one request message: its role and its blocks, marks left out. Runs for every message
    of every request, so blocks that carry nothing to leave out are hashed as they are."""
    content = message.get("content")
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}]
    else:
        blocks = [block if "cache_control" not in block and None not in block.values() else identity_block(block)
                  for block in content_blocks(message)]
    return hashlib.blake2b(orjson.dumps([message.get("role"), blocks], option=orjson.OPT_SORT_KEYS),
                           digest_size=KEY_BYTES).hexdigest()


class MessageKeys:
    """:func:`message_key` of every message of a request, remembering the messages of the last requests by
    their serialised bytes: a proxied agent sends its whole history again with every request, and keying
    600 messages one by one took 5 ms of every request at 150,000 tokens (a serialisation and a lookup: 1 ms).
    Holds at most ``limit`` messages (the current request's alone when it would hold more); safe to share
    between threads (a lost entry is only computed again)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._known: dict[bytes, str] = {}
        self._limit = limit

    def keys(self, messages: Sequence[RawMessage], serialised: Sequence[bytes] | None = None) -> list[str]:
        """``serialised``: ``orjson.dumps`` of each message, when the caller has it already."""
        if serialised is None:
            serialised = [orjson.dumps(message) for message in messages]
        known, seen = self._known, {}
        out = []
        for message, raw in zip(messages, serialised, strict=True):
            key = known.get(raw)
            if key is None:
                key = message_key(message)
            seen[raw] = key
            out.append(key)
        if len(known) + len(seen) > self._limit:
            self._known = seen
        else:
            known.update(seen)
        return out


def message_id(index: int, key: str) -> str:
    """A transcript message id that carries where the message stands and what it holds."""
    return f"r{index}-{key}"


def parse_message_id(value: str) -> tuple[int, str] | None:
    """(index, key) of an id made by :func:`message_id`, or None for another kind of id."""
    head, _, key = value.partition("-")
    if not head.startswith("r") or not key or not head[1:].isdigit():
        return None
    return int(head[1:]), key


def result_content(content: Any) -> tuple[str, tuple[ImagePart, ...]]:
    """A ``tool_result``'s content (a string, or text and image blocks) as text and images."""
    if isinstance(content, str):
        return content, ()
    texts: list[str] = []
    images: list[ImagePart] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "image":
            images.append(image_part(block))
        elif isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "\n".join(texts), tuple(images)


def image_part(block: RawBlock) -> ImagePart:
    """An image block as a part: its media type and decoded size (the data itself is not kept)."""
    source = block.get("source")
    data = source.get("data") if isinstance(source, Mapping) else None
    size = 0
    if isinstance(data, str):
        try:
            size = len(base64.b64decode(data, validate=False))
        except (binascii.Error, ValueError):
            size = len(data) * 3 // 4
    media = source.get("media_type", "image/png") if isinstance(source, Mapping) else "image/png"
    return ImagePart(media_type=str(media), byte_size=size)


def part_of(block: RawBlock) -> Part:
    """The transcript part of one content block; a block the engine has no part for is kept as its JSON
    text, so part positions stay the block positions the overlay names."""
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return TextPart(text=block["text"])
    if kind == "thinking":
        return ThinkingPart(text=str(block.get("thinking", "")), signature=str(block.get("signature", "")))
    if kind == "redacted_thinking":
        return ThinkingPart(redacted=True)
    if kind in ("tool_use", "server_tool_use") and isinstance(block.get("input", {}), Mapping):
        return ToolUsePart(id=str(block.get("id", "")), name=str(block.get("name", "")), input=dict(block.get("input", {})))
    if kind == "tool_result":
        text, images = result_content(block.get("content", ""))
        return ToolResultPart(tool_use_id=str(block.get("tool_use_id", "")), text=text, images=images,
                              is_error=bool(block.get("is_error", False)))
    if kind == "image":
        return image_part(block)
    return TextPart(text=orjson.dumps(identity_block(block)).decode())


def transcript_message(session_id: str, index: int, key: str, raw: RawMessage, position: int) -> Message:
    """One request message as a transcript message (``position``: its place in the session's transcript)."""
    role = raw.get("role")
    parts: list[Part] = [part_of(block) for block in content_blocks(raw)]
    return Message(
        id=message_id(index, key),
        session_id=session_id,
        index=position,
        role=role if role in ("assistant", "system") else "user",
        parts=parts,
        kind="tool_result" if parts and all(isinstance(p, ToolResultPart) for p in parts) else "message",
        source={"format": "proxy", "request_index": index},
    )


def _same(text: str) -> str:
    return text


def first_user_text(messages: Sequence[RawMessage], clean: Callable[[str], str] = _same) -> str:
    """The first thing the user typed (system reminders skipped), for a session's title. ``clean``: what is
    kept of it (redaction), applied before it is cut to length, so no key is cut into a shape it misses."""
    for raw in messages:
        if raw.get("role") != "user":
            continue
        for block in content_blocks(raw):
            text = block.get("text")
            if isinstance(text, str) and text.strip() and not text.lstrip().startswith(("<", *AGENT_MEMORY)):
                return " ".join(clean(text).split())[:80]
    return ""
