"""``POST /v1/messages`` as the proxy serves it (bare ASGI, not through Starlette's routing): the query,
headers and body go upstream as sent, the answer comes back with every header, and an unreachable upstream
is a 502 in the API's error shape."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterable
from pathlib import Path

import h11
import httpcore2
import httpx2
import orjson
import pytest
from proxy_support import request

from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyApp
from workbench.proxy.upstream import environment_proxy

ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
          "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
          "usage": {"input_tokens": 10, "output_tokens": 2}}


class Upstream(httpcore2.AsyncMockBackend):
    """The Messages API as the proxy's connection pool meets it: answers ``answer``, keeps what it was sent."""

    def __init__(self, answer: bytes) -> None:
        super().__init__([answer])
        self.answer = answer
        self.sent = bytearray()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[object] | None = None) -> httpcore2.AsyncNetworkStream:
        sent = self.sent

        class Stream(httpcore2.AsyncMockStream):
            async def write(self, buffer: bytes, timeout: float | None = None) -> None:
                sent.extend(buffer)

        return Stream([self.answer])

    def request(self) -> tuple[h11.Request, bytes]:
        """What reached the upstream, read back with h11."""
        server = h11.Connection(h11.SERVER)
        server.receive_data(bytes(self.sent))
        head, body = server.next_event(), b""
        assert isinstance(head, h11.Request)
        while isinstance(event := server.next_event(), h11.Data):
            body += event.data
        return head, body


class Unreachable(httpcore2.AsyncMockBackend):
    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[object] | None = None) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("refused")


def answer(body: bytes, *headers: tuple[bytes, bytes]) -> bytes:
    lines = [b"HTTP/1.1 200 OK", *(name + b": " + value for name, value in headers), b"content-length: %d" % len(body)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def proxy_to(tmp_path: Path, upstream: httpcore2.AsyncMockBackend) -> tuple[ProxyApp, Recorder]:
    recorder = Recorder(tmp_path / "proxy.db", home=tmp_path)
    app = ProxyApp(recorder, "http://upstream.test")
    app.to_upstream.pool = httpcore2.AsyncConnectionPool(network_backend=upstream)
    return app, recorder


def post(app: ProxyApp, body: bytes) -> httpx2.Response:
    async def call() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://proxy.test") as client:
            return await client.post("/v1/messages?beta=true", content=body, headers={
                "x-api-key": "sk-test", "anthropic-beta": "b1", "content-type": "application/json"})
    return asyncio.run(call())


def test_a_request_goes_upstream_as_sent_and_its_answer_comes_back_with_every_header(tmp_path: Path) -> None:
    upstream = Upstream(answer(orjson.dumps(ANSWER), (b"content-type", b"application/json"), (b"x-trace", b"a"),
                               (b"x-trace", b"b")))
    app, recorder = proxy_to(tmp_path, upstream)
    body = orjson.dumps(request([{"role": "user", "content": "hello"}]))
    response = post(app, body)
    recorder.close()
    head, sent = upstream.request()
    headers = dict(head.headers)
    assert head.method == b"POST" and head.target == b"/v1/messages?beta=true" and sent == body
    assert headers[b"host"] == b"upstream.test" and headers[b"content-length"] == b"%d" % len(body)
    assert headers[b"x-api-key"] == b"sk-test" and headers[b"anthropic-beta"] == b"b1"
    assert response.status_code == 200 and orjson.loads(response.content) == ANSWER
    assert response.headers.get_list("x-trace") == ["a", "b"]
    assert recorder.errors == []


def test_an_unreachable_upstream_is_a_502_in_the_apis_error_shape(tmp_path: Path) -> None:
    app, recorder = proxy_to(tmp_path, Unreachable([]))
    response = post(app, orjson.dumps(request([{"role": "user", "content": "hello"}])))
    recorder.close()
    assert response.status_code == 502
    assert response.json() == {"type": "error",
                               "error": {"type": "api_error", "message": "upstream unreachable: ConnectError"}}


def test_a_compressed_answer_reaches_the_client_as_sent_and_the_recorder_decoded(tmp_path: Path) -> None:
    compressed = gzip.compress(orjson.dumps(ANSWER))
    upstream = Upstream(answer(compressed, (b"content-type", b"application/json"), (b"content-encoding", b"gzip")))
    app, recorder = proxy_to(tmp_path, upstream)
    response = post(app, orjson.dumps(request([{"role": "user", "content": "hello"}])))
    recorder.close()
    assert response.headers["content-encoding"] == "gzip" and orjson.loads(response.content) == ANSWER
    assert recorder.errors == []


def test_only_the_agents_headers_go_upstream_with_what_http_requires_and_the_hop_mark(tmp_path: Path) -> None:
    upstream = Upstream(answer(orjson.dumps(ANSWER), (b"content-type", b"application/json")))
    app, recorder = proxy_to(tmp_path, upstream)

    async def send() -> None:
        response = await app.to_upstream.send(b"POST", "/v1/messages", [(b"user-agent", b"agent/1")], b"{}")
        await response.aclose()

    asyncio.run(send())
    recorder.close()
    head, _ = upstream.request()
    assert sorted(name for name, _ in head.headers) == [b"content-length", b"host", b"user-agent",
                                                        b"x-workbench-proxy-hop"]
    assert dict(head.headers)[b"user-agent"] == b"agent/1"


@pytest.mark.parametrize(("env", "expected"), [
    ({"HTTPS_PROXY": "http://corp:3128"}, (b"corp", 3128)),
    ({"HTTPS_PROXY": "corp:3128"}, (b"corp", 3128)),
    ({"ALL_PROXY": "http://all:1080"}, (b"all", 1080)),
    ({"HTTPS_PROXY": "http://corp:3128", "NO_PROXY": "anthropic.com"}, None),
    ({"HTTP_PROXY": "http://plain:8080"}, None),  # for http:// only; the API is https
    ({}, None),
])
def test_the_upstream_is_reached_through_the_proxy_the_environment_names(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: tuple[bytes, int] | None) -> None:
    """A user behind a corporate proxy reaches the API through it, as the SDK would; NO_PROXY is honoured."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    found = environment_proxy(httpx2.URL("https://api.anthropic.com"))
    assert (None if found is None else (found.url.host, found.url.port)) == expected
