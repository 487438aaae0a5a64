"""The proxy's OpenAI side with real parts: httpx2 as the client, the proxy on a loopback port, and a loopback
OpenAI API upstream shaped from what Codex CLI, Aider and OpenCode send and accept."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from loopback_openai import (
    LoopbackOpenAI,
    Scripted,
    chat_stream,
    chat_whole,
    custom_tool_call,
    error,
    function_call,
    message,
    reasoning,
    responses_stream,
    usage,
)
from wire_steering import SMALL_TAIL

from workbench.engine.context.breakdown import breakdown
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction_prompt import SUMMARY_PREFIX
from workbench.engine.plans.edit_price import Change, edit_price
from workbench.engine.transcript.models import ToolResultPart, ToolUsePart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.request_marks import request_marks
from workbench.engine.transcript.request_store import list_requests, request_body
from workbench.engine.transcript.store import Store
from workbench.proxy.exchange import Exchange
from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings

KEY = "sk-proj-planted-openai-key-0123456789abcdef"
THREAD = "01a222b7-1afb-7281-93ff-dec51843264d"
CODEX_HEADERS = {"authorization": f"Bearer {KEY}", "accept": "text/event-stream", "originator": "codex_exec",
                 "session-id": THREAD, "thread-id": THREAD, "user-agent": "codex_exec/0.171.0"}
SYSTEM_PROMPT = "You are a coding agent running in the Codex CLI, a terminal-based coding assistant. " * 20
AGENTS_MD = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nAlways run the tests first.\n</INSTRUCTIONS>"
ENVIRONMENT = "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"
EXEC_TOOL = {"type": "function", "name": "exec_command", "description": "Runs a command in a PTY.", "strict": False,
             "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
PATCH_TOOL = {"type": "custom", "name": "apply_patch", "description": "Use the `apply_patch` tool to edit files.",
              "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}}
CODEX_TOOLS = [EXEC_TOOL, PATCH_TOOL,
               {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
                "tools": [{"type": "function", "name": "spawn_agent", "description": "Start one.",
                           "parameters": {"type": "object", "properties": {}}}]},
               {"type": "web_search", "external_web_access": False}]


def text_item(role: str, value: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": value}]}


def codex_request(*items: dict[str, Any]) -> dict[str, Any]:
    """A Codex CLI 0.171 request body (the shape it sends; its long texts shortened)."""
    first = [text_item("developer", SYSTEM_PROMPT), text_item("user", AGENTS_MD), text_item("user", ENVIRONMENT),
             text_item("user", "Run: cat hello.txt and tell me what it says")]
    return {"model": "gpt-5.5", "stream": True, "input": [*first, *items], "tools": CODEX_TOOLS,
            "tool_choice": "auto", "parallel_tool_calls": True, "reasoning": {"summary": "auto"}, "store": False,
            "include": ["reasoning.encrypted_content"], "prompt_cache_key": THREAD}


@dataclass
class Proxied:
    api: LoopbackOpenAI
    server: ProxyServer
    db: Path
    reports: list[Exchange]

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1"

    def settle(self) -> None:
        self.server.recorder.settle()


@contextmanager
def proxied(tmp_path: Path, upstream: str | None = None) -> Iterator[Proxied]:
    db = tmp_path / "proxy.db"
    with LoopbackOpenAI() as api:
        reports: list[Exchange] = []
        recorder = Recorder(db, home=tmp_path, report=reports.append)
        settings = ProxySettings(db_path=db, upstream="http://127.0.0.1:9", openai_upstream=upstream or api.url,
                                 port=0)
        server = ProxyServer(settings, recorder).start()
        try:
            yield Proxied(api=api, server=server, db=db, reports=reports)
        finally:
            server.stop()
            recorder.close()


def post(base: str, path: str, body: dict[str, Any] | bytes, headers: dict[str, str] | None = None
         ) -> tuple[int, str, bytes, list[bytes]]:
    """Status, content type, the whole body and the chunks as the client read them."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx2.Client(timeout=30) as http, http.stream(
            "POST", f"{base}{path}", content=content,
            headers={"content-type": "application/json", **(headers or {})}) as response:
        chunks = list(response.iter_raw())
        return response.status_code, response.headers.get("content-type", ""), b"".join(chunks), chunks


