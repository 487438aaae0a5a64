"""Steering put back on the OpenAI wire: the blocks the overlay changed, in the client's own request shape.

The proxy steers an OpenAI request through its Messages API reading (``openai_requests``). What goes
upstream is the client's request with only the changed blocks written back where they came from (their
:data:`~workbench.engine.transcript.openai_requests.Origin`): a pruned or restored tool result becomes the
``output`` of its ``function_call_output`` (Responses) or the ``content`` of its ``tool`` message (Chat
Completions), ids and ``call_id`` untouched; a text or a call's arguments likewise. A change without a
place in that shape (thinking, which OpenAI sends encrypted) gives None: the request then goes as the client
sent it. A compaction (:func:`reshaped`) keeps the system items and the items of the messages it keeps, and
puts its summary in as one user message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from workbench.engine.transcript.openai_requests import CALL_PARTS, SYSTEM_ROLES, Api, Origin, Origins


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else ()
    return "\n".join(str(b.get("text")) for b in blocks if isinstance(b, Mapping) and isinstance(b.get("text"), str))


def _put_text(item: dict[str, Any], part: int, text: str) -> bool:
    if part < 0:
        item["content"] = text
        return isinstance(item.get("content"), str)
    parts = item.get("content")
    if not isinstance(parts, list) or part >= len(parts) or not isinstance(parts[part], Mapping):
        return False
    item["content"] = [*parts[:part], {**parts[part], "text": text}, *parts[part + 1:]]
    return True


def _put_call(api: Api, item: dict[str, Any], part: int, tool_input: Mapping[str, Any]) -> bool:
    if api == "responses":
        if item.get("type") == "custom_tool_call":
            value = tool_input.get("input")
            item["input"] = value
            return isinstance(value, str)
        item["arguments"] = orjson.dumps(dict(tool_input)).decode()
        return item.get("type") == "function_call"
    calls = item.get("tool_calls")
    n = part - CALL_PARTS
    if not isinstance(calls, list) or not 0 <= n < len(calls) or not isinstance(calls[n], Mapping):
        return False
    function = {**(calls[n].get("function") or {}), "arguments": orjson.dumps(dict(tool_input)).decode()}
    item["tool_calls"] = [*calls[:n], {**calls[n], "function": function}, *calls[n + 1:]]
    return True


def _put(api: Api, item: dict[str, Any], part: int, block: Mapping[str, Any]) -> bool:
    """Write ``block`` back into ``item`` (a copy) where it came from; False when it has no place there."""
    kind = block.get("type")
    if kind == "tool_result":
        if api == "responses" and str(item.get("type", "")).endswith("_output"):
            item["output"] = _text(block.get("content"))
            return True
        if api == "chat" and item.get("role") == "tool":
            item["content"] = _text(block.get("content"))
            return True
        return False
    if kind == "text" and isinstance(block.get("text"), str):
        return _put_text(item, part, block["text"])
    if kind == "tool_use" and isinstance(block.get("input"), Mapping):
        return _put_call(api, item, part, block["input"])
    return False


def rewritten(api: Api, body: Mapping[str, Any], origins: Origins, messages: Sequence[Mapping[str, Any]],
              changed: Iterable[tuple[int, int]]) -> dict[str, Any] | None:
    """The client's request with the ``changed`` (message, block) positions of the steered reading
    (``messages``) written back; None when one of them has no place in the client's shape."""
    field = "input" if api == "responses" else "messages"
    items = list(body.get(field) or ())
    copied: set[int] = set()
    for message, block in sorted(changed):
        try:
            at, part = origins[message][block]
            new = messages[message]["content"][block]
        except (IndexError, KeyError, TypeError):
            return None
        if not isinstance(items[at], Mapping) or not isinstance(new, Mapping):
            return None
        if at not in copied:
            items[at], copied = dict(items[at]), copied | {at}
        if not _put(api, items[at], part, new):
            return None
    return {**body, field: items}


def _leading_system(api: Api, items: Sequence[Any]) -> int:
    """How many items at the start are developer/system messages (the reading's system prompt)."""
    count = 0
    for item in items:
        role = item.get("role") if isinstance(item, Mapping) else None
        message = api == "chat" or item.get("type", "message") == "message"
        if role not in SYSTEM_ROLES or not message:
            break
        count += 1
    return count


def _summary_item(api: Api, block: Mapping[str, Any]) -> dict[str, Any]:
    text = str(block.get("text", ""))
    if api == "chat":
        return {"role": "user", "content": text}
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _sources(origins: Origins, reading: Sequence[Mapping[str, Any]], ids: Sequence[str],
             sent: Sequence[Mapping[str, Any]], sent_ids: Sequence[str | None]) -> list[list[Origin | None]]:
    """Where each block sent comes from: by its message's id, else (a message the compaction merged) by the
    block itself when it is the reading's own; None for a block of neither (a summary's)."""
    position = {message_id: index for index, message_id in enumerate(ids)}
    own: dict[int, Origin] = {}
    for index, message in enumerate(reading):
        for block, origin in zip(message.get("content") or (), origins[index], strict=False):
            own[id(block)] = origin
    out: list[list[Origin | None]] = []
    for message, message_id in zip(sent, sent_ids, strict=True):
        blocks = list(message.get("content") or ())
        at = position.get(message_id) if message_id is not None else None
        if at is not None and at < len(origins) and len(origins[at]) == len(blocks):
            out.append(list(origins[at]))
        else:
            out.append([own.get(id(block)) for block in blocks])
    return out


def reshaped(api: Api, body: Mapping[str, Any], origins: Origins, reading: Sequence[Mapping[str, Any]],
             ids: Sequence[str], sent: Sequence[Mapping[str, Any]], sent_ids: Sequence[str | None],
             changed: set[tuple[int, int]]) -> dict[str, Any] | None:
    """The client's request reshaped as a compaction reshaped its reading (message ``ids``) into ``sent``: the
    system items, then for each block sent the item it came from (a ``changed`` block written back), a summary
    as one user message; None when a changed block cannot be placed."""
    field = "input" if api == "responses" else "messages"
    items = list(body.get(field) or ())
    out: list[Any] = items[:_leading_system(api, items)]
    last: int | None = None
    for m, (message, sources) in enumerate(zip(sent, _sources(origins, reading, ids, sent, sent_ids), strict=True)):
        for b, (block, origin) in enumerate(zip(message.get("content") or (), sources, strict=True)):
            if origin is None:
                if (m, b) in changed or not isinstance(block, Mapping) or block.get("type") != "text":
                    return None
                out.append(_summary_item(api, block))
                last = None
                continue
            at, part = origin
            if at != last:
                out.append(dict(items[at]))
                last = at
            if (m, b) in changed and not _put(api, out[-1], part, block):
                return None
    return {**body, field: out}
