"""Reading the answer while it passes through: a tee over the Messages API response bytes.

The bytes go to the client untouched as they arrive; this side keeps just enough state to know, at the
end, the assistant message (its content blocks) and the usage the API reported. It never raises into
the forwarding path: a response it cannot read is forwarded all the same and says why here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from workbench.engine.transcript.models import Usage
from workbench.proxy.decoding import DECODE_ERRORS, Decoder


@dataclass
class Answer:
    """What the model answered, as far as the tee could read it."""

    blocks: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = None
    model: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    edits: list[dict[str, Any]] = field(default_factory=list)
    """The API's own context edits on this request (``context_management.applied_edits``): tool uses or
    thinking it cleared before the model read the request."""
    complete: bool = False
    """The whole answer passed (``message_stop``, or a whole JSON body): a cut stream's part is not kept."""
    unreadable: str | None = None
    """Why the proxy could not read the answer it forwarded (an encoding it cannot undo, bad data)."""


def _text(value: Any) -> str | None:
    """A field the API gives as a string, or None when an upstream sent something else."""
    return value if isinstance(value, str) else None


def usage_of(data: Any, model: str | None) -> Usage | None:
    if not isinstance(data, dict):
        return None
    fields = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    values = {name: int(data.get(name) or 0) for name in fields}
    split = data.get("cache_creation")
    if isinstance(split, dict):  # the one-hour cache is priced above the five-minute one
        values["cache_creation_1h_input_tokens"] = int(split.get("ephemeral_1h_input_tokens") or 0)
    return Usage.model_validate({"model": model, **values})


def applied_edits(data: Any) -> list[dict[str, Any]]:
    management = data.get("context_management") if isinstance(data, dict) else None
    edits = management.get("applied_edits") if isinstance(management, dict) else None
    return [edit for edit in edits if isinstance(edit, dict)] if isinstance(edits, list) else []


class ResponseTee:
    """Fed every chunk of one response; :meth:`answer` reads it at the end."""

    def __init__(self, streaming: bool, encoding: str = "") -> None:
        self.streaming = streaming
        self._buffer = bytearray()
        self._answer = Answer()
        self._json: dict[int, list[str]] = {}
        self._broken: str | None = None
        self._decoder = Decoder(encoding) if encoding else None
        if self._decoder is not None and self._decoder.unknown is not None:
            self._broken = self._answer.unreadable = f"unreadable: content-encoding {self._decoder.unknown!r}"
        elif self._decoder is not None and not self._decoder.steps:
            self._decoder = None

    def feed(self, chunk: bytes) -> None:
        if self._broken is not None:
            return
        if self._decoder is not None:
            try:
                chunk = self._decoder.decode(chunk)
            except DECODE_ERRORS as exc:
                self._broken = self._answer.unreadable = f"unreadable: bad compressed data ({exc})"
                self._buffer.clear()
                return
        self._buffer += chunk
        if not self.streaming:
            return
        try:
            self._events()
        except (ValueError, KeyError, TypeError, IndexError) as exc:  # a malformed event: stop reading, keep forwarding
            self._broken = f"unreadable stream event ({type(exc).__name__}: {exc})"
            self._buffer.clear()

    def _events(self) -> None:
        while True:
            end, size = self._boundary()
            if end < 0:
                return
            raw = bytes(self._buffer[:end])
            del self._buffer[: end + size]
            data = b"".join(line[5:].lstrip() for line in raw.splitlines() if line.startswith(b"data:"))
            if data:
                self._event(orjson.loads(data))

    def _boundary(self) -> tuple[int, int]:
        candidates = [(self._buffer.find(sep), len(sep)) for sep in (b"\n\n", b"\r\n\r\n")]
        found = [c for c in candidates if c[0] >= 0]
        return min(found) if found else (-1, 0)

    def _event(self, event: dict[str, Any]) -> None:
        answer = self._answer
        kind = event.get("type")
        if kind == "message_start":
            message = event["message"]
            answer.model = _text(message.get("model"))
            answer.usage = usage_of(message.get("usage"), answer.model)
        elif kind == "content_block_start":
            index = int(event["index"])
            while len(answer.blocks) <= index:
                answer.blocks.append({})
            block = dict(event["content_block"])
            if block.get("type") in ("tool_use", "server_tool_use"):
                self._json[index] = []
            answer.blocks[index] = block
        elif kind == "content_block_delta":
            self._delta(int(event["index"]), event["delta"])
        elif kind == "content_block_stop":
            index = int(event["index"])
            pieces = self._json.pop(index, None)
            if pieces is not None:
                answer.blocks[index]["input"] = orjson.loads("".join(pieces)) if "".join(pieces) else {}
        elif kind == "message_delta":
            answer.stop_reason = _text((event.get("delta") or {}).get("stop_reason"))
            self._merge_usage(event.get("usage"))
            answer.edits = applied_edits(event) or answer.edits
        elif kind == "message_stop":
            answer.complete = True
        elif kind == "error":
            error = event.get("error") or {}
            answer.error = f"{error.get('type', 'error')}: {error.get('message', '')}"

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._answer.blocks[index]
        match delta.get("type"):
            case "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            case "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            case "signature_delta":
                block["signature"] = delta["signature"]
            case "input_json_delta":
                self._json.setdefault(index, []).append(delta["partial_json"])
            case "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])

    def _merge_usage(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        usage = self._answer.usage or Usage(model=self._answer.model)
        update = {key: int(value) for key, value in data.items()
                  if key in Usage.model_fields and isinstance(value, int)}
        self._answer.usage = usage.model_copy(update=update)

    def answer(self, status: int) -> Answer:
        """What the response held, read at its end (``status``: the HTTP status it came with)."""
        answer = self._answer
        if self._broken is not None:
            answer.error = self._broken
        elif status >= 400:
            answer.error = f"HTTP {status}: {bytes(self._buffer[:300]).decode(errors='replace')}"
        elif not self.streaming:
            try:
                self._whole(orjson.loads(bytes(self._buffer)))
            except (ValueError, TypeError, AttributeError) as exc:  # orjson's and pydantic's errors are ValueErrors
                answer.error = answer.unreadable = f"unreadable response ({type(exc).__name__}: {exc})"
        return answer

    def _whole(self, body: Any) -> None:
        answer = self._answer
        if not isinstance(body, dict):
            raise TypeError(f"a JSON {type(body).__name__}, not an object")
        answer.model = _text(body.get("model"))
        answer.blocks = [b for b in body.get("content") or () if isinstance(b, dict)]
        answer.usage = usage_of(body.get("usage"), answer.model)
        answer.stop_reason = _text(body.get("stop_reason"))
        answer.edits = applied_edits(body)
        answer.complete = True
