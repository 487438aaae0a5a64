"""The OpenAI side of the proxy: ``POST /v1/responses`` and ``POST /v1/chat/completions``, read and recorded.

Codex CLI, Aider and OpenCode point their OpenAI base URL (``…/v1``) at the proxy; their requests go to the
OpenAI upstream (``--openai-upstream``) as they came, byte for byte, unless the user steered the session, and
the answers back chunk by chunk as they arrive while an :class:`OpenAITee` reads them. The recorder places and
steers each request through its reading as a Messages API request (``openai_requests``), so it is stored,
attributed and shown like a Claude Code request; a steered request goes as the client's own with the changed
blocks written back (``openai_wire``). Other OpenAI paths (``/v1/models``…) pass through to the same upstream unread. As on the
Messages route: headers pass as they came, keys included, except the hop-by-hop ones; the key is redacted from
what is stored; a failure to read or record forwards the request unchanged (fail open); a client that goes
away closes the upstream request.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any, Literal
from urllib.parse import urlsplit

import httpcore2
import httpx2
import orjson
from starlette.types import Receive, Scope, Send

from workbench.engine.transcript.openai_requests import Api, Origins, as_messages_request
from workbench.engine.transcript.openai_wire import reshaped, rewritten
from workbench.proxy.asgi import ClientGone, disconnected, read_body
from workbench.proxy.exchange import Exchange
from workbench.proxy.openai.answer import OpenAITee
from workbench.proxy.recorder import Recorder
from workbench.proxy.upstream import UPSTREAM_ERRORS, Headers, Upstream, header

DEFAULT_OPENAI_UPSTREAM = "https://api.openai.com/v1"
ROUTES: dict[str, Api] = {"/responses": "responses", "/chat/completions": "chat"}
"""What the proxy reads, by path below the base URL (``/v1`` or none)."""
OTHER_PATHS = ("/models", "/embeddings", "/completions", "/files", "/uploads", "/batches", "/moderations",
               "/images", "/audio", "/conversations", "/realtime")
"""OpenAI paths passed through unread to the OpenAI upstream (the Messages API has ``/v1/models`` too: a
request to it carrying ``anthropic-version`` stays on the Anthropic side)."""
STORE_AFTER = 0.05
"""As on the Messages route: stored this long after going upstream if its answer has not begun by then."""
RAW_DROPPED = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                         b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"host", b"content-length"})
"""Hop-by-hop headers, which a proxy never forwards (the Messages route's list)."""
RAW_RESPONSE_DROPPED = RAW_DROPPED | {b"content-encoding"}
"""The answer reaches the client decoded (the tee must read it), so its encoding header goes."""
Kind = Literal["responses", "chat", "other"]


def _secrets(headers: Headers) -> tuple[str, ...]:
    """The client's key, to redact it wherever it appears in what is stored (it is never stored)."""
    bearer = header(headers, b"authorization").decode("latin-1").removeprefix("Bearer ").strip()
    return (bearer,) if bearer else ()


UNSTEERABLE = "steering forwarded unapplied: an edit of thinking has no place in an OpenAI request"


def _steered(api: Api, body: Any, origins: Origins, exchange: Exchange) -> dict[str, Any] | None:
    """The client's request as the steering of its reading makes it (None: it cannot be made)."""
    assert exchange.steered is not None
    sent = exchange.steered["messages"]
    if exchange.sent_ids is None:
        return rewritten(api, body, origins, sent, exchange.changed)
    if exchange.placement is None or exchange.parsed is None:
        return None
    return reshaped(api, body, origins, exchange.parsed["messages"], exchange.placement.ids, sent, exchange.sent_ids,
                    exchange.changed)


def prepare(recorder: Recorder, api: Api, raw: bytes, headers: Headers) -> Exchange:
    """The request placed, steered and recorded through its Messages API reading; what goes upstream is the
    client's bytes, or (steered) its request with the changed blocks written back in its own shape."""
    named = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}
    warning = None
    body: Any = None
    origins: Origins = []
    try:
        body = orjson.loads(raw)
        reading = as_messages_request(api, body, named, origins) if isinstance(body, dict) else None
    except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
        reading, warning = None, f"request forwarded unread: {type(exc).__name__}: {exc}"
    exchange = recorder.prepare(orjson.dumps(reading), None, _secrets(headers))
    wire = None
    if exchange.edited and exchange.steered is not None:
        wire = _steered(api, body, origins, exchange)
        warning = warning or (UNSTEERABLE if wire is None else None)
    if wire is not None:
        exchange.body = orjson.dumps(wire)
    else:  # what was stored as sent must be what was sent: the client's request
        exchange.body, exchange.steered, exchange.sent_ids, exchange.edited = raw, None, None, False
        exchange.changed = set()
    if warning is not None:
        exchange.warning = warning
        recorder.errors.append(warning)
    return exchange