def sessions(db: Path) -> list[str]:
    with Store(db) as store:
        return [s.id for s, _ in store.list_sessions() if s.source_format == "proxy"]


ANSWERS = {
    "responses stream": ("/responses", lambda: responses_stream(
        [reasoning("thinking about it"), function_call("call_1", "exec_command", {"cmd": "ls"})], full=True)),
    "responses text": ("/responses", lambda: responses_stream([message("hello " * 50)], full=True)),
    "chat stream": ("/chat/completions", lambda: chat_stream(
        "I will look.", [("call_1", "bash", {"command": "ls"})],
        use={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})),
    "chat whole": ("/chat/completions", lambda: chat_whole("done")),
    **{f"{path} {status}": (path, lambda status=status: error(status, "nope", "invalid_request_error"))
       for path in ("/responses", "/chat/completions") for status in (400, 401, 403, 404, 429, 500, 503)},
}


@pytest.mark.parametrize("case", ANSWERS)
def test_answers_through_the_proxy_equal_answers_direct_byte_for_byte(tmp_path: Path, case: str) -> None:
    path, answer = ANSWERS[case]
    body = codex_request() if path == "/responses" else {"model": "fake-model", "stream": True,
                                                         "messages": [{"role": "user", "content": "hi"}]}
    with proxied(tmp_path) as p:
        p.api.queue(answer(), answer())
        direct = post(p.api.url, path, body, CODEX_HEADERS)
        through = post(p.url, path, body, CODEX_HEADERS)
        p.settle()
    assert through[:3] == direct[:3]
    assert p.api.seen[0].raw == p.api.seen[1].raw, "the upstream received the client's bytes"
    assert p.api.seen[1].path == f"/v1{path}"
    assert p.api.seen[1].headers["authorization"] == f"Bearer {KEY}", "the client's key goes upstream"
    if direct[1].startswith("text/event-stream"):
        assert len(through[3]) > 1, "a stream is forwarded chunk by chunk, not gathered"


def test_a_codex_session_is_stored_and_attributed(tmp_path: Path) -> None:
    call = function_call("call_1", "exec_command", {"cmd": "cat hello.txt"})
    output = {"type": "function_call_output", "id": "fco_x", "call_id": "call_1", "output": "secret-42\n" * 40}
    with proxied(tmp_path) as p:
        p.api.queue(responses_stream([reasoning("look at the file"), call], use=usage(5000, 40, 0, 12)),
                    responses_stream([message("It says secret-42.")], use=usage(5400, 10, 4800, 0)))
        post(p.url, "/responses", codex_request(), CODEX_HEADERS)
        echoed = [{**reasoning("look at the file")}, {**call}, output]
        post(p.url, "/responses", codex_request(*echoed), CODEX_HEADERS)
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            session = store.get_session(session_id)
            messages = store.load_messages(session_id)
            requests = list(list_requests(store, session_id))
            budget = SessionContext.load(store, session_id).budget()
            entries = breakdown(store, session_id).entries
    assert session.metadata["agent_session"] == THREAD and session.model == "gpt-5.5"
    assert session.title.startswith("Run: cat hello.txt")
    assert [r.seq for r in requests] == [1, 2] and requests[1].usage is not None
    assert requests[1].usage.cache_read_input_tokens == 4800 and requests[1].usage.input_tokens == 600
    assert requests[0].usage is not None and requests[0].usage.reasoning_tokens == 12
    parts = [part for m in messages for part in m.parts]
    assert any(isinstance(part, ToolUsePart) and part.name == "exec_command" and part.input == {"cmd": "cat hello.txt"}
               for part in parts)
    assert any(isinstance(part, ToolResultPart) and part.tool_use_id == "call_1" for part in parts)
    assert len([m for m in messages if m.role == "assistant"]) == 2, "the echoed answer is the stored answer"
    components = budget.components
    assert components["system"] > 0 and components["tools"] > 0 and components["memory"] > 0
    assert components["reminders"] > 0 and components["tool_results"] > 0 and components["thinking"] > 0
    assert components["unattributed"] == 0
    tools = {entry.name for entry in entries if entry.component in ("tools", "tools_mcp")}
    assert tools == {"exec_command", "apply_patch", "multi_agent_v1__spawn_agent", "web_search"}


