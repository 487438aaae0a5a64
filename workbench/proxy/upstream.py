"""The way to the Messages API for ``POST /v1/messages``: httpcore2's connection pool, without httpx2's client.

httpx2's client builds a request model (URL parsing, headers normalised three times), runs its auth,
redirect and cookie steps, and wraps the answer in a response model with a decoder chain: about 0.5 ms
of every request's way to its first byte. The proxy forwards bytes it already has, to one upstream it
knows at start-up, so the pool takes them as they are. What the client added is kept: its default
headers where the agent sent none, its TLS and proxy settings from the environment, and decoding of a
compressed answer (the tee must read it).
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import AsyncIterator

import httpcore2
import httpx2

UPSTREAM_ERRORS = (httpcore2.TimeoutException, httpcore2.NetworkError, httpcore2.ProtocolError,
                   httpcore2.ProxyError, httpcore2.UnsupportedProtocol)
"""What fails a request before its answer begins (httpcore2's errors have no common base)."""
Headers = list[tuple[bytes, bytes]]


def header(headers: Headers, name: bytes, default: bytes = b"") -> bytes:
    """The first value of header ``name`` (lower case), whatever case the sender wrote it in."""
    return next((value for key, value in headers if key.lower() == name), default)


def environment_proxy(url: httpx2.URL) -> httpcore2.Proxy | None:
    """The proxy the environment names for the upstream (``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), as
    httpx2's client would use it."""
    proxies = urllib.request.getproxies()
    found = proxies.get(url.scheme) or proxies.get("all")
    if not found or urllib.request.proxy_bypass(url.host):
        return None
    return httpcore2.Proxy(found if "://" in found else f"http://{found}")


class _Body(httpx2.AsyncByteStream):
    """httpcore2's answer stream, for httpx2's decoders."""

    def __init__(self, response: httpcore2.Response) -> None:
        self.response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.aiter_stream():
            yield chunk


class Upstream:
    """One connection pool to the upstream, shared by every ``POST /v1/messages``."""

    def __init__(self, upstream: str, ssl_context: ssl.SSLContext, defaults: httpx2.Headers,
                 timeout: httpx2.Timeout) -> None:
        url = httpx2.URL(upstream)
        self.base = upstream
        self.host = url.netloc
        self.defaults = defaults.raw
        self.timeout = timeout.as_dict()
        self.pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context, proxy=environment_proxy(url), max_connections=100, max_keepalive_connections=20,
            keepalive_expiry=5.0)

    async def send(self, target: str, headers: Headers, body: bytes) -> httpcore2.Response:
        """``POST`` ``body`` to ``target`` (path and query) with ``headers`` (hop-by-hop ones already dropped);
        returns once the answer's headers arrived, its body still to stream."""
        sent = {name.lower() for name, _ in headers}
        headers = [*(h for h in self.defaults if h[0].lower() not in sent), *headers,
                   (b"Host", self.host), (b"Content-Length", b"%d" % len(body))]
        return await self.pool.handle_async_request(httpcore2.Request(
            b"POST", f"{self.base}{target}", headers=headers, content=body, extensions={"timeout": self.timeout}))

    @staticmethod
    def chunks(response: httpcore2.Response) -> AsyncIterator[bytes]:
        """The answer's body as it arrives, decoded when it came compressed."""
        encoding = header(response.headers, b"content-encoding", b"identity")
        if encoding.strip().lower() == b"identity":
            return response.aiter_stream()
        return httpx2.Response(response.status, headers=response.headers, stream=_Body(response)).aiter_bytes()

    async def aclose(self) -> None:
        await self.pool.aclose()
