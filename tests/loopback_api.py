"""A small Anthropic Messages API on 127.0.0.1, for driving the real ``anthropic`` SDK in tests.

Each test queues what the "model" answers, in order: a :class:`Reply` (text,
thinking and tool_use blocks, usage, stop reason), a function of the request
body that returns one (to answer like a model that read the request), or a
fault — an HTTP error with the API's error JSON, a stream cut off mid-way, a
malformed event, or an ``error`` event inside a 200 stream. The server records
every request (path, headers, parsed JSON body) so a test can check exactly
what was sent.

Streaming replies are sent the way the API sends them: ``text/event-stream``
in chunked transfer encoding, ``message_start`` (usage including the cache
counts), ``content_block_start`` / ``_delta`` / ``_stop`` per block (text in
several ``text_delta`` pieces, thinking as ``thinking_delta`` pieces then a
``signature_delta``, tool input as several ``input_json_delta`` pieces),
``message_delta`` (stop reason, output usage) and ``message_stop``.

The server binds 127.0.0.1 on a free port, serves from a daemon thread, and
stops — closing every open connection — when its ``with`` block ends.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import brotli  # type: ignore[import-untyped]  # no type information shipped

if sys.version_info >= (3, 14):
    from compression.zstd import ZstdCompressor
else:
    from backports.zstd import ZstdCompressor

PROMPT_TOO_LONG = "prompt is too long: 210000 tokens > 200000 maximum"


# --- what the model answers ----------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(tool_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


@dataclass
class Reply:
    """One complete assistant message."""

    blocks: list[dict[str, Any]]
    input_tokens: int = 100
    output_tokens: int = 20
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int | None = None
    """Of ``cache_creation_input_tokens``, those written to the one-hour cache; when set, the usage carries the
    API's ``cache_creation`` split by TTL."""
    stop_reason: str | None = None
    """Default: ``tool_use`` when a block is a tool call, else ``end_turn``."""
    model: str | None = None
    """Default: the model the request named."""
    pieces: int = 3
    """Into how many deltas each text, thinking and tool-input string is cut."""
    applied_edits: list[dict[str, Any]] | None = None
    """The API's own context edits (``context_management.applied_edits``), when the answer reports some."""

    def stop(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(b["type"] == "tool_use" for b in self.blocks) else "end_turn"

    def start_usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": 1,
        }
        if self.cache_creation_1h_input_tokens is not None:
            one_hour = self.cache_creation_1h_input_tokens
            usage["cache_creation"] = {"ephemeral_5m_input_tokens": self.cache_creation_input_tokens - one_hour,
                                       "ephemeral_1h_input_tokens": one_hour}
        return usage

    def message(self, model: str, message_id: str) -> dict[str, Any]:
        """The non-streaming response body."""
        management = {"context_management": {"applied_edits": self.applied_edits}} if self.applied_edits else {}
        return {
            **management,
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model or model,
            "content": self.blocks,
            "stop_reason": self.stop(),
            "stop_sequence": None,
            "usage": {**self.start_usage(), "output_tokens": self.output_tokens},
        }

    def events(self, model: str, message_id: str) -> list[tuple[str, dict[str, Any]]]:
        """The SSE events of the streamed response, in order."""
        start = {**self.message(model, message_id), "content": [], "stop_reason": None,
                 "usage": self.start_usage()}
        start.pop("context_management", None)
        management = {"context_management": {"applied_edits": self.applied_edits}} if self.applied_edits else {}
        out: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start}),
            ("ping", {"type": "ping"}),
        ]
        for index, block in enumerate(self.blocks):
            out.extend(_block_events(index, block, self.pieces))
        out.append(("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": self.stop(), "stop_sequence": None},
                                      "usage": {"output_tokens": self.output_tokens}, **management}))
        out.append(("message_stop", {"type": "message_stop"}))
        return out


