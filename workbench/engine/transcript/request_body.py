"""A request body as the proxy reads it: parsed, its messages keyed, and where each message lies in its bytes.

A proxied agent sends its whole history again with every request, each the last one plus a turn. At
150,000 tokens, parsing the 790 KB body took 2.4 ms of every request and serialising it again for one
steered block 2 ms more. So a body that begins with the bytes of one read before takes the messages they
share (and their keys) from it and parses only what follows, and a steered body is the client's bytes
with the changed messages spliced in. Both need the client's bytes to be exactly what orjson writes for
the parsed body (``JSON.stringify`` writes the same): then a splice is, byte for byte, the body
serialised whole. A body written otherwise is parsed whole and serialised whole, every time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from workbench.engine.transcript.request_blocks import MessageKeys

Span = tuple[int, int]
MESSAGES = b'"messages":['


@dataclass(frozen=True)
class RequestBody:
    """One request body; ``spans`` give each message's bytes in ``raw`` (None: ``raw`` is not orjson's own
    writing of ``body``, so nothing may be spliced into it). Shared between requests: never mutated."""

    raw: bytes
    body: dict[str, Any]
    keys: list[str]
    spans: list[Span] | None

    @property
    def messages(self) -> list[Any]:
        messages: list[Any] = self.body["messages"]
        return messages

    def with_messages(self, changed: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
        """The body with message ``i`` replaced by ``changed[i]``."""
        messages = list(self.messages)
        for index, message in changed.items():
            messages[index] = message
        return {**self.body, "messages": messages}

    def rewritten(self, changed: Mapping[int, Mapping[str, Any]]) -> bytes:
        """``orjson.dumps`` of :meth:`with_messages`, made by splicing only the changed messages into the
        client's bytes when they allow it."""
        if self.spans is None:
            return orjson.dumps(self.with_messages(changed))
        view = memoryview(self.raw)
        pieces: list[bytes | memoryview] = []
        at = 0
        for index in sorted(changed):
            start, end = self.spans[index]
            pieces += [view[at:start], orjson.dumps(changed[index])]
            at = end
        pieces.append(view[at:])
        return b"".join(pieces)

    def shared_with(self, raw: bytes) -> int:
        """How many leading messages ``raw`` has byte for byte as this body has them, after the same fields."""
        spans = self.spans
        view = memoryview(self.raw)
        if not spans or not raw.startswith(view[:spans[0][0]]):
            return 0

        def shares(n: int) -> bool:
            end = spans[n - 1][1]
            return raw.startswith(view[:end]) and raw[end:end + 1] in (b",", b"]")

        for n in (len(spans), len(spans) - 1):  # the same history again, or the last one's cache mark moved
            if n and shares(n):
                return n
        low, high = 0, len(spans) - 2  # the first ``low`` messages are shared; more than ``high`` are not
        while low < high:
            middle = (low + high + 1) // 2
            if shares(middle):
                low = middle
            else:
                high = middle - 1
        return low


class RequestBodies:
    """Reads request bodies, remembering the last few so a body that extends one of them is parsed from
    where it differs. Used from one thread (the proxy's loop)."""

    def __init__(self, remembered: int = 8) -> None:
        self._recent: deque[RequestBody] = deque(maxlen=remembered)
        self._keys = MessageKeys()

    def read(self, raw: bytes) -> RequestBody | None:
        """The body of a Messages API request, or None when ``raw`` is JSON of another shape.
        Raises ``orjson.JSONDecodeError`` for what is not JSON."""
        request = self._extending(raw) or self._whole(raw)
        if request is not None and request.spans is not None:
            self._recent.appendleft(request)
        return request

    def _extending(self, raw: bytes) -> RequestBody | None:
        """``raw`` read from the remembered body it shares most messages with, which it then replaces: the
        next request of that conversation will extend this one."""
        best: RequestBody | None = None
        shared = 0
        for seen in self._recent:
            n = seen.shared_with(raw)
            if n > shared:
                best, shared = seen, n
        if best is None:
            return None
        self._recent.remove(best)
        return self._extend(best, raw, shared)

    def _extend(self, seen: RequestBody, raw: bytes, shared: int) -> RequestBody | None:
        """``raw`` read as ``seen``'s first ``shared`` messages and fields before them, and the rest parsed; None
        when the rest is not as orjson writes it."""
        assert seen.spans is not None
        end = seen.spans[shared - 1][1]
        after = end + 1 if raw[end:end + 1] == b"," else end
        rest = b"{" + MESSAGES + raw[after:]
        tail = orjson.loads(rest)
        if not isinstance(tail, dict) or not isinstance(tail.get("messages"), list) or orjson.dumps(tail) != rest:
            return None
        head = _head(seen.body)
        if head.keys() & tail.keys():
            return None
        new: list[Any] = tail.pop("messages")
        serialised = [orjson.dumps(message) for message in new]
        spans = seen.spans[:shared]
        for piece in serialised:
            spans.append((after, after + len(piece)))
            after += len(piece) + 1
        body = {**head, "messages": seen.messages[:shared] + new, **tail}
        return RequestBody(raw, body, seen.keys[:shared] + self._keys.keys(new, serialised), spans)

    def _whole(self, raw: bytes) -> RequestBody | None:
        body = orjson.loads(raw)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return None
        messages = body["messages"]
        serialised = [orjson.dumps(message) for message in messages]
        return RequestBody(raw, body, self._keys.keys(messages, serialised), _spans(raw, body, serialised))


def _head(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields before ``messages``."""
    head: dict[str, Any] = {}
    for key, value in body.items():
        if key == "messages":
            break
        head[key] = value
    return head


def _spans(raw: bytes, body: Mapping[str, Any], serialised: Sequence[bytes]) -> list[Span] | None:
    """Where each message lies in ``raw``, when ``raw`` is exactly ``orjson.dumps(body)``."""
    empty = orjson.dumps({**body, "messages": []})
    head = _head(body)
    start = at = len(orjson.dumps(head)) - (0 if head else 1) + len(MESSAGES)
    view = memoryview(empty)
    if not raw.startswith(view[:start]):
        return None
    spans: list[Span] = []
    for piece in serialised:
        if spans:
            if not raw.startswith(b",", at):
                return None
            at += 1
        if not raw.startswith(piece, at):
            return None
        spans.append((at, at + len(piece)))
        at += len(piece)
    return spans if len(raw) - at == len(empty) - start and raw.endswith(view[start:]) else None
