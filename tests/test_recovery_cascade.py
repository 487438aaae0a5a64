"""The recovery cascade, through the real ``anthropic`` SDK against the loopback Messages API.

When the API refuses a request as too long (a 400 "prompt is too long", the same as an ``error`` event inside
a 200 stream, or a 413), the agent tries each step in order — prune duplicate tool results, prune the largest
outputs, summarise, drop what precedes the current turn — sending the request again after each step that
changed something, until it is accepted or nothing is left. A recovery that fails undoes everything it applied,
so the session's next request is the one it would have been without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_session import AgentSession
from loopback_api import (
    ErrorResponse,
    LoopbackAPI,
    Reply,
    StreamError,
    check_wire_messages,
    iter_blocks,
    prompt_too_long,
    prompt_too_long_in_stream,
    request_too_large,
    text,
    tool_use,
)

from workbench.engine import events as ev
from workbench.engine.agent.loop import approve_all
from workbench.engine.agent.runner import prepare_run
from workbench.engine.agent.wire import build_request, marked
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction import SUMMARY_PREFIX
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.settings.config import Config
from workbench.engine.settings.limits import ModelLimits
from workbench.engine.transcript.store import Store

MODEL = "claude-sonnet-4-5"
WINDOW = Config(models={MODEL: ModelLimits(context_window=40_000, max_output=2_000)})
"""Small enough that a summary has something older than the kept tail to replace."""
NOTES = [f"Notes part {n}: " + " ".join(f"item{n}x{i} value{i * 7}" for i in range(500)) for n in range(4)]
QUESTION = "What did the files say?"

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


Session = AgentSession


def new_provider(url: str) -> AnthropicProvider:
    return AnthropicProvider(api_key="test-key", base_url=url, base_delay=0.01, max_retries=1)


def answer(*blocks: dict[str, Any]) -> Callable[[dict[str, Any]], Reply]:
    def reply(body: dict[str, Any]) -> Reply:
        return Reply(list(blocks), input_tokens=len(json.dumps(body)) // 4, output_tokens=20)

    return reply


def with_history(store: Store, api: LoopbackAPI, workspace: Path) -> Session:
    """Three file reads (one of them twice: a duplicate) and four long notes, all answered."""
    (workspace / "data.py").write_text("".join(f"value_{i} = {i * 31}\n" for i in range(120)))
    (workspace / "notes.md").write_text("".join(f"- note {i}: keep the table sorted by key {i}\n" for i in range(60)))
    api.queue(
        answer(tool_use("toolu_01", "read_file", {"path": "data.py"})), answer(text("A table of values.")),
        answer(tool_use("toolu_02", "read_file", {"path": "notes.md"})), answer(text("Sorting notes.")),
        answer(tool_use("toolu_03", "read_file", {"path": "data.py"})), answer(text("The same table.")),
        *(answer(text(f"Noted {n}.")) for n in range(len(NOTES))),
    )
    events: list[ev.Event] = []
    setup = prepare_run(store, WINDOW, session_id=None, scripted=None, model=MODEL, workspace=workspace,
                        approve=approve_all, on_event=events.append, provider=new_provider(api.url))
    s = Session(setup.agent, lambda: new_provider(api.url), events, store)
    assert s.send("Read data.py", "Read notes.md", "Read data.py again", *NOTES) == []
    assert not [e for e in store.load_overlay(setup.agent.ctx.session.id)], "nothing changed the context yet"
    events.clear()
    return s


def results(body: dict[str, Any]) -> dict[str, Any]:
    """Each tool result's content in a request body, by call id."""
    return {b["tool_use_id"]: b["content"] for b in iter_blocks(body["messages"], "tool_result")}


def texts(body: dict[str, Any]) -> list[str]:
    return [b["text"] for b in iter_blocks(body["messages"], "text")]


# --- the cascade runs step by step ------------------------------------------------------------------


