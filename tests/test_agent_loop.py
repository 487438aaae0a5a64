"""The real agent loop, talking through the real Anthropic SDK to a loopback Messages API.

What these tests hold the engine to:

* every request sent is the projection the budget counted — the body the server
  received equals ``build_request`` of the engine's view at that moment, equals a
  projection rebuilt from scratch out of what the SQLite store holds, and the
  budget's ``used`` is that view's sum;
* every fault shows up as events a user can read (retries with attempt numbers,
  the context-limit recovery, a final error);
* the store never holds half a response, every stored tool call has its result,
  and the session carries on with a valid request after a failure;
* usage is stored with the estimate the budget showed; ``[PERSIST]`` is stripped
  from what is sent and pins both the message and its answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import sqlite_db
from loopback_api import (
    Dropped,
    LoopbackAPI,
    Reply,
    check_wire_messages,
    iter_blocks,
    overloaded,
    prompt_too_long,
    rate_limited,
    text,
    thinking,
    tool_use,
    unauthorized,
)

from workbench.engine import events as ev
from workbench.engine.agent.loop import Agent, approve_all
from workbench.engine.agent.model_call import AgentError
from workbench.engine.agent.prompt import BASE_INSTRUCTIONS, fixed_items
from workbench.engine.agent.runner import prepare_run
from workbench.engine.agent.tools import builtin_tools
from workbench.engine.agent.wire import build_request
from workbench.engine.context.projection import PRUNED_PLACEHOLDER, ContextView
from workbench.engine.context.session import SessionContext
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.providers.base import ModelRequest
from workbench.engine.settings.config import Config
from workbench.engine.settings.limits import ModelLimits
from workbench.engine.transcript.models import Message, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

MODEL = "claude-sonnet-4-5"
MAX_OUTPUT = 32_000
"""What the agent asks this model for: its output reserve, min(its 64K maximum, 32,000) (spec 001 §3)."""

APP = "def add(a, b):\n    return a - b\n"

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


# --- the agent, observed --------------------------------------------------------


@dataclass
class Call:
    """One model call, as the engine saw it just before sending."""

    request: ModelRequest
    view: ContextView
    used: int
    messages: int
    events: int


class RecordingProvider(AnthropicProvider):
    """The real provider; it also notes the engine's view and budget at each call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.agent: Agent | None = None
        self.calls: list[Call] = []

    async def stream(self, request: ModelRequest):  # type: ignore[override]
        assert self.agent is not None
        ctx = self.agent.ctx
        self.calls.append(Call(request, ctx.view(), ctx.budget().used, len(ctx.messages), len(ctx.events)))
        async for item in super().stream(request):
            yield item

    async def close(self) -> None:
        await self._client.close()