def test_an_apply_patch_call_is_a_tool_call_with_its_output(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: hello.txt\n@@\n-secret-42\n+secret-43\n*** End Patch\n"
    call = custom_tool_call("call_1", "apply_patch", patch)
    output = {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Success. Updated hello.txt"}
    with proxied(tmp_path) as p:
        p.api.queue(responses_stream([call]), responses_stream([message("Done.")]))
        post(p.url, "/responses", codex_request(), CODEX_HEADERS)
        post(p.url, "/responses", codex_request(call, output), CODEX_HEADERS)
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            parts = [part for m in store.load_messages(session_id) for part in m.parts]
    [use] = [part for part in parts if isinstance(part, ToolUsePart)]
    assert use.name == "apply_patch" and use.input == {"input": patch}
    assert any(isinstance(part, ToolResultPart) and part.text == "Success. Updated hello.txt" for part in parts)


def chat_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": "bash", "description": "Run a command",
                                               "parameters": {"type": "object", "properties": {}}}}]
    return {"model": "fake-model", "stream": True, "stream_options": {"include_usage": True}, "tools": tools,
            "messages": [{"role": "system", "content": "You are opencode, an agent."}, *messages], **extra}


def test_chat_completions_requests_extending_one_history_are_one_session(tmp_path: Path) -> None:
    ask = {"role": "user", "content": "Run: cat hello.txt"}
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": "cat hello.txt"})}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "secret-42\n"}
    use = {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320,
           "prompt_tokens_details": {"cached_tokens": 128}}
    with proxied(tmp_path) as p:
        p.api.queue(chat_stream("", [("call_1", "bash", {"command": "cat hello.txt"})], use=use),
                    chat_stream("It says secret-42.", use=use), chat_whole("A title"))
        post(p.url, "/chat/completions", chat_body([ask]), {"authorization": f"Bearer {KEY}"})
        post(p.url, "/chat/completions", chat_body([ask, call, result]), {"authorization": f"Bearer {KEY}"})
        post(p.url, "/chat/completions", {"model": "fake-model", "messages": [
            {"role": "system", "content": "Generate a title for this conversation."}, ask]})
        p.settle()
        found = sessions(p.db)
        with Store(p.db) as store:
            counts = {sid: len(store.load_messages(sid)) for sid in found}
            usages = {sid: [r.usage for r in list_requests(store, sid)] for sid in found}
    assert sorted(counts.values()) == [2, 4], "the conversation (4 messages) and the title call apart"
    [conversation] = [sid for sid, n in counts.items() if n == 4]
    first = usages[conversation][0]
    assert first is not None and first.cache_read_input_tokens == 128 and first.input_tokens == 172


def test_the_key_is_never_stored(tmp_path: Path) -> None:
    leaky = {"type": "function_call_output", "call_id": "call_1", "output": f"OPENAI_API_KEY={KEY}"}
    call = function_call("call_1", "exec_command", {"cmd": "env"})
    with proxied(tmp_path) as p:
        p.api.queue(responses_stream([message(f"your key is {KEY}")]))
        post(p.url, "/responses", codex_request(call, leaky), CODEX_HEADERS)
        p.settle()
    assert KEY in p.api.seen[0].raw.decode(), "forwarded as the client sent it"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_an_unreadable_request_goes_upstream_unchanged_and_an_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(error(400, "bad json"))
        status, _, body, _ = post(p.url, "/responses", b"{not json", CODEX_HEADERS)
        p.settle()
        assert status == 400 and b"bad json" in body and p.api.seen[0].raw == b"{not json"
    with proxied(tmp_path / "gone", upstream="http://127.0.0.1:9/v1") as p:
        status, _, body, _ = post(p.url, "/chat/completions", chat_body([]))
        assert status == 502 and json.loads(body)["error"]["code"] == "upstream_unreachable"


