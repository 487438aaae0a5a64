"""What a reverse proxy promises, with real parts: the proxy as a real server, the loopback Messages API
upstream (with its error, cut-stream, slow and encoding modes), the real ``anthropic`` SDK and raw httpx2.
No loops, every encoding, nothing added, and how each answer ended, recorded."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from helpers import run_cli
from loopback_api import Dropped, LoopbackAPI, Reply, StreamError, text
from proxy_support import proxied, request
from tui_fixtures import isolated_dirs  # noqa: F401 - autouse: the app reads no real config

from workbench.commands.proxy import _line
from workbench.engine.context.request_diff import session_requests
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.request_store import list_requests
from workbench.engine.transcript.store import Store
from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings

KEY = "sk-ant-api03-planted-key-0123456789abcdef"
CLAUDE_CODE_ACCEPTS = "gzip, deflate, br, zstd"
"""What Claude Code sends as ``accept-encoding``."""


def user(value: str) -> dict[str, Any]:
    return {"role": "user", "content": value}


def sdk(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def only_session(db: Path) -> str:
    with Store(db) as store:
        [session_id] = [s.id for s, _ in store.list_sessions() if s.source_format == "proxy"]
    return session_id


def raw_http(port: int, head: bytes, body: bytes = b"", *, close_early: bool = False) -> bytes:
    """One request written byte for byte (no client adds a header of its own), and the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head + body)
        if close_early:
            return b""
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
        return answer


# --- no loops ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "127.0.0.2"])
def test_a_proxy_whose_upstream_is_itself_refuses_to_start(tmp_path: Path, name: str) -> None:
    port = free_port()
    recorder = Recorder(tmp_path / "proxy.db", home=tmp_path)
    try:
        with pytest.raises(WorkbenchError, match="is this proxy itself"):
            ProxyServer(ProxySettings(db_path=tmp_path / "proxy.db", upstream=f"http://{name}:{port}", port=port),
                        recorder)
    finally:
        recorder.close()


def test_the_proxy_command_pointed_at_itself_says_so_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    done = run_cli(["--db", tmp_path / "proxy.db", "proxy", "--headless", "--port", port, "--upstream",
                    f"http://localhost:{port}/"], cwd=tmp_path, timeout=60)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is this proxy itself" in lines[0] and "Traceback" not in done.stderr


def test_a_request_that_comes_back_to_the_proxy_is_answered_at_once_and_never_forwarded_again(
        tmp_path: Path) -> None:
    """Two proxies, each the other's upstream: the request goes round once and comes back with a JSON error."""
    second_port = free_port()
    first_recorder, second_recorder = Recorder(tmp_path / "a.db", home=tmp_path), Recorder(tmp_path / "b.db",
                                                                                            home=tmp_path)
    first = ProxyServer(ProxySettings(db_path=tmp_path / "a.db", upstream=f"http://127.0.0.1:{second_port}", port=0),
                        first_recorder).start()
    second = ProxyServer(ProxySettings(db_path=tmp_path / "b.db", upstream=first.url, port=second_port),
                         second_recorder).start()
    try:
        with pytest.raises(anthropic.APIStatusError) as caught:
            sdk(first.url).messages.create(**request([user("hello")]))
        assert caught.value.status_code == 508
        assert isinstance(caught.value.body, dict) and "request loop" in str(caught.value.body)
        first.recorder.settle()
        second.recorder.settle()
        with Store(tmp_path / "a.db") as store:
            [row] = list_requests(store, only_session(tmp_path / "a.db"))
        assert row.status == 508, "the first proxy saw its request once, not a hundred times"
    finally:
        second.stop()
        first.stop()
        second_recorder.close()
        first_recorder.close()


# --- nothing added ---------------------------------------------------------------------------------


def test_upstream_gets_the_clients_headers_and_only_what_http_requires_beside_them(tmp_path: Path) -> None:
    body = orjson.dumps(request([user("hello")]))
    head = (b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: " + KEY.encode() +
            b"\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n" % len(body))
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("hi")]))
        answer = raw_http(p.server.port, head, body)
        p.settle()
        assert answer.startswith(b"HTTP/1.1 200")
        [sent] = p.api.message_requests
        assert sorted(sent.headers) == ["anthropic-version", "content-length", "content-type", "host", "x-api-key",
                                        "x-workbench-proxy-hop"]
        assert sent.headers["host"] == p.api.url.removeprefix("http://")


