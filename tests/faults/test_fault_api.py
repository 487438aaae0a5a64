"""API faults: the real agent and the real SDK against the loopback Messages API, one fault at a time.

Each fault ends in a retry, a recovery, or a clear error the user can act on (an ``error`` event and
an ``AgentError`` whose message says what failed) — and never in half a message: the store holds only
whole answers, every stored tool call has its result, and the *next* ``agent.send`` makes a request
the API accepts (``check_wire_messages`` on the body the server received).

Already covered elsewhere and not repeated here: 429 with ``retry-after`` capped, exponential backoff
(``test_anthropic_provider.py``); a dropped text stream, a failure after a tool call, a prompt too long
twice, 401 (``test_agent_loop.py``). Added here: client timeouts, 529 bursts (recovered and exhausted),
500s, malformed SSE, an ``error`` event mid-stream, a stream cut inside a ``tool_use`` block, an empty
response, and "prompt is too long" (or 529s) answered to the recovery's own summary request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_session import AgentSession
from fault_support import COUNTERS
from loopback_api import (
    Dropped,
    ErrorResponse,
    LoopbackAPI,
    Malformed,
    Reply,
    Stalled,
    StreamError,
    check_wire_messages,
    iter_blocks,
    overloaded,
    prompt_too_long,
    rate_limited,
    server_error,
    text,
    thinking,
    tool_use,
)

from workbench.engine import events as ev
from workbench.engine.agent.loop import approve_all
from workbench.engine.agent.runner import prepare_run
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.settings.config import Config
from workbench.engine.settings.limits import ModelLimits
from workbench.engine.transcript.models import Message, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store

MODEL = "claude-sonnet-4-5"

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


Session = AgentSession


def session(store: Store, api: LoopbackAPI, workspace: Path, config: Config | None = None,
            **provider_kwargs: Any) -> Session:
    def new_provider() -> AnthropicProvider:
        return AnthropicProvider(api_key="test-key", base_url=api.url, base_delay=0.01, **provider_kwargs)

    events: list[ev.Event] = []
    setup = prepare_run(store, config or Config(), session_id=None, scripted=None, model=MODEL, workspace=workspace,
                        approve=approve_all, on_event=events.append, provider=new_provider())
    return Session(setup.agent, new_provider, events, store)


def answer(*blocks: dict[str, Any]) -> Callable[[dict[str, Any]], Reply]:
    def reply(body: dict[str, Any]) -> Reply:
        return Reply(list(blocks), input_tokens=len(json.dumps(body)) // 4, output_tokens=20)

    return reply


def slow(seconds: float, reply: Reply | Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """The server waits ``seconds`` before it answers (longer than the client's timeout)."""

    def respond(body: dict[str, Any]) -> Reply:
        time.sleep(seconds)
        return reply(body) if callable(reply) else reply

    return respond


def assert_whole(stored: list[Message]) -> None:
    """Every stored tool call has its result and no assistant message is half a response."""
    calls = {p.id for m in stored for p in m.parts if isinstance(p, ToolUsePart)}
    results = {p.tool_use_id for m in stored for p in m.parts if isinstance(p, ToolResultPart)}
    assert calls == results, f"calls without results: {calls - results}"


def then_next_request_is_valid(s: Session, api: LoopbackAPI) -> None:
    """The next message after the fault makes a request the API accepts."""
    api.queue(answer(text("Still here.")))
    assert s.send("Are you still there?") == []
    body = api.bodies[-1]
    check_wire_messages(body["messages"])
    assert [b["text"] for b in iter_blocks(body["messages"], "text")][-1] == "Are you still there?"
    assert s.stored()[-1].text == "Still here."
    assert_whole(s.stored())


# --- faults that a retry recovers from --------------------------------------------------


RECOVERED: dict[str, tuple[list[Any], str]] = {
    "429 with retry-after": ([rate_limited(retry_after="0.05")], "HTTP 429"),
    "429 without retry-after": ([rate_limited()], "HTTP 429"),
    "529 burst": ([overloaded()] * 4, "HTTP 529"),
    "500s": ([server_error(), server_error()], "HTTP 500"),
    "malformed SSE": ([Malformed(Reply([text("lost")]))], "connection: "),
    "error event mid-stream": ([StreamError(Reply([text("lost in the middle")]))], "stream error: overloaded_error"),
}


@pytest.mark.parametrize("name", list(RECOVERED))
def test_retried_faults_store_one_whole_answer(name: str, store: Store, api: LoopbackAPI, workspace: Path) -> None:
    faults, reason = RECOVERED[name]
    api.queue(*faults, answer(text("Recovered answer.")))
    s = session(store, api, workspace, max_retries=4)
    assert s.send("hello") == []
    retries = s.of(ev.Retry)
    assert len(retries) == len(faults) and all(r.reason.startswith(reason) for r in retries), retries
    assert [r.attempt for r in retries] == list(range(1, len(faults) + 1))
    if name == "429 with retry-after":
        assert retries[0].delay == pytest.approx(0.05)
    assert [(m.role, m.text) for m in s.stored()] == [("user", "hello"), ("assistant", "Recovered answer.")]
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=len(faults))


