"""Reading an OpenAI answer while it passes through: the Responses and Chat Completions tees.

Like :class:`workbench.proxy.response.ResponseTee` for the Messages API, each is fed the bytes the client
gets, untouched, and at the end says what the model answered: the answer's items read as the request
reader reads them when the client echoes them back (``openai_requests``), and the usage the API reported,
with cached input as cache reads (OpenAI counts it inside ``input_tokens``) and reasoning tokens apart.
Neither raises into the forwarding path: an answer it cannot read is forwarded all the same.
"""

from __future__ import annotations

from typing import Any

import orjson

from workbench.engine.transcript.models import Usage
from workbench.engine.transcript.openai_requests import Api, chat_answer_blocks, read_items
from workbench.proxy.response import Answer

UNREADABLE = (ValueError, KeyError, TypeError, IndexError, AttributeError)


def openai_usage(data: Any, model: str | None) -> Usage | None:
    """Responses (``input_tokens``…) or Chat Completions (``prompt_tokens``…) usage as the workbench's."""
    if not isinstance(data, dict):
        return None
    chat = "prompt_tokens" in data
    total_in = int(data.get("prompt_tokens" if chat else "input_tokens") or 0)
    output = int(data.get("completion_tokens" if chat else "output_tokens") or 0)
    details = data.get("prompt_tokens_details" if chat else "input_tokens_details") or {}
    out_details = data.get("completion_tokens_details" if chat else "output_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    reasoning = int(out_details.get("reasoning_tokens") or 0) if isinstance(out_details, dict) else 0
    return Usage(input_tokens=max(total_in - cached, 0), cache_read_input_tokens=cached, output_tokens=output,
                 reasoning_tokens=reasoning, model=model)


def _assistant_blocks(items: list[Any]) -> list[dict[str, Any]]:
    system: list[dict[str, Any]] = []
    messages = read_items(items, system)
    return [block for message in messages if message["role"] == "assistant" for block in message["content"]]


class OpenAITee:
    """Fed every chunk of one answer of ``api``; :meth:`answer` reads it at the end."""

    def __init__(self, api: Api, streaming: bool) -> None:
        self.api = api
        self.streaming = streaming
        self._buffer = bytearray()
        self._answer = Answer()
        self._items: list[Any] = []
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._broken: str | None = None

    def feed(self, chunk: bytes) -> None:
        if self._broken is not None:
            return
        self._buffer += chunk
        if not self.streaming:
            return
        try:
            self._events()
        except UNREADABLE as exc:  # a malformed event: stop reading, keep forwarding
            self._broken = f"unreadable stream event ({type(exc).__name__}: {exc})"
            self._buffer.clear()

    def _events(self) -> None:
        while True:
            found = [(at, len(sep)) for sep in (b"\n\n", b"\r\n\r\n") if (at := self._buffer.find(sep)) >= 0]
            if not found:
                return
            end, size = min(found)
            raw = bytes(self._buffer[:end])
            del self._buffer[: end + size]
            data = b"\n".join(line[5:].lstrip() for line in raw.splitlines() if line.startswith(b"data:"))
            if data == b"[DONE]":
                self._answer.complete = True
            elif data:
                event = orjson.loads(data)
                self._response_event(event) if self.api == "responses" else self._chat_chunk(event)

    def _response_event(self, event: dict[str, Any]) -> None:
        answer = self._answer
        kind = event.get("type")
        if kind == "response.output_item.done":
            self._items.append(event["item"])
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._response(event.get("response") or {})
            answer.complete = kind == "response.completed"
            if kind == "response.failed":
                error = (event.get("response") or {}).get("error") or {}
                answer.error = f"{error.get('code', 'failed')}: {error.get('message', '')}"
        elif kind == "error":
            answer.error = f"{event.get('code', 'error')}: {event.get('message', '')}"

    def _response(self, response: dict[str, Any]) -> None:
        """A whole response object (the last stream event's, or a non-streamed body)."""
        answer = self._answer
        answer.model = response.get("model")
        output = response.get("output")
        answer.blocks = _assistant_blocks(output if isinstance(output, list) and output else self._items)
        answer.usage = openai_usage(response.get("usage"), answer.model)
        answer.stop_reason = response.get("status")

    def _chat_chunk(self, chunk: dict[str, Any]) -> None:
        answer = self._answer
        answer.model = chunk.get("model") or answer.model
        if chunk.get("usage"):
            answer.usage = openai_usage(chunk["usage"], answer.model)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self._text.append(delta["content"])
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str):
                self._reasoning.append(reasoning)
            for call in delta.get("tool_calls") or ():
                slot = self._calls.setdefault(int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["name"] = function.get("name") or slot["name"]
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                answer.stop_reason = choice["finish_reason"]

    def _chat_message(self) -> dict[str, Any]:
        calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for _, c in sorted(self._calls.items())]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text), "tool_calls": calls}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        return message

    def _whole(self) -> None:
        body = orjson.loads(bytes(self._buffer))
        answer = self._answer
        if self.api == "responses":
            self._response(body)
        else:
            answer.model = body.get("model")
            choice = (body.get("choices") or [{}])[0]
            answer.blocks = chat_answer_blocks(choice.get("message") or {})
            answer.usage = openai_usage(body.get("usage"), answer.model)
            answer.stop_reason = choice.get("finish_reason")
        answer.complete = True

    def answer(self, status: int) -> Answer:
        """What the answer held, read at its end (``status``: the HTTP status it came with)."""
        answer = self._answer
        if self._broken is not None:
            answer.error = self._broken
        elif status >= 400:
            answer.error = f"HTTP {status}: {bytes(self._buffer[:300]).decode(errors='replace')}"
        elif not self.streaming:
            try:
                self._whole()
            except UNREADABLE as exc:
                answer.error = f"unreadable response ({type(exc).__name__}: {exc})"
        elif self.api == "chat":
            answer.blocks = chat_answer_blocks(self._chat_message())
            answer.complete = answer.complete or answer.stop_reason is not None
        return answer
