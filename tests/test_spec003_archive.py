"""Spec 003, "Tool Result Summarization": old tool results archived behind a digest, automatically past a
cutoff of ten, the digest written by the summariser when one is configured (issue 20 item 8;
``docs/spec-conformance.md``).

The agent runs for real: offline with a scripted provider (the heuristic digest), and through the real
``anthropic`` SDK against the loopback Messages API where the model writes the digest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compaction_helpers import MODEL
from loopback_api import LoopbackAPI, Reply, server_error, text, tool_use
from test_strategies_common import Transcript, big

from workbench.engine import events as ev
from workbench.engine.agent.loop import approve_all
from workbench.engine.agent.runner import prepare_run
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply
from workbench.engine.plans.plan import undo
from workbench.engine.plans.strategies.archive import DIGEST_HEADER, plan_archive
from workbench.engine.plans.strategies.archive_digest import INPUT_CHARS, OUTPUT_CHARS, SYSTEM
from workbench.engine.plans.strategies.registry import automatic_plans
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.providers.scripted import Script, ScriptedProvider
from workbench.engine.settings.config import Config
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import Message, ToolResultPart
from workbench.engine.transcript.store import Store

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

AT_ANY_SHARE = StrategiesConfig.model_validate({"archive": {"automatic_from": 0}})
"""Spec 003's own rule: archive by the count of results, whatever share of the window is in use (the
default waits for half the window: see the test of that)."""


def _files(workspace: Path, count: int, size: int) -> list[str]:
    names = []
    for n in range(count):
        name = f"notes{n}.txt"
        (workspace / name).write_text("".join(f"{name} line {k}: {'x' * 50}\n" for k in range(size // 70)))
        names.append(name)
    return names


def _digests(ctx: SessionContext) -> list[Message]:
    return [m for m in ctx.messages if m.kind == "tool_summary"]


def _visible_results(body_messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in body_messages if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result")


# --- automatic past the cutoff, the offline digest ----------------------------------------------------------


def test_spec003_archive_is_automatic_past_the_cutoff(store: Store, workspace: Path) -> None:
    """Forty reads, one a step: each time a batch of ten is past the cutoff, the oldest are archived before
    the next request, far below the 70% from which the other automatic strategies run; the digest carries
    spec 003's header and metadata (user role, agent-visible, user-hidden, kind tool_summary). Each pass's
    digest replaces the one before: one digest in view, three passes for thirty archived results."""
    names = _files(workspace, 40, 2_000)
    responses = [[{"tool": "read_file", "input": {"path": name}}] for name in names] + [[{"text": "Read them all."}]]
    provider = ScriptedProvider(Script.model_validate({"name": "spec", "turns": [{"user": "go",
                                                                                  "responses": responses}]}))
    events: list[ev.Event] = []
    setup = prepare_run(store, Config(strategies=AT_ANY_SHARE), session_id=None, scripted=None, model=MODEL, workspace=workspace,
                        provider=provider, approve=approve_all, on_event=events.append)
    asyncio.run(setup.agent.send("read the notes"))
    ctx = setup.agent.ctx

    assert [e.strategy for e in events if isinstance(e, ev.PlanApplied)] == ["archive"] * 3
    assert len(_digests(ctx)) == 3
    in_view = [m for m in _digests(ctx) if ctx.view().item_for(m.id) is not None]
    assert len(in_view) == 1 and in_view[0].text.startswith(f"{DIGEST_HEADER} 30 older tool results")
    assert "notes0.txt" in in_view[0].text, "the earlier digests' lines are carried into the new one"
    assert ctx.overlay.archived, "nothing was archived"
    assert ctx.budget().percent < 50, "archiving at any share does not wait for either automatic_from"
    for digest in _digests(ctx):
        assert (digest.role, digest.agent_visible, digest.user_visible) == ("user", True, False)
        assert digest.text.startswith(DIGEST_HEADER + " ") and DIGEST_HEADER == "[Compaction tool digest]"
        assert digest.source["summarizer"] == "heuristic" and len(digest.text) <= 800
    # The model never saw more than ten results after the first archive, nor an archived one again.
    archived_reads = {p.tool_use_id for m in ctx.messages if m.id in ctx.overlay.archived
                      for p in m.parts if isinstance(p, ToolResultPart)}
    last = provider.requests[-1].messages
    assert _visible_results(last) <= 10
    assert not archived_reads & {b["tool_use_id"] for m in last if isinstance(m["content"], list)
                                 for b in m["content"] if b.get("type") == "tool_result"}
    assert len(store.load_messages(ctx.session.id)) == len(ctx.messages)  # the transcript keeps everything


def test_spec003_archive_manual_mode_leaves_the_results() -> None:
    t = Transcript()
    t.user("go")
    for k in range(20):
        t.call("Bash", {"command": f"step {k}"}, big(f"output {k}", 200))
    ctx = t.context()
    assert [p.strategy for p in automatic_plans(ctx, AT_ANY_SHARE, window=False)] == ["archive"]
    manual = StrategiesConfig.model_validate({"archive": {"mode": "manual"}})
    assert automatic_plans(ctx, manual, window=False) == []


def test_spec003_an_archive_waits_until_it_saves_more_than_its_digest_costs() -> None:
    """A deviation (docs/spec-conformance.md): archiving one small result behind a longer digest would grow
    the context, so the automatic path waits until enough results are past the cutoff."""
    def results(count: int) -> SessionContext:
        t = Transcript()
        t.user("go")
        for k in range(count):
            t.call("Bash", {"command": f"s{k}"}, "ok")
        return t.context()

    assert plan_archive(results(11), StrategiesConfig()).items, "the planner alone would archive one"
    assert automatic_plans(results(11), AT_ANY_SHARE, window=False) == []
    assert automatic_plans(results(40), AT_ANY_SHARE, window=False), "thirty past the cutoff pay for it"


def test_archiving_waits_for_a_batch_and_the_new_digest_replaces_the_last(store: Store) -> None:
    """Nineteen results: one short of a batch past the cutoff, nothing is archived automatically; twenty:
    ten go. The next batch's digest stands for all twenty and replaces the first; undoing that pass shows
    the first digest again."""
    t = Transcript()
    t.user("go")
    for k in range(19):
        t.call("Bash", {"command": f"step {k}"}, big(f"output {k}", 200))
    assert automatic_plans(t.context(), AT_ANY_SHARE, window=False) == []
    t.call("Bash", {"command": "step 19"}, big("output 19", 200))
    ctx = t.stored(store)
    [first] = automatic_plans(ctx, AT_ANY_SHARE, window=False)
    assert sum(1 for i in first.items if i.action == "archive") == 20  # ten calls and their ten results
    apply(store, ctx, first)
    for k in range(20, 30):
        t.call("Bash", {"command": f"step {k}"}, big(f"output {k}", 200))
    store.save_messages(t.messages[-20:], ctx.counter)
    ctx = SessionContext.load(store, ctx.session.id)
    [second] = automatic_plans(ctx, AT_ANY_SHARE, window=False)
    apply(store, ctx, second)

    def shown_digests(context: SessionContext) -> list[str]:
        return [m.text for m in context.messages if m.kind == "tool_summary" and context.view().item_for(m.id)]

    [text_] = shown_digests(SessionContext.load(store, ctx.session.id))
    assert text_.startswith(f"{DIGEST_HEADER} 20 older tool results") and "step 0" in text_ and "step 19" in text_
    assert undo(store, SessionContext.load(store, ctx.session.id)).plan_id == second.plan_id
    [text_] = shown_digests(SessionContext.load(store, ctx.session.id))
    assert text_.startswith(f"{DIGEST_HEADER} 10 older tool results")


def test_archiving_waits_for_half_the_window_by_default() -> None:
    """Hiding results from a window that is nearly empty saves nothing it needs: by default the automatic
    path archives from half the effective window on, however many results are past the cutoff."""
    t = Transcript()
    t.user("go")
    for k in range(30):
        t.call("Bash", {"command": f"step {k}"}, big(f"output {k}", 200))
    budget = t.context().budget()
    t.session.context_window = round(3 * budget.used) + budget.output_reserve  # a third of it in use
    assert automatic_plans(t.context(), StrategiesConfig(), window=False) == []
    t.session.context_window = round(1.5 * budget.used) + budget.output_reserve  # two thirds
    assert [p.strategy for p in automatic_plans(t.context(), StrategiesConfig(), window=False)] == ["archive"]


def test_spec003_the_heuristic_digest_is_clipped_to_800_characters_head_and_tail() -> None:
    t = Transcript()
    t.user("go")
    for k in range(60):
        t.call("Bash", {"command": f"step {k}"}, big(f"output {k}", 200))
    text_ = plan_archive(t.context(), StrategiesConfig()).items[-1].data["new_message"]["text"]
    assert len(text_) == 800 and text_.startswith(DIGEST_HEADER) and "step 49" in text_  # the newest archived


# --- the digest written by the model ------------------------------------------------------------------------


def _agent_replies(names: list[str]) -> Iterator[Reply]:
    """Six reads in one step (18,000 characters), five in the next: eleven visible, the first six go."""
    yield Reply([tool_use(f"toolu_a{n}", "read_file", {"path": name}) for n, name in enumerate(names[:6])])
    yield Reply([tool_use(f"toolu_b{n}", "read_file", {"path": name}) for n, name in enumerate(names[6:])])
    yield Reply([text("Read them all.")])


def _run_with_api(store: Store, workspace: Path, api: LoopbackAPI, digest: Any,
                  config: Config | None = None) -> tuple[SessionContext, list[ev.Event]]:
    """Archiving after each result past the cutoff (``batch = 1``): one pass, whose digest the model writes."""
    config = config or Config()
    config = config.model_copy(update={"strategies": config.strategies.model_copy(update={
        "archive": config.strategies.archive.model_copy(update={"batch": 1, "automatic_from": 0})})})
    names = _files(workspace, 11, 3_000)
    replies = _agent_replies(names)

    def answer(body: dict[str, Any]) -> Any:
        system = body.get("system") or []
        if system and system[0].get("text") == SYSTEM:
            return digest
        return next(replies)

    api.queue(*([answer] * 12))
    events: list[ev.Event] = []

    async def go() -> SessionContext:
        provider = AnthropicProvider(api_key="test-key", base_url=api.url, base_delay=0.01, max_retries=0)
        try:
            setup = prepare_run(store, config or Config(), session_id=None, scripted=None, model=MODEL,
                                workspace=workspace, approve=approve_all, on_event=events.append, provider=provider)
            await setup.agent.send("read the notes")
            return setup.agent.ctx
        finally:
            await provider.aclose()

    return asyncio.run(go()), events


def _digest_requests(api: LoopbackAPI) -> list[dict[str, Any]]:
    return [b for b in api.bodies if (b.get("system") or [{}])[0].get("text") == SYSTEM]


def test_spec003_the_digest_is_written_by_the_summariser_and_clipped(store: Store, workspace: Path,
                                                                    api: LoopbackAPI) -> None:
    """The session's model writes the digest, tool-less; it reads at most 12,000 characters of the archived
    results and its answer is clipped to 1,200 characters after the header."""
    ctx, events = _run_with_api(store, workspace, api, Reply([text("Digest. " + "d" * 5_000)]))
    [request] = _digest_requests(api)
    assert "tools" not in request or not request["tools"]
    asked = request["messages"][0]["content"][0]["text"]
    assert len(asked) == INPUT_CHARS and "notes0.txt" in asked and "notes6.txt" not in asked
    [digest] = _digests(ctx)
    header, body = digest.text.split("\n", 1)
    assert header.startswith(DIGEST_HEADER) and "6 older tool results" in header
    assert body.startswith("Digest. ddd") and len(body) == OUTPUT_CHARS
    assert (digest.source["summarizer"], digest.source["model"]) == ("llm", MODEL)
    assert len(ctx.overlay.archived) == 2  # the call with six reads, and the message of their results
    assert not [e for e in events if isinstance(e, ev.Warning) and e.kind == "archive"]
    assert _visible_results(api.bodies[-1]["messages"]) == 5


def test_spec003_a_failed_model_digest_falls_back_to_the_heuristic(store: Store, workspace: Path,
                                                                   api: LoopbackAPI) -> None:
    ctx, events = _run_with_api(store, workspace, api, server_error())
    [digest] = _digests(ctx)
    assert digest.source["summarizer"] == "heuristic" and digest.text.startswith(DIGEST_HEADER)
    assert any(isinstance(e, ev.Warning) and e.kind == "archive" and "offline digest" in e.message for e in events)
    assert ctx.overlay.archived


def test_spec003_summary_heuristic_never_asks_the_model(store: Store, workspace: Path, api: LoopbackAPI) -> None:
    config = Config.model_validate({"strategies": {"archive": {"summary": "heuristic"}}})
    ctx, _ = _run_with_api(store, workspace, api, Reply([text("unused")]), config)
    assert not _digest_requests(api)
    assert [d.source["summarizer"] for d in _digests(ctx)] == ["heuristic"]