def test_an_unreachable_upstream_answers_every_path_with_the_same_json_502(tmp_path: Path) -> None:
    """Every path an Anthropic client asks for (its SDKs send ``anthropic-version``) gets the Messages API's
    error; an OpenAI client's gets the OpenAI API's, from its own upstream."""
    recorder = Recorder(tmp_path / "proxy.db", home=tmp_path)
    server = ProxyServer(ProxySettings(db_path=tmp_path / "proxy.db", upstream=f"http://127.0.0.1:{free_port()}",
                                       openai_upstream=f"http://127.0.0.1:{free_port()}/v1", port=0),
                         recorder).start()
    try:
        with httpx2.Client(base_url=server.url, timeout=10) as http:
            openai = http.get("/v1/models", headers={"authorization": "Bearer sk-test"})
        with httpx2.Client(base_url=server.url, timeout=10, headers={"anthropic-version": "2023-06-01"}) as http:
            answers = [
                http.get("/v1/models"),
                http.post("/v1/messages/count_tokens", json={"model": "m", "messages": [user("hi")]}),
                http.post("/v1/messages", json=request([user("hi")])),
                http.request("PATCH", "/v1/somewhere/new"),
            ]
        assert [a.status_code for a in answers] == [502] * 4
        assert {a.content for a in answers} == {(b'{"type":"error","error":{"type":"api_error","message":'
                                                b'"upstream unreachable: ConnectError"}}')}
        assert all(a.headers["content-type"] == "application/json" for a in answers)
        assert openai.status_code == 502 and openai.json()["error"]["code"] == "upstream_unreachable"
    finally:
        server.stop()
        recorder.close()


def test_a_non_ascii_header_on_a_passed_through_path_reaches_upstream(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        answer = raw_http(p.server.port, "GET /v1/models HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\n"
                          "x-note: café ✓\r\nconnection: close\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 200") and b"claude-opus-4-6" in answer
        [sent] = p.api.requests
        assert sent.headers["x-note"].encode("latin-1") == "café ✓".encode()


def test_an_answer_whose_model_is_not_a_string_still_finishes_its_request(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("odd model")], model=12345))  # type: ignore[arg-type]
        with httpx2.Client(timeout=10) as http:
            answer = http.post(f"{p.url}/v1/messages", json=request([user("hi")]), headers={"x-api-key": KEY})
        p.settle()
        assert answer.status_code == 200 and answer.json()["model"] == 12345
        with Store(p.db) as store:
            [row] = list_requests(store, only_session(p.db))
        assert row.status == 200 and p.server.recorder.errors == []


def test_a_body_the_client_cut_off_is_not_forwarded(tmp_path: Path) -> None:
    body = orjson.dumps(request([user("hello " * 200)]))
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("after")]))
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            raw_http(p.server.port, b"POST %s HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n" % (path.encode(), len(body)), body[:300], close_early=True)
        sdk(p.url).messages.create(**request([user("a whole one")]))
        p.settle()
        assert [r.body["messages"] for r in p.api.requests] == [[user("a whole one")]], \
            "only the whole request went upstream"


# --- every encoding --------------------------------------------------------------------------------