@dataclass
class Harness:
    agent: Agent
    provider: RecordingProvider
    events: list[ev.Event]
    store: Store

    @property
    def session_id(self) -> str:
        return self.agent.ctx.session.id

    def send(self, *texts: str) -> None:
        """Send each message in turn, in one event loop; the SDK client is closed inside it."""

        async def go() -> None:
            try:
                for message in texts:
                    await self.agent.send(message)
            finally:
                await self.provider.close()

        asyncio.run(go())

    def of(self, kind: type[ev._Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def stored(self) -> list[Message]:
        return self.store.load_messages(self.session_id)


def harness(store: Store, api: LoopbackAPI, workspace: Path, config: Config | None = None,
            **provider_kwargs: Any) -> Harness:
    events: list[ev.Event] = []
    provider = RecordingProvider(api_key="test-key", base_url=api.url, base_delay=0.01, **provider_kwargs)
    setup = prepare_run(store, config or Config(), session_id=None, scripted=None, model=MODEL,
                        workspace=workspace, approve=approve_all, on_event=events.append, provider=provider)
    provider.agent = setup.agent
    return Harness(setup.agent, provider, events, store)


def reported_input(body: dict[str, Any]) -> int:
    """What the loopback "API" reports as a request's input: about four characters a token."""
    return len(json.dumps(body)) // 4


def answer(*blocks: dict[str, Any], output_tokens: int = 30) -> Callable[[dict[str, Any]], Reply]:
    """A reply whose usage splits the request's input into cache reads (90%) and new input."""

    def reply(body: dict[str, Any]) -> Reply:
        total = reported_input(body)
        return Reply(list(blocks), input_tokens=total - total * 9 // 10, cache_read_input_tokens=total * 9 // 10,
                     output_tokens=output_tokens)

    return reply


def sent(body: dict[str, Any]) -> dict[str, Any]:
    """A server-side body without the transport's ``stream`` flag."""
    return {k: v for k, v in body.items() if k != "stream"}


def rebuilt_request(
    store: Store, session_id: str, call: Call, tools: list[dict[str, Any]]
) -> tuple[ModelRequest, int]:
    """The request for ``call`` projected from scratch out of the stored transcript and overlay."""
    session = store.get_session(session_id)
    messages = store.load_messages(session_id)[: call.messages]
    overlay = store.load_overlay(session_id)[: call.events]
    counter = TokenCounter()
    ctx = SessionContext(session, messages, overlay, counter,
                         fixed_items=fixed_items(counter, BASE_INSTRUCTIONS, tools))
    return build_request(ctx.view(), MODEL, MAX_OUTPUT), ctx.budget().used


def assert_no_dangling_tool_calls(messages: Sequence[Message]) -> None:
    calls = {p.id for m in messages for p in m.parts if isinstance(p, ToolUsePart)}
    results = {p.tool_use_id for m in messages for p in m.parts if isinstance(p, ToolResultPart)}
    assert calls == results, f"calls without results: {calls - results}; results without calls: {results - calls}"


# --- (1) what was sent is what was counted -------------------------------------------


def test_multi_turn_requests_are_the_projection_the_budget_counted(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(
        answer(thinking("add() subtracts; read it first.", "sig-1"), text("Let me read app.py."),
               tool_use("toolu_01", "read_file", {"path": "app.py"})),
        answer(tool_use("toolu_02", "edit_file", {"path": "app.py", "old": "return a - b", "new": "return a + b"})),
        answer(text("Fixed: add() now returns a + b.")),
        answer(text("Nothing else; that was the only bug.")),
    )
    h = harness(store, api, workspace)
    h.send("Fix add() in app.py", "Anything else?")

    assert (workspace / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    bodies = api.bodies
    assert len(bodies) == len(h.provider.calls) == 4

    for number, (body, call) in enumerate(zip(bodies, h.provider.calls, strict=True)):
        # The server got exactly what the engine rendered from its view ...
        assert body["stream"] is True
        assert sent(body) == call.request.body() == build_request(call.view, MODEL, MAX_OUTPUT).body(), number
        # ... the budget counted exactly that view, and told the provider so ...
        assert call.used == call.view.total == sum(item.tokens for item in call.view.items), number
        assert call.request.estimated_input_tokens == call.used, number
        # ... and a projection rebuilt from the store alone gives the same request and count.
        # (tool definitions are not stored: take the ones the prompt builder chose for this request)
        rebuilt, rebuilt_used = rebuilt_request(store, h.session_id, call, call.request.tools)
        assert rebuilt.body() == sent(body), number
        assert rebuilt_used == call.used, number
        check_wire_messages(body["messages"])
        assert body["system"] == [{"type": "text", "text": BASE_INSTRUCTIONS, "cache_control": {"type": "ephemeral"}}]
        # the built-in tools, then the model's own pruning tools (DCP is on for a main session)
        assert [t["name"] for t in body["tools"]] == [*builtin_tools().tools, "prune", "distill"]
        assert (body["model"], body["max_tokens"]) == (MODEL, MAX_OUTPUT)

    # The contents, spelled out; the last message of each carries the cache mark (spec 001: each step reads the
    # conversation before it from the cache), and only the last.
    mark = {"cache_control": {"type": "ephemeral"}}
    assert all(json.dumps(b["messages"][:-1]).count("cache_control") == 0 for b in bodies)
    assert bodies[0]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Fix add() in app.py",
                                                                   **mark}]}]
    assert bodies[1]["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "add() subtracts; read it first.", "signature": "sig-1"},
        {"type": "text", "text": "Let me read app.py."},
        {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "app.py"}},
    ]
    [read] = bodies[1]["messages"][2]["content"]
    assert read["tool_use_id"] == "toolu_01" and "return a - b" in read["content"] and "is_error" not in read
    assert bodies[2]["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_02", "content": "edited app.py", **mark}
    ]
    assert [m["role"] for m in bodies[3]["messages"]] == ["user", "assistant"] * 3 + ["user"]
    assert bodies[3]["messages"][-1]["content"] == [{"type": "text", "text": "Anything else?", **mark}]
    assert bodies[3]["messages"][-2]["content"] == [{"type": "text", "text": "Fixed: add() now returns a + b."}]

    # After the first report the budget is anchored on what the API said the context was.
    first_reported = reported_input(bodies[0])
    assert h.provider.calls[0].view.estimate_source == "estimated"
    assert h.provider.calls[1].view.estimate_source == "calibrated"  # anchored on the report, plus what came after
    assert h.provider.calls[1].used >= first_reported
    used = [c.used for c in h.provider.calls]
    assert used == sorted(used) and len(set(used)) == 4, used


