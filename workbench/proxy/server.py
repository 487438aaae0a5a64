"""The proxy itself: a Starlette app served by uvicorn, forwarding to the Messages API with httpx2.

``POST /v1/messages`` is read (and steered); every other path goes upstream untouched. Responses are
forwarded chunk by chunk as they arrive while a :class:`ResponseTee` reads them. Headers pass as they
came, keys included, except the hop-by-hop ones; no key is stored, logged or shown. A client that goes
away mid-stream closes the upstream request with it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from workbench.engine.errors import WorkbenchError
from workbench.proxy.exact import ExactCounter
from workbench.proxy.exchange import Exchange
from workbench.proxy.openai.route import DEFAULT_OPENAI_UPSTREAM, OpenAIRoute
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import ResponseTee
from workbench.proxy.upstream import UPSTREAM_ERRORS, Upstream, header

DEFAULT_PORT = 8788
DEFAULT_UPSTREAM = "https://api.anthropic.com"
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length",
})
CREDENTIAL_HEADERS = frozenset({"x-api-key", "authorization", "anthropic-version", "anthropic-beta"})
"""What a count_tokens call of ``--exact`` carries from the client's request (held only for that call)."""
RESPONSE_DROPPED = HOP_BY_HOP | {"content-encoding"}
"""The upstream body reaches the client decoded (the tee must read it), so its encoding header goes."""
RAW_HOP_BY_HOP = frozenset(name.encode() for name in HOP_BY_HOP)
RAW_RESPONSE_DROPPED = frozenset(name.encode() for name in RESPONSE_DROPPED)
STORE_AFTER = 0.05
"""Seconds after a request went upstream that it is stored if its answer has not begun by then: the writer
thread storing it held the interpreter while a fast answer's first byte waited; a slow answer leaves the
time free, and the workbench still shows the request at once."""