ENCODINGS = ["gzip", "deflate", "br", "zstd"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_compressed_answer_reaches_the_client_byte_for_byte_and_is_recorded_decoded(
        tmp_path: Path, encoding: str, stream: bool) -> None:
    with proxied(tmp_path) as p:
        p.api.encoding = encoding
        p.api.queue(Reply([text(f"compressed with {encoding}")], pieces=4))
        with httpx2.Client(timeout=10) as http, http.stream(
                "POST", f"{p.url}/v1/messages", json=request([user("hi")], stream=stream),
                headers={"x-api-key": KEY, "accept-encoding": CLAUDE_CODE_ACCEPTS}) as response:
            received = b"".join(response.iter_raw())
            assert response.headers["content-encoding"] == encoding
        p.settle()
        assert received == p.api.sent[-1], "the upstream's bytes, as they were"
        assert p.api.message_requests[0].headers["accept-encoding"] == CLAUDE_CODE_ACCEPTS
        with Store(p.db) as store:
            session_id = only_session(p.db)
            assert [m.text for m in store.load_messages(session_id)][-1] == f"compressed with {encoding}"
            [row] = list_requests(store, session_id)
        assert row.outcome is None and row.usage is not None


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_anthropic_sdk_reads_every_encoding_through_the_proxy(tmp_path: Path, encoding: str) -> None:
    with proxied(tmp_path) as p:
        p.api.encoding = encoding
        p.api.queue(Reply([text("plain answer")]), Reply([text("streamed answer")]))
        answer = sdk(p.url).messages.create(**request([user("hi")]))
        with sdk(p.url).messages.stream(**request([user("hi"), {"role": "assistant", "content": "plain answer"},
                                                   user("again")])) as stream:
            streamed = "".join(stream.text_stream)
        p.settle()
        assert answer.content[0].text == "plain answer" and streamed == "streamed answer"  # type: ignore[union-attr]
        assert p.server.recorder.errors == []


def test_an_encoding_the_proxy_cannot_read_is_forwarded_untouched_and_recorded_as_unreadable(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.encoding = "x-private"
        p.api.queue(Reply([text("only the client can read this")]))
        with httpx2.Client(timeout=10) as http, http.stream(
                "POST", f"{p.url}/v1/messages", json=request([user("hi")], stream=True),
                headers={"x-api-key": KEY, "accept-encoding": "x-private"}) as response:
            received = b"".join(response.iter_raw())
            assert response.headers["content-encoding"] == "x-private"
        p.settle()
        assert received == p.api.sent[-1] and b"only the" in received
        with Store(p.db) as store:
            [row] = list_requests(store, only_session(p.db))
        assert row.outcome == "unreadable: content-encoding 'x-private'"


# --- what happened, recorded -------------------------------------------------------------------------


def _stream_through(url: str) -> None:
    try:
        with sdk(url).messages.stream(**request([user("hi")])) as stream:
            "".join(stream.text_stream)
    except (anthropic.APIError, httpx2.HTTPError):
        pass  # the client sees the fault; the test is about what the proxy recorded


@pytest.mark.parametrize(("fault", "outcome"), [
    (StreamError(Reply([text("half an answer")])), "stream error: overloaded_error: Overloaded"),
    (Dropped(Reply([text("cut off in the middle")]), after_events=3), "cut by the upstream"),
    (Dropped(Reply([text("stops early")]), after_events=4, clean_eof=True), "stream ended before message_stop"),
], ids=["error-event", "cut", "stopped"])
def test_a_stream_that_failed_is_recorded_and_shown_as_it_ended(tmp_path: Path, fault: Any, outcome: str) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(fault)
        _stream_through(p.url)
        p.settle()
        assert_recorded(p.db, p.reports, outcome)


def test_a_stream_the_client_abandoned_is_recorded_as_abandoned(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.pause = 0.05
        p.api.queue(Reply([text("word " * 60)]))
        with sdk(p.url).messages.stream(**request([user("hi")])) as stream:
            next(iter(stream.text_stream))
        deadline = time.monotonic() + 5
        while not p.reports and time.monotonic() < deadline:
            time.sleep(0.02)
        p.settle()
        assert_recorded(p.db, p.reports, "abandoned by the client")


def assert_recorded(db: Path, reports: list[Any], outcome: str) -> None:
    """The outcome in the store, in ``workbench requests`` (and its JSON), on the headless line, and in what the
    app's request list reads."""
    session_id = only_session(db)
    with Store(db) as store:
        [row] = list_requests(store, session_id)
        [facts] = session_requests(store, session_id)
    assert row.outcome == outcome and facts.outcome == outcome
    [exchange] = reports
    assert outcome in _line(exchange) and not _line(exchange).endswith(" · 200")
    listed = run_cli(["--db", db, "requests", session_id], cwd=db.parent, timeout=60)
    assert outcome in listed.stdout and "HTTP 200" not in listed.stdout, listed.stdout + listed.stderr
    as_json = run_cli(["--db", db, "requests", session_id, "--json"], cwd=db.parent, timeout=60)
    assert orjson.loads(as_json.stdout)[0]["outcome"] == outcome


def test_the_loopback_modes_are_real(tmp_path: Path) -> None:
    """The encoding mode compresses for real: a client that decodes nothing gets bytes that are not the JSON."""
    with LoopbackAPI() as api:
        api.encoding = "br"
        api.queue(Reply([text("hello")]))
        answer = raw_http(int(api.url.rsplit(":", 1)[1]), b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n"
                          b"content-length: 2\r\nconnection: close\r\n\r\n", b"{}")
        assert b"content-encoding: br" in answer.lower() and b'"hello"' not in answer
    assert sys.version_info >= (3, 11)


@pytest.mark.anyio
async def test_the_apps_request_list_shows_how_a_failed_stream_ended(tmp_path: Path) -> None:
    from textual.widgets import DataTable
    from tui_fixtures import SIZE, settle, until

    from workbench.tui.app import WorkbenchApp
    from workbench.tui.launch import Launch
    from workbench.tui.screens.requests import RequestsScreen

    with proxied(tmp_path) as p:
        p.api.queue(StreamError(Reply([text("half an answer")])))
        _stream_through(p.url)
        p.settle()
    app = WorkbenchApp(Launch.open(p.db, only_session(p.db)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RequestsScreen) and bool(app.screen.requests))
        table = app.screen.query_one("#requests-table", DataTable)
        assert str(table.get_row_at(0)[-1]) == "stream error: overloaded_error: Overloaded"