def test_client_timeout_is_retried(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(slow(1.5, answer(text("too late"))), answer(text("In time.")))
    s = session(store, api, workspace, timeout=0.4)
    started = time.monotonic()
    assert s.send("hello") == []
    assert time.monotonic() - started < 5
    [retry] = s.of(ev.Retry)
    assert retry.reason.startswith("connection: ") and "Timeout" in retry.reason, retry.reason
    assert [m.text for m in s.stored()] == ["hello", "In time."], "the late answer was not stored"
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=1)


def test_timeouts_until_retries_run_out_are_a_clear_error(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(slow(1.0, answer(text("late"))), slow(1.0, answer(text("late again"))))
    s = session(store, api, workspace, timeout=0.3, max_retries=1)
    [failure] = s.send("hello")
    assert "failed after 2 attempts" in str(failure) and "timed out" in str(failure).lower(), str(failure)
    [error] = s.of(ev.ErrorEvent)
    assert error.message == str(failure)
    assert [m.role for m in s.stored()] == ["user"]
    time.sleep(1.0)  # the server's late answers go to closed connections, not to the next request
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=2)


def test_a_stream_stalling_on_every_attempt_ends_in_its_reason(store: Store, api: LoopbackAPI,
                                                              workspace: Path) -> None:
    api.queue(Stalled(Reply([text("stalls")]), 1.0), Stalled(Reply([text("stalls again")]), 1.0))
    s = session(store, api, workspace, timeout=0.3, max_retries=1)
    [failure] = s.send("hello")
    message = str(failure)
    assert message.startswith("model call failed after 2 attempts: "), message
    reason = message.removeprefix("model call failed after 2 attempts: ")
    assert reason.strip() and "timeout" in reason.lower(), f"no reason after the colon: {message!r}"
    time.sleep(1.0)
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=2)


def test_529_burst_longer_than_the_retries_is_a_clear_error(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(*[overloaded()] * 5)
    s = session(store, api, workspace, max_retries=4)
    [failure] = s.send("hello")
    assert str(failure) == "model call failed after 5 attempts (HTTP 529 overloaded_error: Overloaded)"
    assert [r.attempt for r in s.of(ev.Retry)] == [1, 2, 3, 4]
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=5)


@pytest.mark.parametrize("clean_eof", [False, True], ids=["connection-reset", "stream-stops"])
def test_stream_cut_inside_a_tool_use_block(clean_eof: bool, store: Store, api: LoopbackAPI,
                                            workspace: Path) -> None:
    reply = Reply([thinking("Read the file first.", "sig-1"), text("Reading app.py."),
                   tool_use("toolu_01", "read_file", {"path": "app.py"})], pieces=4)
    events = reply.events(MODEL, "msg")
    start = next(i for i, (name, data) in enumerate(events)
                 if name == "content_block_start" and data["content_block"]["type"] == "tool_use")
    # Cut after the tool_use block opened and two pieces of its JSON input arrived.
    api.queue(Dropped(reply, after_events=start + 3, clean_eof=clean_eof), reply,
              answer(text("add() subtracts.")))
    s = session(store, api, workspace)
    assert s.send("What does add do?") == []
    [retry] = s.of(ev.Retry)
    assert retry.reason.startswith("connection: ")
    calls = s.of(ev.ToolCall)
    assert [(c.name, c.input) for c in calls] == [("read_file", {"path": "app.py"})], "the tool ran exactly once"
    stored = s.stored()
    assert [(m.role, m.kind) for m in stored] == [("user", "message"), ("assistant", "message"),
                                                  ("user", "tool_result"), ("assistant", "message")]
    assert [p.kind for p in stored[1].parts] == ["thinking", "text", "tool_use"]
    assert stored[1].tool_uses()[0].input == {"path": "app.py"}
    assert_whole(stored)
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=1)