def test_usage_is_stored_with_the_estimate_the_budget_showed(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(
        answer(tool_use("toolu_01", "read_file", {"path": "app.py"}), output_tokens=41),
        answer(text("It subtracts."), output_tokens=7),
    )
    h = harness(store, api, workspace)
    h.send("What does add() do?")

    rows = list(sqlite_db(store).query(
        "SELECT u.* FROM usage_records u JOIN messages m ON m.session_id = u.session_id AND m.id = u.message_id "
        "WHERE u.session_id = ? ORDER BY m.idx", [h.session_id]))
    assert len(rows) == 2
    for row, body, call, output in zip(rows, api.bodies, h.provider.calls, (41, 7), strict=True):
        total = reported_input(body)
        assert (row["input_tokens"], row["cache_read_input_tokens"], row["cache_creation_input_tokens"]) == (
            total - total * 9 // 10, total * 9 // 10, 0)
        assert row["output_tokens"] == output
        assert row["model"] == MODEL and row["synthetic"] == 0
        assert row["estimated_input"] == call.used, "the stored estimate is the budget shown before the request"
    reported = h.of(ev.UsageReported)
    assert [(u.input_tokens + u.cache_read_input_tokens, u.output_tokens) for u in reported] == [
        (reported_input(b), o) for b, o in zip(api.bodies, (41, 7), strict=True)]
    assert [u.estimated_input_tokens for u in reported] == [c.used for c in h.provider.calls]


# --- (2) faults, as a user sees them -----------------------------------------------


def test_retries_are_events_with_attempt_numbers(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(rate_limited(retry_after="0.02"), overloaded(), answer(text("Here at last.")))
    h = harness(store, api, workspace)
    h.send("hello")

    retries = h.of(ev.Retry)
    assert [(r.attempt, r.reason) for r in retries] == [(1, "HTTP 429"), (2, "HTTP 529")]
    assert retries[0].delay == pytest.approx(0.02)
    assert 0.02 <= retries[1].delay <= 0.025  # base 0.01 × 2, plus jitter
    kinds = [e.type for e in h.events]
    assert kinds.index("retry") > kinds.index("turn_start")
    assert kinds[-2:] == ["turn_end", "budget"]
    assert [m.role for m in h.stored()] == ["user", "assistant"]
    assert h.stored()[1].text == "Here at last."
    assert len(api.bodies) == 3 and api.bodies[0] == api.bodies[1] == api.bodies[2]


def test_context_limit_on_first_call_with_nothing_to_compact_retries_as_it_is(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(prompt_too_long(), answer(text("Short answer.")))
    h = harness(store, api, workspace)
    h.send("hello")

    warnings = [w for w in h.of(ev.Warning) if w.kind == "context_limit"]
    assert len(warnings) == 1 and "prompt is too long" in warnings[0].message
    # One message: a summary of nothing would only make the context bigger (spec 001 §6), so none is made.
    assert not h.of(ev.CompactionStart) and not h.of(ev.CompactionEnd)
    [nothing] = [w for w in h.of(ev.Warning) if w.kind == "compaction"]
    assert nothing.message.startswith("nothing to compact")
    kinds = [e.type for e in h.events]
    assert kinds.index("warning") < kinds.index("text_delta")
    assert not h.of(ev.ErrorEvent)
    # The retry is the same request, and the answer was stored.
    assert sent(api.bodies[1]) == sent(api.bodies[0])
    assert h.stored()[-1].role == "assistant" and h.stored()[-1].text == "Short answer."
    check_wire_messages(api.bodies[1]["messages"])


def test_context_limit_prunes_tool_results_and_retries(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    (workspace / "data.py").write_text("".join(f"value_{i} = {i * 31}\n" for i in range(120)))  # ~3 KB: inline
    api.queue(
        answer(tool_use("toolu_01", "read_file", {"path": "data.py"})),
        answer(text("It is a table of values.")),
        prompt_too_long(),
        answer(text("Done.")),
    )
    h = harness(store, api, workspace)
    h.send("Read data.py", "Now what?")

    assert [w.kind for w in h.of(ev.Warning)] == ["context_limit"]
    prunes = [e for e in store.load_overlay(h.session_id) if e.action == "prune"]
    assert len(prunes) == 1
    assert prunes[0].origin == "strategy" and prunes[0].reason.startswith("recovery:")
    assert not h.of(ev.CompactionStart), "pruning freed enough; no summary needed"
    before, after = api.bodies[2], api.bodies[3]
    [original] = [b for b in iter_blocks(before["messages"], "tool_result")]
    [pruned] = [b for b in iter_blocks(after["messages"], "tool_result")]
    assert "value_119 = 3689" in original["content"]
    assert pruned == {"type": "tool_result", "tool_use_id": "toolu_01", "content": PRUNED_PLACEHOLDER}
    # The budget shows the saving at once, though the last reported total still held the full result.
    item_before = h.provider.calls[2].view.item_for(prunes[0].message_id)
    item_after = h.provider.calls[3].view.item_for(prunes[0].message_id)
    assert item_before is not None and item_after is not None
    saved = item_before.tokens - item_after.tokens
    assert saved > 500
    assert h.provider.calls[2].used - h.provider.calls[3].used == pytest.approx(saved, abs=5)
    # Nothing left the transcript: the full result is still stored.
    [stored_result] = [p for m in h.stored() for p in m.parts if isinstance(p, ToolResultPart)]
    assert "value_119 = 3689" in stored_result.text
    assert h.stored()[-1].text == "Done."


def test_context_limit_twice_is_an_error_event_and_agent_error(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(prompt_too_long(), prompt_too_long())
    h = harness(store, api, workspace)
    with pytest.raises(AgentError) as info:
        h.send("hello")
    assert "prompt is too long" in str(info.value)
    [error] = h.of(ev.ErrorEvent)
    assert "prompt is too long" in error.message
    assert h.events[-1] == error
    assert len(api.bodies) == 2
    assert [m.role for m in h.stored() if m.kind == "message"] == ["user"], "no assistant message was stored"


def test_exhausted_retries_are_an_error_event(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(overloaded(), overloaded())
    h = harness(store, api, workspace, max_retries=1)
    with pytest.raises(AgentError) as info:
        h.send("hello")
    assert [r.attempt for r in h.of(ev.Retry)] == [1]
    [error] = h.of(ev.ErrorEvent)
    assert error.message == str(info.value) == "model call failed after 2 attempts (HTTP 529 overloaded_error: Overloaded)"


def test_unauthorized_is_an_error_event_naming_the_key(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(unauthorized())
    h = harness(store, api, workspace)
    with pytest.raises(AgentError, match="ANTHROPIC_API_KEY"):
        h.send("hello")
    assert not h.of(ev.Retry)
    assert "ANTHROPIC_API_KEY" in h.of(ev.ErrorEvent)[0].message


def test_the_configured_timeout_ends_a_stalled_call(
    store: Store, api: LoopbackAPI, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[provider] timeout`` reaches the SDK client: a call that hangs is a retried failure, not a hang."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)

    def stalled(body: dict[str, Any]) -> Reply:
        time.sleep(3)
        return Reply([text("too late")])

    api.queue(stalled, stalled)
    config = Config(provider={"timeout": 0.5, "max_retries": 1, "base_delay": 0.01})
    events: list[ev.Event] = []
    setup = prepare_run(store, config, session_id=None, scripted=None, model=MODEL, workspace=workspace,
                        approve=approve_all, on_event=events.append)
    assert isinstance(setup.agent.provider, AnthropicProvider)

    async def go() -> None:
        try:
            await setup.agent.send("hello")
        finally:
            await setup.agent.provider.aclose()

    with pytest.raises(AgentError, match="after 2 attempts.*timed out"):
        asyncio.run(go())
    assert [e.reason for e in events if isinstance(e, ev.Retry)] == ["connection: APITimeoutError"]


def test_an_empty_answer_is_a_warning_and_the_session_goes_on(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(Reply([]), Reply([text("Here it is.")]))
    h = harness(store, api, workspace)
    h.send("hello", "are you there?")
    [warning] = [w for w in h.of(ev.Warning) if w.kind == "empty_response"]
    assert warning.message == "the model returned an empty response (stop reason: end_turn)"
    check_wire_messages(h.provider.calls[-1].request.messages)
    assert [m.role for m in h.stored()] == ["user", "assistant", "user", "assistant"]
    assert h.stored()[-1].text == "Here it is."


# --- (3) what is stored after a fault --------------------------------------------


def test_dropped_stream_stores_one_whole_answer(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    final = Reply([thinking("Plan: read, then answer.", "sig-9"), text("add() subtracts instead of adding.")],
                  input_tokens=500, output_tokens=25)
    api.queue(answer(tool_use("toolu_01", "read_file", {"path": "app.py"})), Dropped(final, after_events=7), final)
    h = harness(store, api, workspace)
    h.send("What is wrong with add()?")

    [retry] = h.of(ev.Retry)
    assert retry.reason.startswith("connection:")
    stored = h.stored()
    assert [(m.role, m.kind) for m in stored] == [
        ("user", "message"), ("assistant", "message"), ("user", "tool_result"), ("assistant", "message")]
    assert stored[-1].text == "add() subtracts instead of adding."
    assert [p.kind for p in stored[-1].parts] == ["thinking", "text"]
    assert_no_dangling_tool_calls(stored)
    # Text streamed after the retry notice is the answer exactly once.
    after = h.events[h.events.index(retry) + 1 :]
    assert "".join(e.text for e in after if isinstance(e, ev.TextDelta)) == "add() subtracts instead of adding."
    # One usage record per stored answer, none for the broken attempt.
    assert sqlite_db(store).execute("SELECT COUNT(*) FROM usage_records WHERE session_id = ?",
                            [h.session_id]).fetchone()[0] == 2


def test_failure_after_a_tool_call_leaves_a_session_that_continues(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(
        answer(tool_use("toolu_01", "read_file", {"path": "app.py"}), tool_use("toolu_02", "list_files", {})),
        Dropped(Reply([text("never finished")]), after_events=4),
        overloaded(),
    )
    h = harness(store, api, workspace, max_retries=1)
    with pytest.raises(AgentError):
        h.send("Look around")
    stored = h.stored()
    assert [(m.role, m.kind) for m in stored] == [("user", "message"), ("assistant", "message"), ("user", "tool_result")]
    assert_no_dangling_tool_calls(stored)
    assert not any("never finished" in m.text for m in stored)

    # The same session carries on: a new agent over the stored session, as a restart would make.
    api.queue(answer(text("Carrying on.")))
    events: list[ev.Event] = []
    provider = RecordingProvider(api_key="test-key", base_url=api.url, base_delay=0.01)
    setup = prepare_run(store, Config(), session_id=h.session_id, scripted=None, model=MODEL, workspace=workspace,
                        approve=approve_all, on_event=events.append, provider=provider)
    provider.agent = setup.agent
    Harness(setup.agent, provider, events, store).send("Please continue")

    body = api.bodies[-1]
    check_wire_messages(body["messages"])
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[-1]["text"] == "Please continue"
    assert store.load_messages(h.session_id)[-1].text == "Carrying on."


def test_a_failed_turn_then_a_new_message_is_a_valid_request(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(prompt_too_long(), prompt_too_long(), answer(text("Back again.")))
    h = harness(store, api, workspace)
    failures: list[AgentError] = []

    async def go() -> None:
        try:
            try:
                await h.agent.send("first try")
            except AgentError as exc:
                failures.append(exc)
            await h.agent.send("second try")
        finally:
            await h.provider.close()

    asyncio.run(go())
    assert len(failures) == 1
    body = api.bodies[-1]
    check_wire_messages(body["messages"])
    user_text = [b["text"] for b in iter_blocks(body["messages"], "text")]
    assert user_text[-2:] == ["first try", "second try"]
    assert h.stored()[-1].text == "Back again."


# --- (5) [PERSIST] ----------------------------------------------------------------


def test_persist_tag_is_stripped_and_pins_message_and_answer(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(answer(text("Understood: tabs only.")), answer(text("ok")))
    h = harness(store, api, workspace)
    h.send("[PERSIST] Always indent with tabs.", "Say ok")

    assert api.bodies[0]["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Always indent with tabs.", "cache_control": {"type": "ephemeral"}}]}]
    assert "[PERSIST]" not in json.dumps(api.bodies)
    stored = h.stored()
    pins = [e for e in store.load_overlay(h.session_id) if e.action == "pin"]
    assert {e.message_id for e in pins} == {stored[0].id, stored[1].id}
    assert {e.origin for e in pins} == {"persist-tag"}
    assert stored[0].source.get("persist_tag") is True
    view = h.agent.ctx.view()
    assert "PERSIST" in view.item_for(stored[0].id).badges
    assert "PERSIST" in view.item_for(stored[1].id).badges
    assert "PERSIST" not in view.item_for(stored[2].id).badges


def test_pinned_messages_survive_compaction(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    config = Config(models={MODEL: ModelLimits(context_window=24_000, max_output=2_000)})
    bulky = [f"Notes part {n}: " + " ".join(f"item{n}x{i} value{i * 7}" for i in range(700)) for n in range(3)]
    api.queue(answer(text("Understood: tabs only.")), *(answer(text(f"Noted {n}.")) for n in range(3)),
              answer(text("The user shared three sets of notes.")),  # the compaction's (LLM) summary
              answer(text("Still tabs.")))
    h = harness(store, api, workspace, config=config)

    async def go() -> None:
        try:
            await h.agent.send("[PERSIST] Always indent with tabs.")
            for note in bulky:
                await h.agent.send(note)
            plan = await h.agent.compact("manual")
            assert plan is not None and plan.summarized, "the oldest notes were summarised"
            await h.agent.send("Which indentation?")
        finally:
            await h.provider.close()

    asyncio.run(go())
    body = api.bodies[-1]
    check_wire_messages(body["messages"])
    texts = [b["text"] for b in iter_blocks(body["messages"], "text")]
    assert "Always indent with tabs." in texts and "Understood: tabs only." in texts
    assert any(t.startswith("[Previous conversation summary]") for t in texts)
    assert bulky[0] not in texts, "an unpinned old message was compacted away"
    assert texts[-1] == "Which indentation?"
    assert h.provider.calls[-1].used < h.provider.calls[-2].used