def check_upstream(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WorkbenchError(f"upstream {url!r} is not an http(s) URL")
    return url.rstrip("/")


def check_listen(host: str, anywhere: bool) -> str:
    """Loopback only, unless the user says otherwise: the proxy forwards whatever key a client sends."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not anywhere:
        raise WorkbenchError(f"refusing to listen on {host}: only loopback addresses without --listen-anywhere")
    return host


def _forwarded(headers: Mapping[str, str], dropped: frozenset[str]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers.items() if name.lower() not in dropped]


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of a header (names as ASGI gives them, lower case)."""
    return next((value for key, value in headers if key == name), None)


def _keys(headers: list[tuple[str, str]]) -> tuple[str, ...]:
    """The client's credentials, to redact them from what the proxy stores (they are never stored)."""
    bearer = _header(headers, "authorization") or ""
    return tuple(v for v in (_header(headers, "x-api-key"), bearer.removeprefix("Bearer ").strip()) if v)


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away (or its response is complete)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class ProxyApp:
    """The ASGI application and what it shares between requests."""

    def __init__(self, recorder: Recorder, upstream: str, exact: ExactCounter | None = None,
                 openai_upstream: str = DEFAULT_OPENAI_UPSTREAM) -> None:
        self.recorder = recorder
        self.upstream = check_upstream(upstream)
        self.exact = exact
        self._counting: set[asyncio.Task[None]] = set()
        tls = httpx2.create_ssl_context()
        self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(600.0, connect=30.0), verify=tls)
        self.messages_upstream = Upstream(self.upstream, tls, self.client.headers, self.client.timeout)
        self.openai = OpenAIRoute(recorder, check_upstream(openai_upstream), tls, self.client.headers,
                                  self.client.timeout)
        self.app = Starlette(routes=[
            Route("/{path:path}", self.passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        ])

    async def aclose(self) -> None:
        await self.messages_upstream.aclose()
        await self.openai.aclose()
        await self.client.aclose()

    def _url(self, request: Request) -> str:
        query = request.url.query
        return f"{self.upstream}{request.url.path}" + (f"?{query}" if query else "")

    async def _send(self, request: Request, body: bytes) -> httpx2.Response:
        upstream = self.client.build_request(request.method, self._url(request), content=body,
                                             headers=_forwarded(request.headers, HOP_BY_HOP))
        return await self.client.send(upstream, stream=True)

    async def passthrough(self, request: Request) -> Response:
        response = await self._send(request, await request.body())
        return StreamingResponse(response.aiter_bytes(), status_code=response.status_code,
                                 headers=dict(_forwarded(response.headers, RESPONSE_DROPPED)),
                                 background=BackgroundTask(response.aclose))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /v1/messages`` is served here as bare ASGI: Starlette's middleware, request and streaming
        response took about 1 ms of every request's way to its first byte. Other paths go to Starlette."""
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/v1/messages":
            await self.messages(scope, receive, send)
        elif (openai := self.openai.serves(scope)) is not None:
            await self.openai(openai, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def messages(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        raw = await _body(receive)
        exchange = self.recorder.prepare(raw, _header(headers, "anthropic-beta"), _keys(headers))
        asyncio.get_running_loop().call_later(STORE_AFTER, self.recorder.store_request, exchange)
        query = scope["query_string"].decode("latin-1")
        forwarded = [(name, value) for name, value in scope["headers"] if name.lower() not in RAW_HOP_BY_HOP]
        try:
            response = await self.messages_upstream.send("/v1/messages" + (f"?{query}" if query else ""), forwarded,
                                                         exchange.body)
        except UPSTREAM_ERRORS as exc:
            self.recorder.finish(exchange, 502, None)
            error = ('{"type":"error","error":{"type":"api_error","message":"upstream unreachable: '
                     f'{type(exc).__name__}"}}}}')
            await Response(error, status_code=502, media_type="application/json")(scope, receive, send)
            return
        status = response.status
        tee = ResponseTee(b"text/event-stream" in header(response.headers, b"content-type"))
        task = asyncio.current_task()
        assert task is not None
        streaming = True

        def client_gone(_: object) -> None:
            if streaming:
                task.cancel()

        gone = asyncio.ensure_future(_disconnected(receive))
        gone.add_done_callback(client_gone)
        try:
            await send({"type": "http.response.start", "status": status,
                        "headers": [(name, value) for name, value in response.headers
                                    if name.lower() not in RAW_RESPONSE_DROPPED]})
            async for chunk in Upstream.chunks(response):
                tee.feed(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self.recorder.store_request(exchange)  # the first byte is through
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone.done() or gone.cancelled():
                raise
            task.uncancel()  # the client went away: the upstream request is closed with it
        finally:
            streaming = False
            gone.cancel()
            await response.aclose()
            self.recorder.finish(exchange, status, tee.answer(status))
            if status < 400:
                self._count_exactly(exchange, headers)

    def _count_exactly(self, exchange: Exchange, request_headers: list[tuple[str, str]]) -> None:
        """With ``--exact``: ask count_tokens for this session's components, in the background."""
        placement, body = exchange.placement, exchange.parsed
        if self.exact is None or placement is None or body is None or not self.exact.due(placement.thread.session_id):
            return
        headers = [(k, v) for k, v in request_headers if k.lower() in CREDENTIAL_HEADERS]
        exact = self.exact

        async def count() -> None:
            try:
                counts = await exact.count(self.client, body, headers)
            except (httpx2.HTTPError, KeyError, ValueError) as exc:
                self.recorder.errors.append(f"count_tokens failed: {type(exc).__name__}: {exc}")
                return
            self.recorder.set_exact(exchange, counts)

        task = asyncio.ensure_future(count())
        self._counting.add(task)
        task.add_done_callback(self._counting.discard)


@dataclass
class ProxySettings:
    db_path: Path
    upstream: str = DEFAULT_UPSTREAM
    openai_upstream: str = DEFAULT_OPENAI_UPSTREAM
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    listen_anywhere: bool = False
    exact: bool = False
    """Ask count_tokens for exact component counts (with the client's key, rate-limited)."""


class ProxyServer:
    """The proxy on a uvicorn server, in this thread (:meth:`serve`) or a background one (:meth:`start`)."""

    def __init__(self, settings: ProxySettings, recorder: Recorder) -> None:
        check_listen(settings.host, settings.listen_anywhere)
        self.settings = settings
        self.recorder = recorder
        exact = ExactCounter(check_upstream(settings.upstream)) if settings.exact else None
        self.proxy = ProxyApp(recorder, settings.upstream, exact, settings.openai_upstream)
        recorder.upstream = self.proxy.upstream
        config = uvicorn.Config(self.proxy, interface="asgi3", host=settings.host, port=settings.port,
                                log_level="warning", access_log=False, lifespan="off", server_header=False,
                                date_header=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self.socket = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit it: a streamed event leaves at once instead of waiting for an ACK.
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socket.bind((settings.host, settings.port))
        except OSError as exc:
            self.socket.close()
            raise WorkbenchError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}") from exc

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

    async def _serve(self) -> None:
        try:
            await self.server.serve(sockets=[self.socket])
        finally:
            await self.proxy.aclose()

    def serve(self) -> None:
        """Serve until interrupted (Ctrl-C), in this thread."""
        asyncio.run(self._serve())

    def start(self, timeout: float = 10.0) -> ProxyServer:
        """Serve from a background thread; returns once the port is open."""
        self._thread = threading.Thread(target=self.serve, name="workbench-proxy", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self.server.started:
            if not self._thread.is_alive():
                raise WorkbenchError(f"the proxy could not listen on {self.settings.host}:{self.settings.port}")
            threading.Event().wait(0.02)
            waited += 0.02
            if waited > timeout:
                raise WorkbenchError("the proxy did not start in time")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.recorder.flush()