def test_other_openai_paths_pass_through_to_the_openai_upstream(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(Scripted([b'{"object":"list","data":[]}'], content_type="application/json"))
        with httpx2.Client() as http:
            response = http.get(f"{p.url}/models?limit=2", headers={"authorization": f"Bearer {KEY}"})
        assert response.status_code == 200 and response.json() == {"object": "list", "data": []}
        assert p.api.seen[0].path == "/v1/models?limit=2" and p.api.seen[0].method == "GET"


def prune(db: Path, session_id: str, result_of: str) -> None:
    """Prune, in the workbench, the tool result of call ``result_of``."""
    with Store(db) as store:
        [message] = [m for m in store.load_messages(session_id)
                     if any(isinstance(p, ToolResultPart) and p.tool_use_id == result_of for p in m.parts)]
        index = next(i for i, p in enumerate(message.parts) if isinstance(p, ToolResultPart))
        store.add_overlay_events([OverlayEvent(id="e1", session_id=session_id, plan_id="p1", action="prune",
                                               message_id=message.id, part_index=index, reason="test")])


def test_a_pruned_function_call_output_is_replaced_in_the_next_responses_request(tmp_path: Path) -> None:
    call = function_call("call_1", "exec_command", {"cmd": "cat big.txt"})
    output = {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "big line\n" * 500}
    answer = message("It is big.", "msg_2")
    with proxied(tmp_path) as p:
        p.api.queue(responses_stream([call]), responses_stream([answer]), responses_stream([message("ok", "m3")]))
        post(p.url, "/responses", codex_request(), CODEX_HEADERS)
        post(p.url, "/responses", codex_request(call, output), CODEX_HEADERS)
        p.settle()
        [session_id] = sessions(p.db)
        prune(p.db, session_id, "call_1")
        later = codex_request(call, output, answer, text_item("user", "thanks"))
        post(p.url, "/responses", later, CODEX_HEADERS)
        p.settle()
        with Store(p.db) as store:
            stored = request_body(store, session_id, 3)
            edited = [r.edited for r in list_requests(store, session_id)]
    sent = p.api.seen[-1].body["input"]
    assert sent[5] == {**output, "output": PRUNED_PLACEHOLDER}, "ids and call_id kept, the output replaced"
    assert [item for i, item in enumerate(sent) if i != 5] == [item for i, item in enumerate(later["input"]) if i != 5]
    assert {k: v for k, v in p.api.seen[-1].body.items() if k != "input"} == \
        {k: v for k, v in later.items() if k != "input"}
    assert edited == [False, False, True]
    assert any(b.get("content") == PRUNED_PLACEHOLDER for m in stored["messages"] for b in m["content"]
               if isinstance(b, dict)), "what is stored as sent is what was sent"


def test_a_pruned_tool_message_is_replaced_in_the_next_chat_completions_request(tmp_path: Path) -> None:
    ask = {"role": "user", "content": "Run: cat big.txt"}
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": "cat big.txt"})}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "big line\n" * 500}
    with proxied(tmp_path) as p:
        p.api.queue(chat_stream("", [("call_1", "bash", {"command": "cat big.txt"})]), chat_stream("It is big."),
                    chat_stream("ok"))
        post(p.url, "/chat/completions", chat_body([ask]))
        post(p.url, "/chat/completions", chat_body([ask, call, result]))
        p.settle()
        [session_id] = sessions(p.db)
        prune(p.db, session_id, "call_1")
        later = chat_body([ask, call, result, {"role": "assistant", "content": "It is big."},
                           {"role": "user", "content": "thanks"}])
        post(p.url, "/chat/completions", later)
        p.settle()
    sent = p.api.seen[-1].body["messages"]
    assert sent[3] == {**result, "content": PRUNED_PLACEHOLDER}
    assert [m for i, m in enumerate(sent) if i != 3] == [m for i, m in enumerate(later["messages"]) if i != 3]


def test_an_edit_of_an_openai_session_is_priced_by_openais_caching_rules(tmp_path: Path) -> None:
    """Automatic prefix caching, no write premium: an edit makes the rest of the next request be read at the
    input price instead of the cached-input price; once the cache has gone cold, it costs nothing more."""
    call = function_call("call_1", "exec_command", {"cmd": "cat big.txt"})
    output = {"type": "function_call_output", "call_id": "call_1", "output": "big line\n" * 500}
    with proxied(tmp_path) as p:
        p.api.queue(responses_stream([call], model="gpt-5.5", use=usage(4000, 20)),
                    responses_stream([message("It is big.")], model="gpt-5.5", use=usage(5200, 10, 3968)))
        post(p.url, "/responses", codex_request(), CODEX_HEADERS)
        post(p.url, "/responses", codex_request(call, output), CODEX_HEADERS)
        p.settle()
        [session_id] = sessions(p.db)
        with Store(p.db) as store:
            ctx = SessionContext.load(store, session_id)
            marks = request_marks(store, session_id)
            [result] = [m for m in store.load_messages(session_id)
                        if any(isinstance(part, ToolResultPart) for part in m.parts)]
    assert marks is not None and marks.prefix_cached
    change = [Change(result.id, 0, 1000)]
    warm = edit_price(ctx.view(), change, marks, marks.sent_at + timedelta(minutes=1))
    assert warm.automatic and not warm.cold and warm.rewritten > 0
    assert warm.extra_cost == pytest.approx(warm.rewritten * (5.0 - 0.5) / 1e6)
    assert warm.saved_cost == pytest.approx(1000 * 0.5 / 1e6, rel=0.5)
    assert "uncached" in warm.describe() and "write price" not in warm.describe()
    cold = edit_price(ctx.view(), change, marks, marks.sent_at + timedelta(minutes=30))
    assert cold.cold and cold.rewritten == 0 and cold.extra_cost == 0.0


def test_a_compaction_applied_reaches_the_next_responses_request_as_one_user_message(
        tmp_path: Path, workbench_home: Path) -> None:
    """The summarised items give way to one user message holding the summary; the developer prompt stays
    first, the kept tail goes as the client sent it, and every call keeps its output."""
    (workbench_home / "config.toml").write_text(SMALL_TAIL)
    items: list[dict[str, Any]] = []
    with proxied(tmp_path) as p:
        for n in range(3):
            call = function_call(f"call_{n}", "exec_command", {"cmd": f"cat file_{n}.txt"})
            output = {"type": "function_call_output", "call_id": f"call_{n}", "output": f"line {n}\n" * 200}
            answer = message(f"File {n} holds lines.", f"msg_{n}")
            p.api.queue(responses_stream([call]), responses_stream([answer]))
            post(p.url, "/responses", codex_request(*items), CODEX_HEADERS)
            items += [call, output]
            post(p.url, "/responses", codex_request(*items), CODEX_HEADERS)
            items += [answer, text_item("user", f"Now file {n + 1}.")]
        p.settle()
        [session_id] = sessions(p.db)
        applied = subprocess.run([sys.executable, "-m", "workbench", "--db", str(p.db), "compact", session_id,
                                  "--apply"], capture_output=True, text=True, timeout=120, check=False)
        assert applied.returncode == 0, applied.stderr
        p.api.queue(responses_stream([message("ok", "m9")]))
        later = codex_request(*items)
        post(p.url, "/responses", later, CODEX_HEADERS)
        p.settle()
    sent = p.api.seen[-1].body["input"]
    assert sent[0] == later["input"][0], "the developer prompt stays first"
    summary = sent[1]
    assert summary["role"] == "user" and summary["content"][0]["text"].startswith(SUMMARY_PREFIX)
    assert len(sent) < len(later["input"])
    tail = sent[2:]
    assert tail and tail == later["input"][len(later["input"]) - len(tail):], "the kept tail as the client sent it"
    calls = {item["call_id"] for item in sent if item.get("type") == "function_call"}
    assert calls == {item["call_id"] for item in sent if item.get("type") == "function_call_output"}
