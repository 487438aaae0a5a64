"""A small OpenAI API on 127.0.0.1 (Responses and Chat Completions), for the proxy tests and the real clients.

Written from the shapes Codex CLI 0.171, OpenCode 1.18 and Aider 0.86 were seen to send and accept (the
exchanges logged in the project's client notes, 2026-11-28): a Responses answer is SSE with
``response.output_item.done`` per item and ``response.completed`` with usage; a Chat Completions answer is
``chat.completion.chunk`` events (text or tool-call deltas, a finish reason, a usage chunk) and ``[DONE]``,
or one ``chat.completion`` body. Each test queues what the "model" answers, in order: a :class:`Scripted`
answer (status, content type, the body in chunks) or a function of the request that returns one. Every
request is recorded (method, path, headers, parsed body) so a test checks what reached the wire.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Scripted:
    """One answer as bytes on the wire."""

    chunks: list[bytes]
    status: int = 200
    content_type: str = "text/event-stream"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


Answer = Scripted | Callable[[Seen], Scripted]


def _event(name: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def usage(input_tokens: int = 100, output_tokens: int = 20, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output_tokens}


def function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": json.dumps(arguments), "status": "completed"}


def custom_tool_call(call_id: str, name: str, text: str) -> dict[str, Any]:
    return {"type": "custom_tool_call", "id": f"ctc_{call_id}", "call_id": call_id, "name": name, "input": text,
            "status": "completed"}


def message(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def reasoning(summary: str, encrypted: str = "enc") -> dict[str, Any]:
    return {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": encrypted}


def responses_stream(items: list[dict[str, Any]], model: str = "fake-model", response_id: str = "resp_1",
                     use: dict[str, Any] | None = None, *, full: bool = False) -> Scripted:
    """A Responses SSE answer: the minimal set Codex accepts, or (``full``) with the created / delta events."""
    chunks: list[bytes] = []
    seq = 0
    response = {"id": response_id, "object": "response", "created_at": 0, "model": model, "status": "in_progress",
                "output": []}
    if full:
        chunks.append(_event("response.created", {"type": "response.created", "sequence_number": seq,
                                                  "response": response}))
        seq += 1
    for index, item in enumerate(items):
        if full and item["type"] == "message":
            text = item["content"][0]["text"]
            for piece in (text[: len(text) // 2], text[len(text) // 2:]):
                chunks.append(_event("response.output_text.delta", {
                    "type": "response.output_text.delta", "sequence_number": seq, "item_id": item["id"],
                    "output_index": index, "content_index": 0, "delta": piece}))
                seq += 1
        chunks.append(_event("response.output_item.done", {"type": "response.output_item.done",
                                                           "sequence_number": seq, "output_index": index, "item": item}))
        seq += 1
    done = {**response, "status": "completed", "output": items, "usage": use or usage()}
    chunks.append(_event("response.completed", {"type": "response.completed", "sequence_number": seq,
                                                "response": done}))
    return Scripted(chunks)


def chat_stream(content: str = "", calls: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
                model: str = "fake-model", use: dict[str, Any] | None = None) -> Scripted:
    """A Chat Completions SSE answer: text pieces or tool-call deltas, the finish reason, usage, ``[DONE]``."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _event(None, {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
                             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    chunks = [chunk({"role": "assistant", "content": ""})]
    for piece in (content[: len(content) // 2], content[len(content) // 2:]) if content else ():
        chunks.append(chunk({"content": piece}))
    for index, (call_id, name, arguments) in enumerate(calls):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": json.dumps(arguments)}}]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    if use is not None:
        chunks.append(_event(None, {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
                                    "choices": [], "usage": use}))
    chunks.append(b"data: [DONE]\n\n")
    return Scripted(chunks)


def chat_whole(content: str, model: str = "fake-model", use: dict[str, Any] | None = None) -> Scripted:
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": use or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
    return Scripted([json.dumps(body).encode()], content_type="application/json")


def error(status: int, text: str = "boom", kind: str = "server_error") -> Scripted:
    body = {"error": {"message": text, "type": kind, "param": None, "code": None}}
    return Scripted([json.dumps(body).encode()], status=status, content_type="application/json")


@dataclass
class LoopbackOpenAI:
    """The server; ``answers`` are served in order, then ``fallback`` (a function of the request) if set."""

    answers: deque[Answer] = field(default_factory=deque)
    fallback: Callable[[Seen], Scripted] | None = None
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                answer = owner._next(seen)
                self.send_response(answer.status)
                self.send_header("content-type", answer.content_type)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for piece in answer.chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_POST = do_GET = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    def _next(self, seen: Seen) -> Scripted:
        with self._lock:
            self.seen.append(seen)
            queued = self.answers.popleft() if self.answers else None
        if queued is None:
            if self.fallback is None:
                return error(500, "no answer queued")
            return self.fallback(seen)
        return queued(seen) if callable(queued) else queued

    def queue(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
