"""The way upstream: httpcore2's connection pool, without httpx2's client.

httpx2's client builds a request model (URL parsing, headers normalised three times), runs its auth,
redirect and cookie steps, and wraps the answer in a response model with a decoder chain: about 0.5 ms
of every request's way to its first byte. The proxy forwards bytes it already has, to one upstream it
knows at start-up, so the pool takes them as they are: the client's headers and no others (no
``user-agent`` or ``accept-encoding`` of our own), save what HTTP requires and the hop mark that stops a
loop. The answer's bytes come back as they were sent, compressed or not; the tee decodes its own copy.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import AsyncIterator

import httpcore2
import httpx2

UPSTREAM_ERRORS = (httpcore2.TimeoutException, httpcore2.NetworkError, httpcore2.ProtocolError,
                   httpcore2.ProxyError, httpcore2.UnsupportedProtocol)
"""What fails a request before its answer begins, or cuts it mid-way (httpcore2's errors have no common base)."""
HOP = b"x-workbench-proxy-hop"
"""The header each proxy adds with its own mark (after any earlier proxies' marks): a request that comes back
with this proxy's mark went round in a loop."""
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


class Upstream:
    """One connection pool to the upstream, shared by every request the proxy forwards."""

    def __init__(self, upstream: str, ssl_context: ssl.SSLContext, timeout: httpx2.Timeout, mark: bytes) -> None:
        url = httpx2.URL(upstream)
        self.base = upstream
        self.host = url.netloc
        self.mark = mark
        self.timeout = timeout.as_dict()
        self.pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context, proxy=environment_proxy(url), max_connections=100, max_keepalive_connections=20,
            keepalive_expiry=5.0)

    async def send(self, method: bytes, target: str, headers: Headers, body: bytes) -> httpcore2.Response:
        """Send ``body`` to ``target`` (path and query) with ``headers`` (hop-by-hop ones already dropped, the
        hop mark among them); returns once the answer's headers arrived, its body still to stream."""
        earlier = header(headers, HOP)
        headers = [*(h for h in headers if h[0].lower() != HOP), (b"Host", self.host),
                   (HOP, earlier + b"," + self.mark if earlier else self.mark)]
        if body or method not in (b"GET", b"HEAD", b"OPTIONS", b"DELETE"):
            headers.append((b"Content-Length", b"%d" % len(body)))
        return await self.pool.handle_async_request(httpcore2.Request(
            method, f"{self.base}{target}", headers=headers, content=body, extensions={"timeout": self.timeout}))

    @staticmethod
    def chunks(response: httpcore2.Response) -> AsyncIterator[bytes]:
        """The answer's body as it arrives, exactly as the upstream sent it."""
        return response.aiter_stream()

    async def aclose(self) -> None:
        await self.pool.aclose()
