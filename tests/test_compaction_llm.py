"""The LLM summariser through the real Anthropic SDK and the loopback Messages API.

The summary request is tool-less and streamed (a preview fills in live); a failed call falls back
to the heuristic summary with a warning; a tool call the summariser attempts is ignored, never run.
The agent summarises with its own provider, except the scripted replay (heuristic), and stops
auto-compacting after three failures in a row.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from compaction_helpers import MODEL, filler, load, long_session, message_ids
from loopback_api import LoopbackAPI, Reply, text, tool_use, unauthorized

from workbench.engine import events as ev
from workbench.engine.agent.loop import Agent, approve_all
from workbench.engine.agent.runner import prepare_run
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction import SUMMARY_PREFIX, CompactionPreview, Compactor
from workbench.engine.plans.compaction_prompt import SUMMARIZER_SYSTEM
from workbench.engine.plans.summarizers import HeuristicSummarizer
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.providers.scripted import Script, ScriptedProvider, ScriptTurn
from workbench.engine.settings.compaction import (
    CompactionConfig,
    CompactionHooks,
    HookCommand,
)
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
SUMMARY = "We fixed the parser, kept the API names, and the next step is the docs."


def _provider(api: LoopbackAPI) -> AnthropicProvider:
    return AnthropicProvider(api_key="test-key", base_url=api.url, base_delay=0.01, max_retries=1)


def _preview(
    store: Store, ctx: SessionContext, api: LoopbackAPI, **kwargs: Any
) -> tuple[CompactionPreview, list[ev.Event], list[str]]:
    events: list[ev.Event] = []
    deltas: list[str] = []

    async def go() -> CompactionPreview:
        provider = _provider(api)
        try:
            compactor = Compactor(store, ctx, provider=provider, model=MODEL, emit=events.append, **kwargs)
            plan = await compactor.preview(on_delta=deltas.append)
            await compactor.apply(plan)
            return plan
        finally:
            await provider.aclose()

    return asyncio.run(go()), events, deltas


def test_the_summary_streams_from_a_tool_less_request(store: Store, api: LoopbackAPI) -> None:
    api.queue(Reply([text(SUMMARY)], pieces=6))
    ctx = load(store, long_session(pins=(0,)).save(store))
    plan, _, deltas = _preview(store, ctx, api)
    assert len(deltas) == 6 and "".join(deltas) == SUMMARY, "the preview filled in piece by piece"
    [body] = api.bodies
    assert body["stream"] is True and "tools" not in body and body["model"] == MODEL
    assert body["system"] == [{"type": "text", "text": SUMMARIZER_SYSTEM}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": plan.prompt}]}]
    assert body["max_tokens"] == CompactionConfig().summary_max_tokens
    assert (plan.summarizer, plan.model) == ("llm", MODEL)
    assert plan.summary.startswith(f"{SUMMARY_PREFIX}\n\n{SUMMARY}\n\n### Session metadata")
    stored = next(m for m in ctx.messages if m.id == f"{plan.plan_id}-summary")
    assert stored.text == plan.summary and stored.source["summarizer"] == "llm"


def test_a_failed_summary_falls_back_to_the_heuristic_with_a_warning(store: Store, api: LoopbackAPI) -> None:
    api.queue(unauthorized())
    ctx = load(store, long_session().save(store))
    plan, events, _ = _preview(store, ctx, api)
    assert plan.summarizer == "heuristic" and "Checkpoint of" in plan.summary
    [warning] = [w for w in plan.warnings if "llm summary failed" in w]
    assert "401" in warning and "using heuristic instead" in warning
    assert any(isinstance(e, ev.Warning) and e.message == warning for e in events)
    assert ctx.view().items[[i.kind for i in ctx.view().items].index("message")].message_id == f"{plan.plan_id}-summary"


def test_when_both_summaries_fail_the_old_conversation_is_truncated(
    store: Store, api: LoopbackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: HeuristicSummarizer, data: object, on_delta: object = None) -> None:
        raise RuntimeError("heuristic bug")

    monkeypatch.setattr(HeuristicSummarizer, "summarize", broken)
    api.queue(unauthorized())
    ctx = load(store, long_session().save(store))
    plan, events, _ = _preview(store, ctx, api)
    assert plan.summarizer == "truncation"
    assert "were dropped without a summary" in plan.summary and "### Session metadata" in plan.summary
    failures = [w for w in plan.warnings if "summary failed" in w]
    assert len(failures) == 2 and "RuntimeError: heuristic bug" in failures[1] and "using truncation" in failures[1]
    assert len([e for e in events if isinstance(e, ev.Warning) and "summary failed" in e.message]) == 2
    assert message_ids(ctx.view()) == [f"{plan.plan_id}-summary", *plan.preserved, *plan.tail]


def test_an_empty_summary_falls_back_too(store: Store, api: LoopbackAPI) -> None:
    api.queue(Reply([tool_use("toolu_x", "read_file", {"path": "a.py"})]))
    plan, _, _ = _preview(store, load(store, long_session().save(store)), api)
    assert plan.summarizer == "heuristic"
    assert any("no summary text" in w for w in plan.warnings)


def test_a_tool_call_by_the_summariser_is_ignored_not_run(store: Store, api: LoopbackAPI, tmp_path: Path) -> None:
    b = long_session()
    b.workspace = tmp_path
    api.queue(Reply([text(SUMMARY), tool_use("toolu_evil", "write_file", {"path": "pwned.txt", "content": "x"})]))
    ctx = load(store, b.save(store))
    plan, _, _ = _preview(store, ctx, api)
    assert plan.summarizer == "llm" and SUMMARY in plan.summary
    assert any("'write_file'" in w and "ignored" in w for w in plan.warnings)
    assert not (tmp_path / "pwned.txt").exists()
    assert len(api.bodies) == 1, "no second request with a tool result"
    assert "toolu_evil" not in str([m.parts for m in ctx.messages])


# --- the agent ---------------------------------------------------------------------------------


def _answer(value: str) -> Reply:
    return Reply([text(value)])


def test_the_agent_summarises_with_its_provider(store: Store, api: LoopbackAPI, tmp_path: Path) -> None:
    api.queue(*(_answer(f"Noted {n}.") for n in range(4)), _answer(SUMMARY))
    events: list[ev.Event] = []

    async def go() -> None:
        provider = _provider(api)
        try:
            setup = prepare_run(store, Config(), session_id=None, scripted=None, model=MODEL, workspace=tmp_path,
                                approve=approve_all, on_event=events.append, provider=provider)
            for n in range(4):
                await setup.agent.send(filler(f"Note{n}", 2_500))
            plan = await setup.agent.compact("manual", focus="the notes")
            assert plan is not None and plan.summarizer == "llm"
        finally:
            await provider.aclose()

    asyncio.run(go())
    summary_body = api.bodies[-1]
    assert "tools" not in summary_body and summary_body["system"][0]["text"] == SUMMARIZER_SYSTEM
    assert "the notes" in summary_body["messages"][0]["content"][0]["text"]
    [end] = [e for e in events if isinstance(e, ev.CompactionEnd)]
    assert end.summarizer == "llm" and end.error is None and end.after_tokens < end.before_tokens
    assert [e for e in events if isinstance(e, ev.CompactBoundary)]


def _scripted_agent(
    store: Store, tmp_path: Path, config: Config, events: list[ev.Event]
) -> tuple[Agent, ScriptedProvider]:
    script = Script(name="t", turns=[ScriptTurn(user=f"u{n}", responses=[[{"text": filler(f'R{n}', 2_500)}]])
                                     for n in range(4)] + [ScriptTurn(user="later", responses=[[{"text": "left"}]])])
    setup = prepare_run(store, config, session_id=None, scripted=None, model="scripted-demo", workspace=tmp_path,
                        on_event=events.append, provider=ScriptedProvider(script))
    return setup.agent, setup.agent.provider  # type: ignore[return-value]


def test_a_scripted_session_gets_the_heuristic_summary(store: Store, tmp_path: Path) -> None:
    events: list[ev.Event] = []
    agent, provider = _scripted_agent(store, tmp_path, Config(), events)

    async def go() -> CompactionPreview | None:
        for n in range(4):
            await agent.send(filler(f"Note{n}", 1_500))
        return await agent.compact("manual")

    plan = asyncio.run(go())
    assert plan is not None and plan.summarizer == "heuristic"
    assert provider.remaining == 1, "the compaction did not consume a scripted response"


def test_auto_compaction_stops_after_three_consecutive_failures(store: Store, tmp_path: Path) -> None:
    code = "import sys, json; sys.stdin.read(); print(json.dumps({'cancel': True, 'reason': 'frozen'}))"
    cancel = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    config = Config(compaction=CompactionConfig(hooks=CompactionHooks(pre_compact=[HookCommand(command=cancel)])))
    events: list[ev.Event] = []
    agent, _ = _scripted_agent(store, tmp_path, config, events)

    async def go() -> list[CompactionPreview | None]:
        for n in range(2):  # kept below the block mark, where a failing compaction would refuse the message
            await agent.send(filler(f"Note{n}", 1_000))
        return [await agent.compact("auto") for _ in range(4)]

    assert asyncio.run(go()) == [None] * 4
    ends = [e for e in events if isinstance(e, ev.CompactionEnd)]
    assert len(ends) == 3 and all("cancelled" in (e.error or "") and "frozen" in (e.error or "") for e in ends)
    assert len([e for e in events if isinstance(e, ev.CompactionStart)]) == 3, "the fourth attempt never started"
    [stop] = [e for e in events if isinstance(e, ev.Warning) and e.kind == "compaction_disabled"]
    assert "3 consecutive failures" in stop.message