def split(value: str, pieces: int) -> list[str]:
    """``value`` in ``pieces`` consecutive, non-empty (where possible) slices."""
    if not value:
        return [""]
    size = max(1, -(-len(value) // max(1, pieces)))
    return [value[i : i + size] for i in range(0, len(value), size)]


def _block_events(index: int, block: dict[str, Any], pieces: int) -> list[tuple[str, dict[str, Any]]]:
    def delta(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": body}

    kind = block["type"]
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [delta({"type": "text_delta", "text": p}) for p in split(block["text"], pieces)]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [delta({"type": "thinking_delta", "thinking": p}) for p in split(block["thinking"], pieces)]
        deltas.append(delta({"type": "signature_delta", "signature": block["signature"]}))
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        raw = json.dumps(block["input"])
        # The API opens with an empty piece, then the JSON in fragments that are not valid on their own.
        deltas = [delta({"type": "input_json_delta", "partial_json": p}) for p in ["", *split(raw, pieces)]]
    else:
        raise ValueError(f"loopback: unknown block type {kind!r}")
    return [
        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
        *deltas,
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


# --- faults --------------------------------------------------------------------


@dataclass
class ErrorResponse:
    """An HTTP error with the API's error body."""

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.error_type, "message": self.message}}


def prompt_too_long() -> ErrorResponse:
    return ErrorResponse(400, "invalid_request_error", PROMPT_TOO_LONG)


def request_too_large() -> ErrorResponse:
    """The API's 413: the request body is over its size limit."""
    return ErrorResponse(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")


def prompt_too_long_in_stream(after_events: int = 0) -> StreamError:
    """"prompt is too long" as an ``error`` event inside a 200 stream, after ``after_events`` normal events."""
    return StreamError(Reply([text("never finished")]), error=prompt_too_long(), after_events=after_events)


def rate_limited(retry_after: str | None = None) -> ErrorResponse:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return ErrorResponse(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit.", headers)


def overloaded() -> ErrorResponse:
    return ErrorResponse(529, "overloaded_error", "Overloaded")


def server_error() -> ErrorResponse:
    return ErrorResponse(500, "api_error", "Internal server error")


def unauthorized() -> ErrorResponse:
    return ErrorResponse(401, "authentication_error", "invalid x-api-key")


@dataclass
class Dropped:
    """Stream ``reply`` but cut the connection after ``after_events`` SSE events."""

    reply: Reply
    after_events: int
    clean_eof: bool = False
    """False: abort mid chunked body (the client sees a broken connection).
    True: end the body properly but without ``message_stop`` (a stream that just stops)."""


@dataclass
class Malformed:
    """A 200 stream whose second event's data is not JSON."""

    reply: Reply


@dataclass
class StreamError:
    """A 200 stream that starts normally, then sends an ``error`` event (as the API does when overloaded mid-way)."""

    reply: Reply
    error: ErrorResponse = field(default_factory=overloaded)
    after_events: int = 3


@dataclass
class Stalled:
    """A 200 stream that sends ``after_events`` events, then nothing for ``seconds`` (longer than the client's
    timeout), then closes: a stream that stalls mid-answer."""

    reply: Reply
    seconds: float
    after_events: int = 3


Responder = Callable[[dict[str, Any]], "Reply | ErrorResponse | Dropped | Malformed | StreamError | Stalled"]
Scripted = Reply | ErrorResponse | Dropped | Malformed | StreamError | Stalled | Responder


# --- the server ----------------------------------------------------------------


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: Any


class LoopbackAPI:
    """``with LoopbackAPI() as api: api.queue(Reply([text("hi")]))``; ``api.url`` is the base URL."""

    def __init__(self) -> None:
        self._script: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.errors: list[Exception] = []
        """Exceptions raised by responder functions (each also answered as a 400)."""
        self.count_tokens: Callable[[dict[str, Any]], int] = lambda body: len(json.dumps(body)) // 4
        """What ``/v1/messages/count_tokens`` answers for a body."""
        self.cut_streams = 0
        """Streams the client closed before their end."""
        self.pause = 0.0
        """Seconds between streamed chunks, to pace a stream like a model writing (benchmarks)."""
        self.encoding: str | None = None
        """``content-encoding`` of every answer: ``gzip``, ``deflate``, ``br`` or ``zstd`` (a stream compressed
        event by event, each flushed as it goes), or any other name (the bytes go as they are, with that name)."""
        self.sent: list[bytes] = []
        """Each answer's body bytes exactly as written to the wire (compressed when :attr:`encoding` says so)."""
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    # --- script ---

    def queue(self, *items: Scripted) -> LoopbackAPI:
        with self._lock:
            self._script.extend(items)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    def _next(self, body: dict[str, Any]) -> Reply | ErrorResponse | Dropped | Malformed | StreamError | Stalled | None:
        with self._lock:
            item = self._script.popleft() if self._script else None
        if callable(item) and not isinstance(item, Reply | ErrorResponse | Dropped | Malformed | StreamError | Stalled):
            item = item(body)
        return item

    @property
    def message_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/v1/messages"]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Bodies of the ``/v1/messages`` requests, in order."""
        return [r.body for r in self.message_requests]

    # --- lifecycle ---

    @property
    def url(self) -> str:
        assert self._server is not None, "the loopback server is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        api = self

        class Handler(_Handler):
            owner = api

        server = _Server(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="loopback-api", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            _close(conn, abort=False)
        if self._thread is not None:
            self._thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many clients at once (the proxy benchmark) must not be refused

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (or a connection this server cut on purpose) is expected here.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _close(conn: socket.socket, *, abort: bool) -> None:
    try:
        if abort:  # RST instead of FIN: the peer sees the connection break
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        conn.close()
    except OSError:
        pass


class _Handler(BaseHTTPRequestHandler):
    owner: LoopbackAPI
    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection's thread ends by itself

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each event leaves at once, as the API's
        with self.owner._lock:
            self.owner._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        with self.owner._lock:
            self.owner._connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # --- requests ---

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", errors="replace")
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.owner._lock:
            self.owner.requests.append(Recorded(path=path, headers=headers, body=body))
        if path == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": self.owner.count_tokens(body)})
        elif path == "/v1/messages":
            self._messages(body if isinstance(body, dict) else {})
        else:
            self._error(ErrorResponse(404, "not_found_error", f"loopback: no route {path}"))

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        with self.owner._lock:
            self.owner.requests.append(Recorded(path=path, headers={k.lower(): v for k, v in self.headers.items()},
                                                body=None))
        if path == "/v1/models":
            self._json(200, {"data": [{"type": "model", "id": "claude-opus-4-6", "display_name": "Claude Opus 4.6",
                                       "created_at": "2026-02-01T00:00:00Z"}],
                             "has_more": False, "first_id": "claude-opus-4-6", "last_id": "claude-opus-4-6"})
        else:
            self._error(ErrorResponse(404, "not_found_error", f"loopback: no route {path}"))

    def _messages(self, body: dict[str, Any]) -> None:
        try:
            item = self.owner._next(body)
        except Exception as exc:  # noqa: BLE001 - a test's responder failed: say so to the client, keep it for the test
            self.owner.errors.append(exc)
            self._error(ErrorResponse(400, "invalid_request_error", f"loopback responder raised {exc!r}"))
            return
        model = str(body.get("model", "unknown"))
        message_id = f"msg_loop{len(self.owner.requests):04d}"
        match item:
            case None:
                self._error(ErrorResponse(400, "invalid_request_error",
                                          "loopback: no scripted response left for this request"))
            case ErrorResponse():
                self._error(item)
            case Reply() if body.get("stream"):
                self._stream(item.events(model, message_id))
            case Reply():
                self._json(200, item.message(model, message_id))
            case Dropped(reply=reply, after_events=n, clean_eof=clean):
                events = reply.events(model, message_id)[:n]
                if clean:
                    self._stream(events)
                else:
                    self._stream(events, finish=False)
                    self.close_connection = True
                    _close(self.connection, abort=True)
            case Malformed(reply=reply):
                events = reply.events(model, message_id)
                chunks = [_sse(*events[0]), b"event: content_block_start\ndata: {\"type\": \"content_block_st\n\n",
                          *(_sse(*e) for e in events[1:])]
                self._stream_raw(chunks)
            case StreamError(reply=reply, error=error, after_events=n):
                events = reply.events(model, message_id)[:n]
                self._stream_raw([*(_sse(*e) for e in events), _sse("error", error.body())])
            case Stalled(reply=reply, seconds=seconds, after_events=n):
                self._stream(reply.events(model, message_id)[:n], finish=False)
                time.sleep(seconds)
                self.close_connection = True
                _close(self.connection, abort=True)

    # --- writing ---

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        encoder = _Encoder(self.owner.encoding)
        data = encoder.encode(json.dumps(payload).encode()) + encoder.end()
        with self.owner._lock:
            self.owner.sent.append(data)
        self.send_response(status)
        if self.owner.encoding:
            self.send_header("content-encoding", self.owner.encoding)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_loopback")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, error: ErrorResponse) -> None:
        self._json(error.status, error.body(), error.headers)

    def _stream(self, events: list[tuple[str, dict[str, Any]]], *, finish: bool = True) -> None:
        self._stream_raw([_sse(name, data) for name, data in events], finish=finish)

    def _stream_raw(self, chunks: list[bytes], *, finish: bool = True) -> None:
        encoder = _Encoder(self.owner.encoding)
        chunks = [encoder.encode(chunk) for chunk in chunks]
        if finish and (end := encoder.end()):
            chunks.append(end)
        with self.owner._lock:
            self.owner.sent.append(b"".join(chunks))
        self.send_response(200)
        if self.owner.encoding:
            self.send_header("content-encoding", self.owner.encoding)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", "req_loopback")
        self.end_headers()
        for chunk in chunks:
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with self.owner._lock:
                    self.owner.cut_streams += 1  # the client went away mid-stream
                self.close_connection = True
                return
            if self.owner.pause:
                time.sleep(self.owner.pause)
        if finish:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()


class _Encoder:
    """Compresses an answer piece by piece, each piece decodable as soon as it arrives (a flushed block)."""

    def __init__(self, encoding: str | None) -> None:
        self.encoding = encoding
        self.inner: Any = None
        if encoding in ("gzip", "deflate"):
            self.inner = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
        elif encoding == "br":
            self.inner = brotli.Compressor()
        elif encoding == "zstd":
            self.inner = ZstdCompressor()

    def encode(self, data: bytes) -> bytes:
        if self.encoding in ("gzip", "deflate"):
            return bytes(self.inner.compress(data) + self.inner.flush(zlib.Z_SYNC_FLUSH))
        if self.encoding == "br":
            return bytes(self.inner.process(data) + self.inner.flush())
        if self.encoding == "zstd":
            return bytes(self.inner.compress(data, ZstdCompressor.FLUSH_BLOCK))
        return data

    def end(self) -> bytes:
        if self.encoding in ("gzip", "deflate"):
            return bytes(self.inner.flush())
        if self.encoding == "br":
            return bytes(self.inner.finish())
        if self.encoding == "zstd":
            return bytes(self.inner.flush(ZstdCompressor.FLUSH_FRAME))
        return b""


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def iter_blocks(messages: list[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    """Every content block of type ``kind`` in a request's messages."""
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            yield from (b for b in content if b.get("type") == kind)


def check_wire_messages(messages: list[dict[str, Any]]) -> None:
    """Fail with a clear message unless ``messages`` is a request the Messages API accepts.

    Roles alternate and start (and end) with the user; every ``tool_use`` is answered
    by a ``tool_result`` with its id at the start of the very next message, and every
    ``tool_result`` answers a call in the message just before it.
    """
    assert messages, "no messages"
    assert messages[0]["role"] == "user", f"first message is {messages[0]['role']}"
    assert messages[-1]["role"] == "user", "the request ends with an assistant message"
    for i, message in enumerate(messages):
        assert message["role"] in ("user", "assistant"), message["role"]
        if i:
            assert message["role"] != messages[i - 1]["role"], f"two {message['role']} messages in a row at {i}"
        assert message["content"], f"message {i} is empty"
        calls = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        if results:
            previous = messages[i - 1] if i else {"content": []}
            asked = [b["id"] for b in previous["content"] if b["type"] == "tool_use"]
            assert sorted(results) == sorted(asked), f"message {i} answers {results}, the calls were {asked}"
            leading = [b.get("tool_use_id") for b in message["content"][: len(results)]]
            assert leading == results, f"message {i}: tool results must come first"
        if calls:
            assert i + 1 < len(messages), f"tool calls {calls} at {i} have no results"
            answered = [b.get("tool_use_id") for b in messages[i + 1]["content"] if b["type"] == "tool_result"]
            assert sorted(answered) == sorted(calls), f"calls {calls} at {i} answered by {answered}"