def test_empty_response_leaves_a_session_that_continues(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(Reply([], output_tokens=0),  # no content blocks at all
              answer(tool_use("toolu_01", "read_file", {"path": "app.py"})), Reply([], output_tokens=0))
    s = session(store, api, workspace)
    assert s.send("hello", "read app.py") == []
    stored = s.stored()
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert not stored[1].parts and not stored[-1].parts
    assert_whole(stored)
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=2)


# --- "prompt is too long" during the recovery itself ---------------------------------------


BULKY = [f"Notes part {n}: " + " ".join(f"item{n}x{i} value{i * 7}" for i in range(600)) for n in range(3)]
SMALL_WINDOW = Config(models={MODEL: ModelLimits(context_window=40_000, max_output=2_000)})


def with_history(store: Store, api: LoopbackAPI, workspace: Path) -> Session:
    """A session with enough behind it that a recovery summarises through the model."""
    api.queue(*(answer(text(f"Noted {n}.")) for n in range(len(BULKY))))
    s = session(store, api, workspace, config=SMALL_WINDOW, max_retries=1)
    assert s.send(*BULKY) == []
    return s


@pytest.mark.parametrize("summary_fault", ["too-long", "overloaded"])
def test_recovery_whose_summary_request_fails_falls_back_and_answers(
    summary_fault: str, store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    s = with_history(store, api, workspace)
    faults: list[ErrorResponse] = [prompt_too_long()] if summary_fault == "too-long" else [overloaded()] * 2
    api.queue(prompt_too_long(), *faults, answer(text("Answered after recovery.")))
    assert s.send("What did I note?") == []
    kinds = [(w.kind, w.message) for w in s.of(ev.Warning)]
    assert any(k == "context_limit" for k, _ in kinds), kinds
    assert any(k == "compaction" and "llm summary failed" in m and "heuristic" in m for k, m in kinds), kinds
    [end] = [e for e in s.of(ev.CompactionEnd) if e.trigger == "recovery"]
    assert end.error is None and end.summarizer == "heuristic"
    retry_body = api.bodies[-1]
    check_wire_messages(retry_body["messages"])
    texts = [b["text"] for b in iter_blocks(retry_body["messages"], "text")]
    assert texts[0].startswith("[Previous conversation summary]") and texts[-1] == "What did I note?"
    assert s.stored()[-1].text == "Answered after recovery."
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=1 + len(faults))


def test_prompt_too_long_again_after_the_recovery_is_a_clear_error(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    s = with_history(store, api, workspace)
    # The call, the summary, the retry after the summary, the retry after dropping what precedes the turn.
    api.queue(prompt_too_long(), prompt_too_long(), prompt_too_long(), prompt_too_long())
    [failure] = s.send("What did I note?")
    assert "prompt is too long" in str(failure) and "recovery did not free enough context" in str(failure)
    assert "\n" not in str(failure)
    [error] = s.of(ev.ErrorEvent)
    assert "prompt is too long" in error.message
    assert [e.summarizer for e in s.of(ev.CompactionEnd)] == ["heuristic", "truncation"]
    assert s.events[-1] == error and len(api.bodies) == len(BULKY) + 4
    assert not [e for e in s.store.load_overlay(s.agent.ctx.session.id) if not e.undone], "the recovery was undone"
    assert s.stored()[-1].kind == "summary", "the transcript keeps what the recovery wrote, hidden"
    then_next_request_is_valid(s, api)
    COUNTERS.add(api_faults=4)