class OpenAIRoute:
    """The OpenAI upstream and what the proxy does with requests for it."""

    def __init__(self, recorder: Recorder, upstream: str, tls: ssl.SSLContext, timeout: httpx2.Timeout,
                 mark: bytes) -> None:
        """``mark``: the proxy's hop mark, which every forwarded request carries (see ``upstream.HOP``)."""
        self.recorder = recorder
        self.base = upstream.rstrip("/")
        self.upstream = Upstream(self.base, tls, timeout, mark)
        self.prefix = urlsplit(self.base).path.rstrip("/")
        """The upstream's own path (``/v1``), which the clients' base URL on the proxy also ends in."""

    async def aclose(self) -> None:
        await self.upstream.aclose()

    @staticmethod
    def _below(path: str) -> str:
        return path.removeprefix("/v1") if path.startswith("/v1/") else path

    def serves(self, scope: Scope) -> Kind | None:
        """What this route does with a request: read it, pass it through, or nothing (not OpenAI's)."""
        if scope["type"] != "http":
            return None
        path = self._below(scope["path"])
        api = ROUTES.get(path)
        if api is not None and scope["method"] == "POST":
            return api
        if path in ROUTES or path.startswith(OTHER_PATHS):
            anthropic = any(name.lower() in (b"anthropic-version", b"x-api-key") for name, _ in scope["headers"])
            return None if anthropic else "other"
        return None

    def _target(self, scope: Scope) -> str:
        query = scope["query_string"].decode("latin-1")
        return self._below(scope["path"]) + (f"?{query}" if query else "")

    async def __call__(self, kind: Kind, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            raw = await read_body(receive)
        except ClientGone:  # a cut body is not a request: nothing goes upstream
            return
        headers: Headers = list(scope["headers"])
        forwarded = [(name, value) for name, value in headers if name.lower() not in RAW_DROPPED]
        if kind == "other":
            await self._relay(scope, receive, send, forwarded, raw, None)
            return
        exchange = prepare(self.recorder, kind, raw, headers)
        asyncio.get_running_loop().call_later(STORE_AFTER, self.recorder.store_request, exchange)
        await self._relay(scope, receive, send, forwarded, exchange.body, (kind, exchange))

    async def _send(self, method: bytes, target: str, headers: Headers, body: bytes) -> httpcore2.Response:
        return await self.upstream.send(method, target, headers, body)

    async def _relay(self, scope: Scope, receive: Receive, send: Send, headers: Headers, body: bytes,
                     read: tuple[Api, Exchange] | None) -> None:
        """Forward the request and stream the answer back, read by a tee when ``read`` names the exchange."""
        try:
            response = await self._send(scope["method"].encode(), self._target(scope), headers, body)
        except UPSTREAM_ERRORS as exc:
            if read is not None:
                self.recorder.finish(read[1], 502, None)
            error = orjson.dumps({"error": {"message": f"upstream unreachable: {type(exc).__name__}",
                                            "type": "upstream_error", "param": None, "code": "upstream_unreachable"}})
            await send({"type": "http.response.start", "status": 502,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", b"%d" % len(error))]})
            await send({"type": "http.response.body", "body": error, "more_body": False})
            return
        status = response.status
        streaming = b"text/event-stream" in header(response.headers, b"content-type")
        tee = OpenAITee(read[0], streaming) if read is not None else None
        try:
            await self._stream(receive, send, response, tee, read[1] if read else None)
        finally:
            await response.aclose()
            if read is not None and tee is not None:
                self.recorder.finish(read[1], status, tee.answer(status))

    async def _stream(self, receive: Receive, send: Send, response: httpcore2.Response, tee: OpenAITee | None,
                      exchange: Exchange | None) -> None:
        task = asyncio.current_task()
        assert task is not None
        streaming = True

        def client_gone(_: object) -> None:
            if streaming:
                task.cancel()

        gone = asyncio.ensure_future(disconnected(receive))
        gone.add_done_callback(client_gone)
        try:
            await send({"type": "http.response.start", "status": response.status,
                        "headers": [(name, value) for name, value in response.headers
                                    if name.lower() not in RAW_RESPONSE_DROPPED]})
            chunks: AsyncIterator[bytes] = Upstream.chunks(response)
            async for chunk in chunks:
                if tee is not None:
                    tee.feed(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if exchange is not None:
                    self.recorder.store_request(exchange)  # the first byte is through
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone.done() or gone.cancelled():
                raise
            task.uncancel()  # the client went away: the upstream request is closed with it
        finally:
            streaming = False
            gone.cancel()
