"""The proxy itself: an ASGI app served by uvicorn, forwarding to the Messages API through httpcore2's pool.

``POST /v1/messages`` is read (and steered); every other path goes upstream untouched. Answers are
forwarded chunk by chunk, byte for byte as they arrive (compressed ones too), while a :class:`ResponseTee`
reads its own decoded copy. Headers pass as they came, keys included, except the hop-by-hop ones; nothing
is added but what HTTP requires and the hop mark that stops a loop; no key is stored, logged or shown. A
client that goes away closes the upstream request with it; one that goes away mid-body sends nothing upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import sqlite3
import threading
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from urllib.parse import quote, urlsplit

import httpcore2
import httpx2
import orjson
import uvicorn
from starlette.types import Receive, Scope, Send

from workbench.engine.errors import WorkbenchError
from workbench.proxy.asgi import ClientGone, disconnected, read_body
from workbench.proxy.exact import ExactCounter
from workbench.proxy.exchange import Exchange
from workbench.proxy.openai.route import DEFAULT_OPENAI_UPSTREAM, OpenAIRoute
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import ResponseTee
from workbench.proxy.upstream import HOP, UPSTREAM_ERRORS, Headers, Upstream, header

DEFAULT_PORT = 8788
DEFAULT_UPSTREAM = "https://api.anthropic.com"
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length",
})
CREDENTIAL_HEADERS = frozenset({"x-api-key", "authorization", "anthropic-version", "anthropic-beta"})
"""What a count_tokens call of ``--exact`` carries from the client's request (held only for that call)."""
RAW_HOP_BY_HOP = frozenset(name.encode() for name in HOP_BY_HOP)
STORE_AFTER = 0.05
"""Seconds after a request went upstream that it is stored if its answer has not begun by then: the writer
thread storing it held the interpreter while a fast answer's first byte waited; a slow answer leaves the
time free, and the workbench still shows the request at once."""
DRAIN_FOR = 10
"""Seconds a stopping proxy lets the answers under way finish."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
CUT_BY_UPSTREAM = "cut by the upstream"
ABANDONED = "abandoned by the client"
UNFINISHED = "ASGI callable returned without completing response."
"""What uvicorn logs when an answer ends early on purpose (the upstream cut it): the connection closes, so
the client sees the cut too, and the log line says nothing the request's record does not."""


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


def is_itself(upstream: str, host: str, port: int) -> bool:
    """Whether ``upstream`` is the proxy listening on ``host``:``port``: the same host and port, or an address
    of this machine (loopback, or any when listening on all of them) on its port."""
    parts = urlsplit(upstream)
    if (parts.port or (443 if parts.scheme == "https" else 80)) != port:
        return False
    name = parts.hostname or ""
    if name == host or name == "localhost":
        return True
    try:
        addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in socket.getaddrinfo(name, port)}
    except (OSError, ValueError):
        return False
    listening = ipaddress.ip_address(host) if host != "localhost" else ipaddress.ip_address("127.0.0.1")
    return any(a.is_loopback or a == listening or listening.is_unspecified for a in addresses)


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of a header (names as ASGI gives them, lower case)."""
    return next((value for key, value in headers if key == name), None)


def _keys(headers: list[tuple[str, str]]) -> tuple[str, ...]:
    """The client's credentials, to redact them from what the proxy stores (they are never stored)."""
    bearer = _header(headers, "authorization") or ""
    return tuple(v for v in (_header(headers, "x-api-key"), bearer.removeprefix("Bearer ").strip()) if v)


def _target(scope: Scope) -> str:
    """The path and query as the client wrote them (its percent-escapes kept); always a path on the upstream."""
    raw: bytes = scope.get("raw_path") or b""
    path = raw.decode("latin-1") if raw.startswith(b"/") else quote(scope["path"], safe="/%:@!$&'()*+,;=~")
    query: bytes = scope["query_string"]
    return path + ("?" + query.decode("latin-1") if query else "")


