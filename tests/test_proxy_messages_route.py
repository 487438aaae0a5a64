"""``POST /v1/messages`` as the proxy serves it (bare ASGI, not through Starlette's routing): the query,
headers and body go upstream as sent, the answer comes back with every header, and an unreachable upstream
is a 502 in the API's error shape."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2
import orjson
from proxy_support import request

from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyApp

ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
          "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
          "usage": {"input_tokens": 10, "output_tokens": 2}}


def post(app: ProxyApp, body: bytes) -> httpx2.Response:
    async def call() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://proxy.test") as client:
            return await client.post("/v1/messages?beta=true", content=body, headers={
                "x-api-key": "sk-test", "anthropic-beta": "b1", "content-type": "application/json"})
    return asyncio.run(call())


def test_a_request_goes_upstream_as_sent_and_its_answer_comes_back_with_every_header(tmp_path: Path) -> None:
    seen: list[httpx2.Request] = []

    def upstream(sent: httpx2.Request) -> httpx2.Response:
        seen.append(sent)
        return httpx2.Response(200, headers=[("content-type", "application/json"), ("x-trace", "a"), ("x-trace", "b")],
                               content=orjson.dumps(ANSWER))

    recorder = Recorder(tmp_path / "proxy.db", home=tmp_path)
    app = ProxyApp(recorder, "http://upstream.test")
    app.client = httpx2.AsyncClient(transport=httpx2.MockTransport(upstream))
    body = orjson.dumps(request([{"role": "user", "content": "hello"}]))
    response = post(app, body)
    recorder.close()
    [sent] = seen
    assert str(sent.url) == "http://upstream.test/v1/messages?beta=true" and sent.content == body
    assert sent.headers["x-api-key"] == "sk-test" and sent.headers["anthropic-beta"] == "b1"
    assert response.status_code == 200 and orjson.loads(response.content) == ANSWER
    assert response.headers.get_list("x-trace") == ["a", "b"]
    assert recorder.errors == []


def test_an_unreachable_upstream_is_a_502_in_the_apis_error_shape(tmp_path: Path) -> None:
    def upstream(sent: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=sent)

    recorder = Recorder(tmp_path / "proxy.db", home=tmp_path)
    app = ProxyApp(recorder, "http://upstream.test")
    app.client = httpx2.AsyncClient(transport=httpx2.MockTransport(upstream))
    response = post(app, orjson.dumps(request([{"role": "user", "content": "hello"}])))
    recorder.close()
    assert response.status_code == 502
    assert response.json() == {"type": "error",
                               "error": {"type": "api_error", "message": "upstream unreachable: ConnectError"}}
