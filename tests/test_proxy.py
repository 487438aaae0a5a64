"""The proxy with real parts: the anthropic SDK as the client, the proxy on a loopback port, and the
loopback Messages API upstream."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from loopback_api import Dropped, Malformed, Reply, StreamError, overloaded, rate_limited, server_error, text, tool_use
from proxy_support import SYSTEM, TOOLS, proxied, request

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.request_store import list_requests, request_body
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.subagent_links import find_subagents
from workbench.proxy.response import usage_of
from workbench.proxy.server import check_listen, check_upstream

KEY = "sk-ant-api03-planted-key-0123456789abcdef"


def client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)


def user(value: str) -> dict[str, Any]:
    return {"role": "user", "content": value}


def read_turns() -> list[dict[str, Any]]:
    """A conversation in which the agent read a file: user, tool call, tool result."""
    return [
        user("What does setup.py say?"),
        {"role": "assistant", "content": [tool_use("toolu_1", "Read", {"path": "setup.py"})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "from setuptools import setup\n" * 200}]},
    ]


def sessions(db: Path) -> list[str]:
    with Store(db) as store:
        return [s.id for s, _ in store.list_sessions() if s.source_format == "proxy"]


def test_unsteered_requests_reach_upstream_as_sent_and_the_answer_comes_back(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("It configures the package.")], input_tokens=900, output_tokens=12))
        body = request(read_turns())
        answer = client(p.url).messages.create(**body)
        p.settle()
        assert answer.content[0].text == "It configures the package."  # type: ignore[union-attr]
        assert p.api.bodies == [body]
        sent = p.api.message_requests[0].headers
        assert sent["authorization"] == f"Bearer {KEY}" and "anthropic-version" in sent
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            assert request_body(store, session_id, 1) == body
            [row] = list_requests(store, session_id)
            assert row.usage is not None and row.usage.input_tokens == 900 and row.status == 200
            assert len(store.load_messages(session_id)) == 4  # three sent, one answer


def test_streams_pass_through_and_are_read_on_the_way(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("Streaming works fine here.")], input_tokens=700, output_tokens=9,
                          cache_read_input_tokens=500))
        with client(p.url).messages.stream(**request([user("hello")])) as stream:
            received = "".join(stream.text_stream)
        p.settle()
        assert received == "Streaming works fine here."
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            messages = store.load_messages(session_id)
            assert [m.role for m in messages] == ["user", "assistant"]
            assert messages[1].text == "Streaming works fine here."
            assert messages[1].usage is not None and messages[1].usage.cache_read_input_tokens == 500


def test_async_client_streams_through_the_proxy(tmp_path: Path) -> None:
    async def run(url: str) -> str:
        async with (anthropic.AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0) as aclient,
                    aclient.messages.stream(**request([user("hi")])) as stream):
            return "".join([piece async for piece in stream.text_stream])

    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("async answer")]))
        assert asyncio.run(run(p.url)) == "async answer"


def test_async_client_without_streaming_through_the_proxy(tmp_path: Path) -> None:
    async def run(url: str) -> str:
        async with anthropic.AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0) as aclient:
            answer = await aclient.messages.create(**request([user("hi")]))
            return answer.content[0].text  # type: ignore[union-attr]

    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("async, whole")], input_tokens=321))
        assert asyncio.run(run(p.url)) == "async, whole"
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            [row] = list_requests(store, session_id)
        assert row.usage is not None and row.usage.input_tokens == 321


def test_a_growing_conversation_is_one_session_and_a_pruned_result_is_replaced_in_the_next_request(
    tmp_path: Path,
) -> None:
    with proxied(tmp_path) as p:
        api = client(p.url)
        p.api.queue(Reply([tool_use("toolu_1", "Read", {"path": "setup.py"})]))
        first = api.messages.create(**request([user("What does setup.py say?")]))
        turns = read_turns()
        assert first.content[0].model_dump(exclude_none=True) == turns[1]["content"][0]
        p.api.queue(Reply([text("It configures the package.")]))
        api.messages.create(**request(turns))
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            messages = store.load_messages(session_id)
            assert len(messages) == 4
            result = messages[2]
            store.add_overlay_events([OverlayEvent(id="e1", session_id=session_id, plan_id="p1", action="prune",
                                                   message_id=result.id, part_index=0, reason="test")])
        later = [*turns, {"role": "assistant", "content": [text("It configures the package.")]}, user("Thanks!")]
        p.api.queue(Reply([text("You're welcome.")]))
        api.messages.create(**request(later))
        p.settle()
        sent = p.api.bodies[-1]["messages"]
        assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": PRUNED_PLACEHOLDER}
        assert [m for i, m in enumerate(sent) if i != 2] == [m for i, m in enumerate(later) if i != 2]
        assert sessions(p.db) == [session_id]
        with Store(p.db) as store:
            ctx = SessionContext.load(store, session_id)
            item = ctx.view().item_for(result.id)
            assert item is not None and item.parts[0].text == PRUNED_PLACEHOLDER  # type: ignore[union-attr]
            assert request_body(store, session_id, 3)["messages"] == sent
            assert [r.edited for r in list_requests(store, session_id)] == [False, False, True]


def test_pinned_messages_are_never_rewritten(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")]), Reply([text("ok again")]))
        api = client(p.url)
        api.messages.create(**request(read_turns()))
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            result_id = store.load_messages(session_id)[2].id
            store.add_overlay_events([
                OverlayEvent(id="e1", session_id=session_id, plan_id="p1", action="prune", message_id=result_id,
                             part_index=0),
                OverlayEvent(id="e2", session_id=session_id, plan_id="p2", action="pin", message_id=result_id),
            ])
        body = request([*read_turns(), {"role": "assistant", "content": [text("ok")]}, user("more")])
        api.messages.create(**body)
        assert p.api.bodies[-1] == body


def test_budget_attributes_system_blocks_tools_and_the_output_reserve(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")], input_tokens=1200))
        client(p.url).messages.create(**request(read_turns(), max_tokens=3000))
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            budget = SessionContext.load(store, session_id).budget()
        parts = budget.components
        assert parts["system"] > 0 and parts["memory"] > 0, "the CLAUDE.md block is memory, the rest system prompt"
        assert parts["tools"] > 0 and parts["tools_mcp"] > 0, "built-in and MCP tools apart"
        assert budget.output_reserve == 3000
        assert budget.source == "reported"
        assert budget.components["unattributed"] == 0, "a proxied request holds everything the model got"


def test_a_1m_context_beta_header_gives_the_session_a_1m_window(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")], input_tokens=500, cache_creation_input_tokens=300))
        client(p.url).messages.create(**request([user("hi")]), extra_headers={"anthropic-beta": "context-1m-2025-08-07"})
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            ctx = SessionContext.load(store, session_id)
        assert ctx.budget().context_window == 1_000_000


def test_other_conversations_and_agent_sessions_become_their_own_sessions(tmp_path: Path) -> None:
    meta = {"user_id": '{"device_id":"d","session_id":"11111111-2222-3333-4444-555555555555"}'}
    with proxied(tmp_path) as p:
        p.api.queue(*(Reply([text(f"answer {n}")]) for n in range(4)))
        api = client(p.url)
        api.messages.create(**request([user("first conversation")]))
        api.messages.create(**request([user("a different one")]))
        api.messages.create(**request([user("first conversation")], metadata=meta))
        api.messages.create(**request([user("title please")], metadata=meta, tools=[]))
        p.settle()
        assert len(sessions(p.db)) == 4
        with Store(p.db) as store:
            agent = [s for s, _ in store.list_sessions() if s.metadata.get("agent_session")]
        assert len(agent) == 2


def test_a_sub_agent_is_its_own_session_linked_to_the_call_that_started_it(tmp_path: Path) -> None:
    meta = {"user_id": '{"session_id":"bbbbbbbb-2222-3333-4444-555555555555"}'}
    agent_tool = {"name": "Agent", "description": "Start a sub-agent", "input_schema": {"type": "object"}}
    prompt = "Find where the build is configured and report the file."
    with proxied(tmp_path) as p:
        p.api.queue(Reply([tool_use("toolu_a", "Agent", {"description": "find config", "prompt": prompt})]),
                    Reply([text("It is setup.py.")]))
        api = client(p.url)
        api.messages.create(**request([user("Where is the build configured?")], metadata=meta,
                                      tools=[*TOOLS, agent_tool]))
        api.messages.create(**request([{"role": "user", "content": [text("<system-reminder>x</system-reminder>"),
                                                                     text(prompt)]}], metadata=meta))
        p.settle()
        with Store(p.db) as store:
            stored = {s.id: s for s, _ in store.list_sessions()}
            [sub] = [s for s in stored.values() if s.metadata.get("parent_session")]
            main = stored[sub.metadata["parent_session"]]
            calls = [m for m in store.load_messages(main.id) if any(t.name == "Agent" for t in m.tool_uses())]
            assert [m.id for m in calls] == [sub.metadata["parent_message"]]
            assert find_subagents(store, main.id) == {calls[0].id: (sub.id,)}


def test_a_compaction_by_the_agent_continues_its_session_past_a_pivot(tmp_path: Path) -> None:
    meta = {"user_id": '{"session_id":"aaaaaaaa-2222-3333-4444-555555555555"}'}
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("done")]), Reply([text("continuing")]))
        api = client(p.url)
        api.messages.create(**request(read_turns(), metadata=meta))
        summary = user("This session is being continued from a previous conversation that ran out of context. ...")
        api.messages.create(**request([summary], metadata=meta))
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            view = SessionContext.load(store, session_id).view()
        shown = [i.message_id for i in view.items if i.kind == "message"]
        assert len(shown) == 2, "only the summary and its answer are in the model's view"


@pytest.mark.parametrize("fault", [rate_limited("3"), overloaded(), server_error()], ids=["429", "529", "500"])
def test_upstream_errors_reach_the_client_as_they_were(tmp_path: Path, fault: Any) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(fault)
        with pytest.raises(anthropic.APIStatusError) as caught:
            client(p.url).messages.create(**request([user("hi")]))
        assert caught.value.status_code == fault.status
        assert caught.value.body == fault.body()["error"] or caught.value.body == fault.body()


def raw_stream(url: str) -> tuple[int, bytes, str | None]:
    """Status, bytes and the transport error (if any) of one streaming request, read as they come."""
    chunks: list[bytes] = []
    try:
        with httpx2.Client(timeout=10) as http, http.stream(
            "POST", f"{url}/v1/messages", json=request([user("hi")], stream=True),
            headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
        ) as response:
            chunks.extend(response.iter_raw())
            return response.status_code, _same_id(b"".join(chunks)), None
    except httpx2.HTTPError as exc:
        return 0, _same_id(b"".join(chunks)), type(exc).__name__


def _same_id(data: bytes) -> bytes:
    """The loopback numbers its messages by request: the one difference between two equal answers."""
    return re.sub(rb"msg_loop\d+", b"msg_loop", data)


@pytest.mark.parametrize("fault", [
    StreamError(Reply([text("half an answer, then overloaded")])),
    Malformed(Reply([text("a stream with a broken event")])),
    Dropped(Reply([text("cut off in the middle")]), after_events=3),
    Dropped(Reply([text("stops without message_stop")]), after_events=4, clean_eof=True),
], ids=["error-event", "malformed", "cut", "stopped"])
def test_faulty_streams_reach_the_client_as_they_were(tmp_path: Path, fault: Any) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(fault, fault)
        direct = raw_stream(p.api.url)
        through = raw_stream(p.url)
        p.settle()
    assert through[0] == direct[0]
    if direct[2] is None:
        assert through == direct, "the same bytes, event for event"
    else:
        assert through[2] is not None and through[1] == direct[1], "the same bytes up to the cut, then a cut"


def test_count_tokens_and_other_paths_pass_through(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        body = request([user("how long is this?")])
        body.pop("max_tokens")
        counted = client(p.url).messages.count_tokens(**body)
        assert counted.input_tokens == p.api.count_tokens(body)
        assert [m.id for m in client(p.url).models.list()] == ["claude-opus-4-6"]
        with pytest.raises(anthropic.NotFoundError):
            client(p.url).get("/v1/nowhere", cast_to=object)
        assert sessions(p.db) == []


def test_a_request_the_proxy_cannot_read_goes_upstream_unchanged(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("fine")]))
        odd = request([user("hi")])
        odd["messages"] = ["not a message object"]
        answer = client(p.url).post("/v1/messages", body=odd, cast_to=object)
        assert answer["content"][0]["text"] == "fine"  # type: ignore[index]
        assert p.api.bodies == [odd]
        p.settle()
        assert p.reports and p.reports[0].warning and "forwarded unchanged" in p.reports[0].warning


def test_a_client_that_goes_away_mid_stream_closes_the_upstream_request(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.pause = 0.5  # 60 words in 8 pieces, and the other events: several seconds, cut long before the end
        p.api.queue(Reply([text("word " * 60)]))
        with client(p.url).messages.stream(**request([user("hi")])) as stream:
            next(iter(stream.text_stream))
        deadline = time.monotonic() + 30
        while p.api.cut_streams == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert p.api.cut_streams == 1, "the upstream stream was cut, not read to its end"
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            assert [m.role for m in store.load_messages(session_id)] == ["user"], "a cut answer is not kept"


def test_no_key_is_written_anywhere(tmp_path: Path) -> None:
    """Not the headers' key, and not a key the conversation itself carries (an agent's tool printed the
    environment): what the proxy stores is redacted; what it forwards is what the client sent."""
    other = "sk-ant-admin01-" + "x" * 40
    leaky = [*read_turns(), {"role": "assistant", "content": [tool_use("toolu_2", "Bash", {"command": "env"})]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2",
                                           "content": f"HOME=/home/me\nANTHROPIC_API_KEY={KEY}\nADMIN={other}"}]}]
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text(f"Your key is {KEY}")]), Reply([text("ok")]))
        client(p.url).messages.create(**request(leaky))
        client(p.url).messages.create(**request([*leaky, {"role": "assistant", "content": [text(f"Your key is {KEY}")]},
                                                 user("thanks")]))
        p.settle()
        assert KEY in json.dumps(p.api.bodies[-1]), "forwarded as the client sent it"
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            shown = json.dumps(request_body(store, session_id, 2))
            shown += "".join(m.model_dump_json() for m in store.load_messages(session_id))
        assert KEY not in shown and other not in shown and "REDACTED" in shown
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert KEY.encode() not in data and other.encode() not in data, path


def test_listening_beyond_loopback_and_odd_upstreams_are_refused() -> None:
    with pytest.raises(WorkbenchError, match="loopback"):
        check_listen("0.0.0.0", anywhere=False)
    assert check_listen("0.0.0.0", anywhere=True) == "0.0.0.0"
    assert check_listen("::1", anywhere=False) == "::1"
    with pytest.raises(WorkbenchError, match="http"):
        check_upstream("file:///etc/passwd")


def test_system_and_tools_of_the_fixture_request_round_trip(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")]))
        client(p.url).messages.create(**request([user("x")]))
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            body = request_body(store, session_id, 1)
        assert body["system"] == SYSTEM and body["tools"] == TOOLS


def test_one_hour_cache_writes_are_read_from_the_usage_the_api_reports() -> None:
    usage = usage_of({"input_tokens": 5, "cache_creation_input_tokens": 900,
                      "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 700}}, "m")
    assert usage is not None and usage.cache_creation_1h_input_tokens == 700 and usage.total_input == 905


def test_exact_counts_come_from_count_tokens_only_when_asked(tmp_path: Path) -> None:
    body = request(read_turns())
    with proxied(tmp_path / "plain") as p:
        p.api.queue(Reply([text("ok")]))
        client(p.url).messages.create(**body)
        p.settle()
        assert [r.path for r in p.api.requests] == ["/v1/messages"], "no count_tokens call without --exact"
    with proxied(tmp_path / "exact", exact=True) as p:
        p.api.queue(Reply([text("ok")]), Reply([text("again")]))
        client(p.url).messages.create(**body)
        deadline = time.monotonic() + 30  # a bound on a hang; the loop ends as soon as they came
        while len([r for r in p.api.requests if r.path.endswith("count_tokens")]) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        client(p.url).messages.create(**request([*read_turns(), {"role": "assistant", "content": [text("ok")]},
                                                 user("more")]))
        p.settle()
        counts = [r for r in p.api.requests if r.path.endswith("count_tokens")]
        assert len(counts) == 4, "four calls, and not again within the minute"
        assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in counts), "with the client's own key"
        probe = {"model": body["model"], "messages": [{"role": "user", "content": "."}]}
        alone = p.api.count_tokens(probe)
        system = p.api.count_tokens({**probe, "system": body["system"]}) - alone
        tools = p.api.count_tokens({**probe, "tools": body["tools"]}) - alone
        [session_id] = sessions(p.db)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            p.settle()
            with Store(p.db) as store:
                if "exact" in store.get_session(session_id).metadata:
                    budget = SessionContext.load(store, session_id).budget()
                    break
            time.sleep(0.02)
    parts = budget.components
    assert parts["system"] + parts["memory"] == system, "the system blocks count what count_tokens said"
    assert parts["tools"] + parts["tools_mcp"] == tools


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_apis_own_context_edits_are_kept_with_the_request(tmp_path: Path, stream: bool) -> None:
    edit = {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 12000}
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")], applied_edits=[edit]))
        api = client(p.url)
        if stream:
            with api.messages.stream(**request(read_turns())) as events:
                events.until_done()
        else:
            api.messages.create(**request(read_turns()))
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            [row] = list_requests(store, session_id)
    assert row.api_edits == [edit]
    listed = subprocess.run([sys.executable, "-m", "workbench", "--db", str(p.db), "requests", session_id],
                            capture_output=True, text=True, timeout=60)
    assert "API cleared 3 tool uses, 12,000 input tokens" in listed.stdout