def _error(status: int, kind: str, message: str) -> tuple[int, bytes]:
    return status, orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


async def _answer(send: Send, status: int, body: bytes, *extra: tuple[bytes, bytes]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), *extra]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Ended(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != UNFINISHED


ENDED = _Ended()


class ProxyApp:
    """The ASGI application and what it shares between requests."""

    def __init__(self, recorder: Recorder, upstream: str, exact: ExactCounter | None = None,
                 openai_upstream: str = DEFAULT_OPENAI_UPSTREAM) -> None:
        self.recorder = recorder
        self.upstream = check_upstream(upstream)
        self.exact = exact
        self.mark = uuid.uuid4().hex[:16].encode()
        """This proxy's hop mark: a request that arrives with it went round in a loop."""
        self.in_flight = 0
        """Requests whose answers are not through yet."""
        self._counting: set[asyncio.Task[None]] = set()
        tls = httpx2.create_ssl_context()
        timeout = httpx2.Timeout(600.0, connect=30.0)
        self.client = httpx2.AsyncClient(timeout=timeout, verify=tls)
        """The proxy's own requests (``--exact``'s count_tokens), not the clients'."""
        self.to_upstream = Upstream(self.upstream, tls, timeout, self.mark)
        self.openai = OpenAIRoute(recorder, check_upstream(openai_upstream), tls, timeout, self.mark)

    async def aclose(self) -> None:
        await self.to_upstream.aclose()
        await self.openai.aclose()
        await self.client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Bare ASGI: Starlette's middleware, request and streaming response took about 1 ms of every request's
        way to its first byte."""
        if scope["type"] != "http":
            return
        self.in_flight += 1
        try:
            await self._serve(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw: Headers = scope["headers"]
        if self.mark in (part.strip() for part in header(raw, HOP).split(b",")):
            # The API's own SDKs retry a 5xx unless told not to: a loop answers the same every time.
            await _answer(send, *_error(508, "invalid_request_error", "request loop: this request came back to the "
                                        "workbench proxy that forwarded it; its upstream leads back to itself"),
                          (b"x-should-retry", b"false"))
            return
        kind = self.openai.serves(scope)
        if kind is not None:  # the OpenAI APIs (Codex CLI, Aider, OpenCode) to their own upstream
            await self.openai(kind, scope, receive, send)
            return
        try:
            body = await read_body(receive)
        except ClientGone:  # a cut body is not a request: nothing goes upstream
            return
        exchange = None
        if scope["method"] == "POST" and scope["path"] == "/v1/messages":
            headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
            exchange = self.recorder.prepare(body, _header(headers, "anthropic-beta"), _keys(headers))
            asyncio.get_running_loop().call_later(STORE_AFTER, self.recorder.store_request, exchange)
            body = exchange.body
        forwarded = [(name, value) for name, value in raw if name.lower() not in RAW_HOP_BY_HOP]
        try:
            response = await self.to_upstream.send(scope["method"].encode(), _target(scope), forwarded, body)
        except UPSTREAM_ERRORS as exc:
            if exchange is not None:
                exchange.outcome = f"upstream unreachable: {type(exc).__name__}"
                self.recorder.finish(exchange, 502, None)
            await _answer(send, *_error(502, "api_error", f"upstream unreachable: {type(exc).__name__}"))
            return
        await self._relay(response, receive, send, exchange, raw)

    async def _relay(self, response: httpcore2.Response, receive: Receive, send: Send, exchange: Exchange | None,
                     request_headers: Headers) -> None:
        """The answer to the client as it arrives, read on the way when it answers ``/v1/messages``."""
        status = response.status
        tee = ResponseTee(b"text/event-stream" in header(response.headers, b"content-type"),
                          header(response.headers, b"content-encoding").decode("latin-1")) \
            if exchange is not None else None
        task = asyncio.current_task()
        assert task is not None
        streaming, outcome = True, None

        def client_gone(_: object) -> None:
            if streaming:
                task.cancel()

        gone = asyncio.ensure_future(disconnected(receive))
        gone.add_done_callback(client_gone)
        try:
            await send({"type": "http.response.start", "status": status,
                        "headers": [(name, value) for name, value in response.headers
                                    if name.lower() not in RAW_HOP_BY_HOP]})
            async for chunk in Upstream.chunks(response):
                if tee is not None and exchange is not None:
                    tee.feed(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    self.recorder.store_request(exchange)  # the first byte is through
                else:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except UPSTREAM_ERRORS:
            outcome = CUT_BY_UPSTREAM  # returning unfinished closes the client's connection: it sees the cut
        except asyncio.CancelledError:
            if not gone.done() or gone.cancelled():
                outcome = "stopped with the proxy"
                raise
            task.uncancel()  # the client went away: the upstream request is closed with it
            outcome = ABANDONED
        finally:
            streaming = False
            gone.cancel()
            await response.aclose()
            if tee is not None and exchange is not None:
                self._finish(exchange, status, tee, outcome, request_headers)

    def _finish(self, exchange: Exchange, status: int, tee: ResponseTee, outcome: str | None,
                request_headers: Headers) -> None:
        answer = tee.answer(status)
        if outcome is None and answer.error and status < 400:
            outcome = answer.unreadable or f"stream error: {answer.error}"
        elif outcome is None and status < 400 and tee.streaming and not answer.complete:
            outcome = "stream ended before message_stop"
        exchange.outcome = outcome
        self.recorder.finish(exchange, status, answer)
        if status < 400 and outcome is None:
            self._count_exactly(exchange, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request_headers])

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


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, leaving signals to the proxy: uvicorn's own handlers raised the signal again once it
    had stopped, so SIGTERM killed the process before what was queued was stored."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


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
                                date_header=False, timeout_graceful_shutdown=DRAIN_FOR)
        self.server = _Uvicorn(config)
        logging.getLogger("uvicorn.error").addFilter(ENDED)
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
        if is_itself(self.proxy.upstream, settings.host, self.port):
            self.socket.close()
            raise WorkbenchError(f"the upstream {self.proxy.upstream} is this proxy itself: point --upstream (or "
                                 "ANTHROPIC_BASE_URL in this shell) at the API")

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

    async def _serve(self, ready: Callable[[], None] | None) -> None:
        serving = asyncio.ensure_future(self.server.serve(sockets=[self.socket]))
        try:
            while not self.server.started and not serving.done():
                await asyncio.sleep(0.005)
            if self.server.started and ready is not None:
                ready()  # the port listens from here on: uvicorn has it accepting
            await serving
        finally:
            await self.proxy.aclose()

    def serve(self, ready: Callable[[], None] | None = None) -> None:
        """Serve in this thread until :meth:`stop` (or a signal through :func:`stopping`); ``ready`` is called once
        the port accepts connections."""
        asyncio.run(self._serve(ready))

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
            self._thread.join(timeout=DRAIN_FOR + 2)
        self.recorder.flush()


@contextlib.contextmanager
def stopping(server: ProxyServer, at_once: Callable[[], None]) -> Generator[None, None, None]:
    """SIGTERM, SIGHUP and SIGINT stop the proxy gently: no new connections, the answers under way finish (for
    up to :data:`DRAIN_FOR` seconds) and the caller stores what is queued; a second signal calls ``at_once``."""
    def stop(signum: int, frame: FrameType | None) -> None:
        if server.server.should_exit:
            at_once()
        server.server.should_exit = True

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def checkpoint(db_path: Path) -> str | None:
    """Fold the write-ahead log into the database and empty it, so nothing is left beside the database; says why
    not when it could not (everything is in the database all the same: the log is read on the next open)."""
    try:
        connection = sqlite3.connect(db_path, timeout=5.0)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return f"the write-ahead log beside {db_path} was not emptied: {exc}"
    return None