def test_prompt_too_long_twice_then_success_prunes_duplicates_then_the_largest(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    s = with_history(store, api, workspace)
    first = len(api.bodies)
    api.queue(prompt_too_long(), prompt_too_long(), answer(text("They held a table and notes.")))
    assert s.send(QUESTION) == []

    turn = api.bodies[first:]
    assert len(turn) == 3, "one request after each step that changed something"
    assert [w.kind for w in s.of(ev.Warning)] == ["context_limit", "context_limit"]
    assert [p.strategy for p in s.of(ev.PlanApplied)] == ["recovery: duplicates", "recovery: largest"]
    assert all(p.tokens_saved > 0 for p in s.of(ev.PlanApplied))
    # First the older of the two identical reads, then the largest outputs left.
    assert all(PRUNED_PLACEHOLDER not in c for c in results(turn[0]).values())
    assert results(turn[1])["toolu_01"] == PRUNED_PLACEHOLDER
    assert PRUNED_PLACEHOLDER not in results(turn[1])["toolu_03"]
    assert set(results(turn[2]).values()) == {PRUNED_PLACEHOLDER}
    assert not s.of(ev.CompactionStart) and not s.of(ev.ErrorEvent), "pruning was enough: no summary"
    assert s.stored()[-1].text == "They held a table and notes."
    check_wire_messages(turn[2]["messages"])


def test_the_cascade_goes_on_to_summarise_and_then_truncate(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    s = with_history(store, api, workspace)
    first = len(api.bodies)
    api.queue(prompt_too_long(), prompt_too_long(), prompt_too_long(),
              Reply([text("The user read data.py and notes.md and wrote four notes.")]),  # the summary request
              prompt_too_long(), answer(text("Answered at last.")))
    assert s.send(QUESTION) == []

    turn = api.bodies[first:]
    assert len(turn) == 6
    assert [p.strategy for p in s.of(ev.PlanApplied)] == ["recovery: duplicates", "recovery: largest"]
    assert [(e.trigger, e.summarizer) for e in s.of(ev.CompactionEnd)] == [("recovery", "llm"),
                                                                           ("recovery", "truncation")]
    assert not turn[3].get("tools") and len(turn[3]["messages"]) == 1, "the summary's own request"
    after_summary = texts(turn[4])
    assert after_summary[0].startswith(SUMMARY_PREFIX) and "four notes" in after_summary[0]
    assert after_summary[-1] == QUESTION and len(after_summary) > 2, "the kept tail is still there"
    final = turn[5]
    check_wire_messages(final["messages"])
    assert [m["role"] for m in final["messages"]] == ["user"], "only this turn is left, after the summaries"
    note, summary, question = texts(final)
    assert note.startswith(SUMMARY_PREFIX) and "dropped without a summary" in note
    assert summary == after_summary[0], "the summary made a step before is kept"
    assert question == QUESTION
    [end] = [e for e in s.of(ev.CompactionEnd) if e.summarizer == "truncation"]
    assert end.after_tokens == s.of(ev.BudgetChanged)[-2].used, "what the truncation measured is what it left"
    assert s.stored()[-1].text == "Answered at last."
    for use_checkpoint in (False, True):  # what was sent is what the stored session projects
        ctx = SessionContext.load(store, s.agent.ctx.session.id, WINDOW, use_checkpoint=use_checkpoint)
        # (the request then ended with that message: it carried the cache mark that goes on the last one)
        assert [marked(build_request(ctx.view(), MODEL, 2_000).messages[0])] == final["messages"]
    assert not s.of(ev.ErrorEvent) and all(w.kind != "recovery_undone" for w in s.of(ev.Warning))


@pytest.mark.parametrize("refusal", [prompt_too_long(), prompt_too_long_in_stream(), prompt_too_long_in_stream(3),
                                     request_too_large()],
                         ids=["400", "sse-error-event", "sse-error-event-mid-stream", "413"])
def test_each_form_of_too_long_starts_the_recovery(
    refusal: ErrorResponse | StreamError, store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    s = with_history(store, api, workspace)
    first = len(api.bodies)
    api.queue(refusal, answer(text("Fits now.")))
    assert s.send(QUESTION) == []

    [warning] = s.of(ev.Warning)
    assert warning.kind == "context_limit" and warning.message.startswith("the model rejected the request")
    assert "HTTP 200" not in warning.message
    assert len(api.bodies) - first == 2 and not s.of(ev.Retry), "recovered, not retried as it was"
    assert results(api.bodies[-1])["toolu_01"] == PRUNED_PLACEHOLDER
    assert [m.text for m in s.stored()[-2:]] == [QUESTION, "Fits now."]


# --- a recovery that fails is undone ----------------------------------------------------------------


def test_a_failed_recovery_is_undone_and_the_next_request_is_the_one_before_it(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    s = with_history(store, api, workspace)
    first = len(api.bodies)
    session_id = s.agent.ctx.session.id
    messages_before = len(s.stored())
    api.queue(prompt_too_long(), prompt_too_long(), prompt_too_long(), Reply([text("A summary.")]),
              prompt_too_long(), prompt_too_long())
    [failure] = s.send(QUESTION)

    assert len(api.bodies) - first == 6, "every step was tried, and nothing after the last"
    message = str(failure)
    assert "\n" not in message and "prompt is too long" in message
    assert message.endswith("recovery did not free enough context (pruned duplicate tool results, pruned the "
                            "largest tool outputs, summarised the conversation, dropped the messages before "
                            "this turn; undone)")
    [error] = s.of(ev.ErrorEvent)
    assert error.message == message and s.events[-1] == error
    [undone] = [w for w in s.of(ev.Warning) if w.kind == "recovery_undone"]
    assert s.events.index(undone) < s.events.index(error)
    overlay = store.load_overlay(session_id)
    assert overlay and all(e.undone for e in overlay), "every recovery change is undone, none deleted"
    stored = s.stored()
    assert [m.kind for m in stored[messages_before:]] == ["message", "compact_boundary", "summary",
                                                          "compact_boundary", "summary"]
    # The context, live and as stored, is what was first sent: the prompt stays, the recovery is gone.
    refused = api.bodies[first]
    for ctx in (s.agent.ctx, SessionContext.load(store, session_id, WINDOW),
                SessionContext.load(store, session_id, WINDOW, use_checkpoint=True)):
        assert build_request(ctx.view(), MODEL, 2_000).messages == refused["messages"]

    api.queue(answer(text("Here again.")))
    assert s.send("Shorter question?") == []
    body = api.bodies[-1]
    check_wire_messages(body["messages"])
    assert body["messages"][:-1] == refused["messages"][:-1]
    assert texts(body)[-2:] == [QUESTION, "Shorter question?"]
    assert s.stored()[-1].text == "Here again."


def test_a_different_failure_after_a_recovery_step_undoes_it_too(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    s = with_history(store, api, workspace)
    api.queue(prompt_too_long(), ErrorResponse(400, "invalid_request_error", "messages: something else is wrong"))
    [failure] = s.send(QUESTION)

    assert str(failure) == "model call failed (HTTP 400 invalid_request_error: messages: something else is wrong)"
    assert [p.strategy for p in s.of(ev.PlanApplied)] == ["recovery: duplicates"]
    assert all(e.undone for e in store.load_overlay(s.agent.ctx.session.id))
    assert s.events[-1] == s.of(ev.ErrorEvent)[-1]
