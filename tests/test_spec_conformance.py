"""The source documents to the letter where a user feels it (issue 20; ``docs/spec-conformance.md``).

Each test is named after the spec section it checks. The agent runs offline here: a script gives the
model's answers, tools run for real in a temporary workspace, and the provider keeps every request.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from compaction_helpers import SessionBuilder, load, long_session, preview
from compaction_helpers import run as run_async
from test_strategies_common import Transcript, big, prunes, strategies

from workbench.engine import events as ev
from workbench.engine.agent.runner import RunSetup, prepare_run
from workbench.engine.context.budget import budget_from_totals
from workbench.engine.context.projection import ContextItem
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction import NOTHING_OLDER, Compactor, NothingToCompact
from workbench.engine.plans.compaction_split import split_view
from workbench.engine.plans.strategies.dcp import plan_dedup, plan_purge_errors
from workbench.engine.providers.base import ModelRequest, ModelResponse, StreamItem
from workbench.engine.providers.scripted import Script, ScriptedProvider
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.settings.config import Config, load_config
from workbench.engine.settings.limits import lookup
from workbench.engine.transcript.models import ToolResultPart, Usage
from workbench.engine.transcript.store import Store

SONNET = "claude-sonnet-4-5"


def script(*responses: list[dict[str, Any]], **fields: Any) -> Script:
    """One user turn whose model calls answer with ``responses`` in order."""
    return Script.model_validate({"name": "spec", "turns": [{"user": "go", "responses": list(responses)}], **fields})


def run(store: Store, workspace: Path, answers: Script, *texts: str, config: Config | None = None,
        model: str = SONNET, events: list[ev.Event] | None = None) -> tuple[RunSetup, ScriptedProvider]:
    """The agent of ``prepare_run`` on ``model``, its answers scripted; sends each of ``texts``."""
    provider = ScriptedProvider(answers)
    setup = prepare_run(store, config or Config(), session_id=None, scripted=None, model=model, workspace=workspace,
                        provider=provider, on_event=(events if events is not None else []).append)

    async def go() -> None:
        for text in texts:
            await setup.agent.send(text)

    asyncio.run(go())
    return setup, provider


def write_script(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "spec-script.json"
    path.write_text(json.dumps({"name": "spec", "turns": [{"user": "go", "responses": [[{"text": "ok"}]]}],
                                **fields}), encoding="utf-8")
    return path


# --- spec 001 §3: the output reserve ------------------------------------------------------------


def test_spec001_output_reserve_is_max_tokens_sent(store: Store, workspace: Path) -> None:
    setup, provider = run(store, workspace, script([{"text": "Hello."}]), "hi")
    [request] = provider.requests
    budget = setup.agent.ctx.budget()
    assert request.max_tokens == budget.output_reserve
    assert budget.effective_window == budget.context_window - request.max_tokens


def test_spec001_a_scripts_max_output_is_sent_and_reserved(store: Store, tmp_path: Path) -> None:
    path = write_script(tmp_path, model=SONNET, max_output=2_000)
    setup = prepare_run(store, Config(), session_id=None, scripted=str(path), model=None, workspace=tmp_path)
    provider = setup.agent.provider
    assert isinstance(provider, ScriptedProvider)
    asyncio.run(setup.agent.send("go"))
    assert [r.max_tokens for r in provider.requests] == [2_000]
    assert setup.agent.ctx.budget().output_reserve == 2_000
    reopened = prepare_run(store, Config(), session_id=setup.agent.ctx.session.id, scripted=None, model=None,
                           workspace=tmp_path, provider=provider)
    assert reopened.agent.ctx.budget().output_reserve == 2_000  # the stored session keeps what it asks for


def test_spec001_a_configured_output_reserve_is_what_is_asked_for(store: Store, workspace: Path,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[budget]\noutput_reserve = 12000\n", encoding="utf-8")
    setup, provider = run(store, workspace, script([{"text": "Hello."}]), "hi", config=load_config(path))
    assert [r.max_tokens for r in provider.requests] == [12_000] == [setup.agent.ctx.budget().output_reserve]


# --- spec 001 §2 / spec 003: settings that reach the live agent --------------------------------


def read_big_file(store: Store, workspace: Path, config: Config) -> list[str]:
    """The agent reads a 20,800-byte file: the tool result as stored, then the reason of its offload if it was."""
    (workspace / "big.txt").write_text("".join(f"line {n:05d} of a long log\n" for n in range(800)), encoding="utf-8")
    answers = script([{"tool": "read_file", "input": {"path": "big.txt"}}], [{"text": "Read it."}])
    setup, _ = run(store, workspace, answers, "read big.txt", config=config)
    ctx = setup.agent.ctx
    [result] = [p for m in ctx.messages for p in m.parts if p.kind == "tool_result"]
    offloaded = [e for e in ctx.events if e.action == "offload"]
    return [result.text, *(e.reason for e in offloaded)]


def config_file(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_spec001_offload_threshold_setting_reaches_the_agent(store: Store, workspace: Path, tmp_path: Path) -> None:
    assert len(read_big_file(store, workspace, Config())) == 2  # 4,096 bytes by default: offloaded
    high = config_file(tmp_path, "[strategies.offload]\nthreshold = 1000000\n")
    assert len(read_big_file(store, workspace, high)) == 1
    off = config_file(tmp_path, "[strategies.offload]\nenabled = false\n")
    assert len(read_big_file(store, workspace, off)) == 1


def test_spec001_offload_stores_the_whole_output_not_the_cut_one(store: Store, workspace: Path) -> None:
    """A 61 KB output is cut to the 50 KB limit for the context, but what is offloaded is all of it: a marker
    in its middle used to be gone from the stored result, so ``read_result`` could never give it back."""
    half = "".join(f"line {n:05d} of a long log\n" for n in range(1_200))
    (workspace / "big.txt").write_text(half + "MIDDLE-MARKER\n" + half, encoding="utf-8")
    answers = script([{"tool": "read_file", "input": {"path": "big.txt"}}], [{"text": "Read it."}])
    setup, _ = run(store, workspace, answers, "read big.txt")
    ctx = setup.agent.ctx
    [offload] = [e for e in ctx.events if e.action == "offload"]
    stored = store.read_blob(ctx.session.id, str(offload.data["ref_id"]))
    assert stored is not None and "MIDDLE-MARKER" in stored
    assert len(stored.encode()) > 60_000 and offload.data["byte_size"] == len(stored.encode())


def test_spec003_tool_output_limits_are_configurable(store: Store, workspace: Path, tmp_path: Path) -> None:
    config = config_file(tmp_path, "[tool_output]\nmax_lines = 10\nmode = \"head\"\n"
                                   "[strategies.offload]\nenabled = false\n")
    [text] = read_big_file(store, workspace, config)
    assert "line 00009" in text and "line 00010" not in text and "line 00799" not in text
    assert text.endswith("[output truncated: 800 lines, 25599 characters in full]")


# --- spec 002 §3.1 / spec 000 §2: manual-only compaction -----------------------------------------

SMALL_WINDOW = '[models."claude-sonnet-4-5"]\ncontext_window = 9000\nmax_output = 500\n'
LONG = " ".join(f"word{n}" for n in range(3_500))


def compactions(store: Store, workspace: Path, config: Config) -> tuple[list[ev.Event], int]:
    """Two long messages into a small window: the compaction events, and the requests sent."""
    events: list[ev.Event] = []
    _, provider = run(store, workspace, script([{"text": "Noted."}], [{"text": "Noted again."}]), LONG, LONG,
                      config=config, events=events)
    return [e for e in events if isinstance(e, ev.CompactionStart)], len(provider.requests)


def test_spec002_compaction_auto_false_is_manual_only(store: Store, workspace: Path, tmp_path: Path) -> None:
    started, _ = compactions(store, workspace, config_file(tmp_path, SMALL_WINDOW))
    assert started and started[0].trigger == "auto"  # by default the agent compacts on its own
    manual_only = config_file(tmp_path, SMALL_WINDOW + "[compaction]\nauto = false\n")
    started, requests = compactions(store, workspace, manual_only)
    assert started == [] and requests == 2  # no compaction, and the message is not refused


def test_spec002_auto_compaction_never_summarises_the_newest_user_message(store: Store, workspace: Path,
                                                                         tmp_path: Path) -> None:
    """A big message sent near the mark: the compaction before the first step keeps it whole in the tail, so
    the model reads the message itself (it used to get only a summary of it)."""
    window = '[models."claude-sonnet-4-5"]\ncontext_window = 9000\nmax_output = 500\n'
    paste = "please fix the failing test in this log: " + " ".join(f"log{n}" for n in range(3_000))
    events: list[ev.Event] = []
    answers = script([{"text": "Noted."}], [{"tool": "read_file", "input": {"path": "app.py"}}],
                     [{"text": "Fixed."}])
    _, provider = run(store, workspace, answers, "hello " * 2_000, paste, config=config_file(tmp_path, window),
                      events=events)
    assert [e for e in events if isinstance(e, ev.CompactionStart)], "the mark was not reached: no compaction"
    after = provider.requests[1:]
    assert after and all(paste in json.dumps(r.messages) for r in after)


def test_spec004_session_start_context_reaches_the_next_request(store: Store, workspace: Path, tmp_path: Path) -> None:
    """The SessionStart hook's ``additionalContext`` used to be returned by the compaction and dropped."""
    hook = tmp_path / "start.py"
    hook.write_text('import json, sys\nsys.stdin.read()\nprint(json.dumps({"additionalContext": "Branch: release-7"}))\n')
    config = config_file(tmp_path, SMALL_WINDOW + f"[[compaction.hooks.session_start]]\ncommand = '{sys.executable} {hook}'\n")
    events: list[ev.Event] = []
    _, provider = run(store, workspace, script([{"text": "Noted."}], [{"text": "Noted again."}]), LONG, LONG,
                      config=config, events=events)
    assert [e for e in events if isinstance(e, ev.CompactionEnd) and e.error is None], "no compaction ran"
    systems = [" ".join(block.text for block in request.system) for request in provider.requests]
    assert "Branch: release-7" not in systems[0]
    assert "<session_start_context>\nBranch: release-7\n</session_start_context>" in systems[-1]


# --- spec 001 §6: a compaction only when messages are actually reduced --------------------------


def test_spec001_compaction_never_makes_the_context_bigger(store: Store) -> None:
    b = SessionBuilder()
    b.user("Fix the greeting in app.py.")
    b.assistant("Done: it ends with an exclamation mark now.")
    ctx = load(store, b.save(store))
    before = (len(ctx.messages), ctx.budget().used)
    plan = preview(store, ctx)  # a preview says so ...
    assert plan.summarized == [] and any("refused" in w for w in plan.warnings)
    with pytest.raises(NothingToCompact, match="nothing to compact"):  # ... and applying changes nothing
        run_async(Compactor(store, ctx).apply(plan))
    assert (len(ctx.messages), ctx.budget().used) == before
    assert not [e for e in store.load_overlay(ctx.session.id) if e.action in ("pivot", "summary")]


def test_spec001_compact_context_with_nothing_to_summarise_adds_no_summary(store: Store, workspace: Path) -> None:
    answers = script([{"tool": "compact_context", "input": {}}], [{"text": "Carrying on."}])
    setup, _ = run(store, workspace, answers, "Tidy up your context, then carry on.")
    ctx = setup.agent.ctx
    assert not [m for m in ctx.messages if m.kind in ("summary", "compact_boundary")]
    [result] = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert "nothing to compact" in result.text


class OverReported(ScriptedProvider):
    """Reports every request as 190,000 tokens of input: more than the messages explain."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        async for item in super().stream(request):
            if isinstance(item, ModelResponse):
                item.usage = Usage(input_tokens=190_000, output_tokens=item.usage.output_tokens, model=request.model)
            yield item


def test_spec001_usage_over_the_window_with_small_messages_does_not_refuse_new_ones(
    store: Store, workspace: Path
) -> None:
    provider = OverReported(script([{"text": "One."}], [{"text": "Two."}], [{"text": "Three."}]))
    events: list[ev.Event] = []
    setup = prepare_run(store, Config(), session_id=None, scripted=None, model=SONNET, workspace=workspace,
                        provider=provider, on_event=events.append)

    async def go() -> None:
        for text in ("one", "two", "three"):
            await setup.agent.send(text)

    asyncio.run(go())
    assert setup.agent.ctx.budget().level == "block"
    assert len(provider.requests) == 3  # every message was sent
    assert not [m for m in setup.agent.ctx.messages if m.kind == "summary"]
    warnings = [e.message for e in events if isinstance(e, ev.Warning) and e.kind == "compaction"]
    assert warnings == [f"{NOTHING_OLDER}; the request is sent as it is"]


# --- spec 000 §5: dynamic context pruning ---------------------------------------------------------


def test_spec000_dcp_runs_from_a_setting_and_on_every_request_at_zero(
    store: Store, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.md").write_text("".join(f"- note {n}: keep it short\n" for n in range(80)), encoding="utf-8")
    read = {"tool": "read_file", "input": {"path": "notes.md"}}
    answers = script([read], [read], [{"text": "Read twice."}])
    unprotected = "[strategies.dcp]\nturn_protection = 0\n"
    for text, expected in ((unprotected, []), ("[strategies]\nautomatic_from = 0\n" + unprotected, ["dedup"])):
        events: list[ev.Event] = []
        run(store, workspace, answers, "read the notes twice", config=config_file(tmp_path, text), events=events)
        assert [e.strategy for e in events if isinstance(e, ev.PlanApplied)] == expected


def test_spec000_protected_tools_are_never_pruned() -> None:
    t = Transcript()
    t.user("delegate")
    t.call("task", {"prompt": "survey the code"}, big("report"))
    t.call("task", {"prompt": "survey the code"}, big("report"))
    assert not plan_dedup(t.context(), strategies(dcp={"turn_protection": 0})).items
    assert len(plan_dedup(t.context(), strategies(dcp={"turn_protection": 0, "protected_tools": []})).items) == 1


def test_spec000_an_argument_given_as_null_is_one_not_given() -> None:
    t = Transcript()
    t.user("read it")
    _, first, _ = t.call("read", {"filePath": "src/a.ts", "extra": None}, big("a"))
    t.call("read", {"filePath": "src/a.ts"}, big("a"))
    assert prunes(plan_dedup(t.context(), strategies(dcp={"turn_protection": 0}))) == {(first, 0)}


def failed_call(turns_after: int) -> tuple[Transcript, str]:
    t = Transcript()
    t.user("run it")
    call, _, _ = t.call("Bash", {"command": big("long command", 80)}, "exit 1: boom", error=True)
    for n in range(turns_after):
        t.user(f"turn {n}")
        t.say()
    return t, call


def test_spec000_purge_errors_turns_zero_is_raised_to_one() -> None:
    config = strategies(dcp={"turn_protection": 0}, purge_errors={"turns": 0})
    t, _ = failed_call(0)
    assert not plan_purge_errors(t.context(), config).items  # the current turn's error: the agent is on it
    t, call = failed_call(1)
    assert prunes(plan_purge_errors(t.context(), config)) == {(call, 0)}


def test_spec000_tiny_inputs_are_skipped_with_a_reason() -> None:
    t = Transcript()
    t.user("go")
    call, _, _ = t.call("Bash", {"command": "x"}, "boom", error=True)
    for n in range(5):
        t.user(str(n))
    plan = plan_purge_errors(t.context(), strategies(dcp={"turn_protection": 0}))
    assert not plan.items
    [skipped] = plan.skipped
    assert skipped.message_id == call
    assert skipped.reason == "Bash(command=x) failed 5 turns ago: skipped, the input is no larger than its placeholder"


# --- spec 001 §7: /compact and compact_context ------------------------------------------------------


def test_spec001_compact_context_returns_counts_and_strategies(store: Store, workspace: Path, tmp_path: Path) -> None:
    answers = Script.model_validate({"name": "spec", "turns": [
        {"user": "a", "responses": [[{"text": "Noted: " + " ".join(f"fact{n}" for n in range(1_200))}]]},
        {"user": "b", "responses": [[{"tool": "compact_context", "input": {}}], [{"text": "Carrying on."}]]},
    ]})
    config = config_file(tmp_path, SMALL_WINDOW)
    setup, _ = run(store, workspace, answers, " ".join(f"ask{n}" for n in range(1_200)), "Compact, then go on.",
                   config=config)
    [result] = [p for m in setup.agent.ctx.messages for p in m.parts if isinstance(p, ToolResultPart)]
    match = re.fullmatch(r"Compacted: ([\d,]+) → ([\d,]+) tokens, (\d+) → (\d+) messages; "
                         r"ran compaction \(heuristic\)\.", result.text)
    assert match is not None, result.text
    before, after, messages_before, messages_after = (int(g.replace(",", "")) for g in match.groups())
    assert after < before and messages_after < messages_before


class Summariser(ScriptedProvider):
    """A scripted model the compactor treats as a real one (the replay itself gets the heuristic)."""

    name = "summariser"


def test_spec002_summary_max_tokens_is_configurable(store: Store, tmp_path: Path) -> None:
    config = config_file(tmp_path, "[compaction]\nsummary_max_tokens = 1234\n")
    ctx = load(store, long_session().save(store), config)
    provider = Summariser(script([{"text": "What was done, and what is next."}]))
    plan = run_async(Compactor(store, ctx, provider=provider, model=SONNET).preview())
    assert plan.summarizer == "llm" and [r.max_tokens for r in provider.requests] == [1234]


# --- spec 003: spilling outputs too large for the context -------------------------------------------


def test_spec003_outputs_over_200k_characters_spill_to_a_file_named_by_sha256(
    store: Store, workspace: Path, workbench_home: Path
) -> None:
    (workspace / "huge.log").write_text("".join(f"{n:04d} " + "x" * 700 + "\n" for n in range(300)), encoding="utf-8")
    answers = script([{"tool": "read_file", "input": {"path": "huge.log"}}], [{"text": "Seen."}])
    setup, _ = run(store, workspace, answers, "read huge.log")
    ctx = setup.agent.ctx
    [result] = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolResultPart)]
    match = re.match(r"\[Output too large for the context: ([\d,]+) characters, 300 lines\. The whole output is "
                     r"saved in (\S+) \(sha256 ([0-9a-f]{64})\); its head and tail follow\.\]\n +1\t0000 x",
                     result.text)
    assert match is not None, result.text[:300]
    path = Path(match[2])
    assert path.parent == workbench_home / "tool-outputs" and path.name == f"{match[3]}.txt"
    saved = path.read_text(encoding="utf-8")
    assert hashlib.sha256(saved.encode()).hexdigest() == match[3] and len(saved) == int(match[1].replace(",", ""))
    assert "0299 x" in saved and result.text.rstrip().endswith("x" * 20)
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(result.text) < 3_500 and not [e for e in ctx.events if e.action == "offload"]


# --- spec 002 §4.3 / spec 003 / spec 002 §3.1: auto-continue, the tail, the input limit ----------------


def test_spec002_no_auto_continue_right_after_a_fresh_user_message(store: Store, workspace: Path) -> None:
    provider = OverReported(script([{"text": "One."}], [{"text": "Two."}]))
    long = " ".join(f"fact{n}" for n in range(10_000))
    setup = prepare_run(store, Config(), session_id=None, scripted=None, model=SONNET, workspace=workspace,
                        provider=provider)

    async def go() -> None:
        await setup.agent.send(long)
        await setup.agent.send("second: " + long)

    asyncio.run(go())
    assert not [m for m in setup.agent.ctx.messages if m.source.get("auto_continue")]


class CutAtMaxTokens(ScriptedProvider):
    """The ``cut``-th response stops at ``max_tokens`` with the window reported nearly full (165,000 of
    Sonnet's 168,000 effective tokens): the model ran out of room mid-answer."""

    def __init__(self, answers: Script, cut: int) -> None:
        super().__init__(answers)
        self.cut = cut

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        async for item in super().stream(request):
            if isinstance(item, ModelResponse) and len(self.requests) == self.cut:
                item.stop_reason = "max_tokens"
                item.usage = Usage(input_tokens=165_000, output_tokens=item.usage.output_tokens, model=request.model)
            yield item


def _cut_short(store: Store, workspace: Path, config: Config) -> tuple[RunSetup, CutAtMaxTokens]:
    """Turn one (long), then turn two whose answer is cut at ``max_tokens`` with the window nearly full."""
    provider = CutAtMaxTokens(script([{"text": "One."}], [{"text": "Two, cut sh"}], [{"text": "Two, whole."}]), 2)
    setup = prepare_run(store, config, session_id=None, scripted=None, model=SONNET, workspace=workspace,
                        provider=provider)

    async def go() -> None:
        await setup.agent.send("First: " + " ".join(f"fact{n}" for n in range(6_000)))
        await setup.agent.send("second")

    asyncio.run(go())
    return setup, provider


def test_spec004_a_response_cut_at_max_tokens_with_the_window_full_compacts_and_continues(
    store: Store, workspace: Path
) -> None:
    """Spec 004's reactive compaction: the cut answer is followed, in the same turn, by a compaction and
    the auto-continue message, and the model answers again with room to finish."""
    setup, provider = _cut_short(store, workspace, Config())
    messages = setup.agent.ctx.messages
    assert len(provider.requests) == 3
    assert [m for m in messages if m.kind == "summary"], "compacted in the turn"
    assert [m for m in messages if m.source.get("auto_continue")]
    assert messages[-1].text == "Two, whole."


def test_spec002_a_context_limit_of_0_never_compacts_on_its_own(store: Store, workspace: Path) -> None:
    """Spec 002's ``contextLimit == 0``: unlimited. ``[budget] context_window = 0`` shows the model's window
    and the agent never compacts by itself, not even after a cut answer with the window full."""
    config = Config.model_validate({"budget": {"context_window": 0}})
    setup, provider = _cut_short(store, workspace, config)
    assert setup.agent.ctx.budget().context_window == lookup(SONNET)[0].context_window
    assert len(provider.requests) == 2
    assert not [m for m in setup.agent.ctx.messages if m.kind == "summary"]


def turns_session() -> list[ContextItem]:
    """Two turns: a long question and its answer (about 900 tokens), then a short question and a long tool
    loop (about 5,400)."""
    b = SessionBuilder()
    b.user("First: " + " ".join(f"a{n}" for n in range(400)))
    b.assistant("Done with the first.")
    b.user("Second: look through the logs.")
    for n in range(3):
        log = " ".join(f"l{n}x{i}" for i in range(400))
        b.assistant(f"Reading log {n}.", tools=[("read_file", {"path": f"log{n}.txt"}, log, False)])
    b.assistant("The logs are fine.")
    ctx = SessionContext(b.session(), b.messages, [])
    return [i for i in ctx.view().items if i.kind == "message"]


def test_spec003_the_tail_can_start_at_a_user_turn() -> None:
    items = turns_session()
    mid_turn = split_view(items, set(), CompactionConfig(split="keep_recent", keep_recent_tokens=1_500), 100_000)
    assert mid_turn.tail[0].role == "assistant"  # by tokens alone the tail starts inside the second turn
    config = CompactionConfig(split="keep_recent", keep_recent_tokens=1_500, tail_at_turn=True)
    at_turn = split_view(items, set(), config, 100_000)
    # the turn the budget ends in, kept whole past the budget
    assert at_turn.tail[0].role == "user" and at_turn.tail[0].parts[0].text == "Second: look through the logs."
    roomy = CompactionConfig(split="keep_recent", keep_recent_tokens=6_000)
    assert split_view(items, set(), roomy, 100_000).tail[0].parts[0].text == "Done with the first."
    roomy = roomy.model_copy(update={"tail_at_turn": True})  # the first turn that starts inside the budget
    assert split_view(items, set(), roomy, 100_000).tail[0].parts[0].text == "Second: look through the logs."


def test_spec002_a_models_input_limit_caps_the_effective_window(tmp_path: Path) -> None:
    config = config_file(tmp_path, '[models."house-model"]\ncontext_window = 100000\nmax_output = 4000\n'
                                   "max_input = 60000\n")
    limits, _ = lookup("house-model", config.models)
    budget = budget_from_totals({"user": 58_000}, model="house-model", limits=limits, config=config.budget,
                                source="estimated")
    assert (budget.output_reserve, budget.effective_window, budget.level) == (4_000, 60_000, "compact")


def test_the_scripted_replay_reports_cache_reads_on_every_step_after_the_first(
    store: Store, workspace: Path
) -> None:
    """The scripted provider bills a request as the API would at the marks it carries (the prompt's, and the
    one on the last message): each step of a turn reads the one before it from the cache, and the budget
    shows the cached share."""
    (workspace / "notes.txt").write_text("remember the milk\n" * 50, encoding="utf-8")
    answers = script([{"tool": "read_file", "input": {"path": "notes.txt"}}],
                     [{"tool": "list_files", "input": {"pattern": "*"}}], [{"text": "Read and listed."}])
    events: list[ev.Event] = []
    setup, _ = run(store, workspace, answers, "look around", events=events)
    usage = [e for e in events if isinstance(e, ev.UsageReported)]
    assert len(usage) == 3
    assert usage[0].cache_read_input_tokens == 0 and usage[0].cache_creation_input_tokens > 0
    for before, step in itertools.pairwise(usage):
        cached_before = before.cache_read_input_tokens + before.cache_creation_input_tokens
        assert step.cache_read_input_tokens >= 0.9 * cached_before, "the previous step's prompt, read back"
        total = step.input_tokens + step.cache_read_input_tokens + step.cache_creation_input_tokens
        assert total == step.estimated_input_tokens
    rate = setup.agent.ctx.budget().cache_hit_rate
    assert rate is not None and rate > 0.5


# --- spec 001 §8: graceful degradation ----------------------------------------------------------------


def _broken(*_: Any, **__: Any) -> Any:
    raise sqlite3.OperationalError("disk I/O error")


def test_spec001_a_failing_result_store_keeps_the_result_inline(
    store: Store, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "big.txt").write_text("".join(f"line {n:05d} of a long log\n" for n in range(400)), encoding="utf-8")
    monkeypatch.setattr(Store, "save_blob", _broken)
    events: list[ev.Event] = []
    setup, _ = run(store, workspace, script([{"tool": "read_file", "input": {"path": "big.txt"}}],
                                                   [{"text": "Read it."}]), "read big.txt", events=events)
    ctx = setup.agent.ctx
    assert ctx.messages[-1].text == "Read it.", "the turn went on"
    assert not [e for e in ctx.events if e.action == "offload"]
    [result] = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert "line 00399" in result.text, "the result stayed inline, whole"
    assert any(isinstance(e, ev.Warning) and e.kind == "offload" and "disk I/O error" in e.message for e in events)


def test_spec001_a_failing_tool_deferral_sends_every_tool(
    store: Store, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.engine.agent.deferral import DeferralManager

    def broke(*_: Any, **__: Any) -> Any:
        raise RuntimeError("deferral broke")

    monkeypatch.setattr(DeferralManager, "select", broke)
    events: list[ev.Event] = []
    setup, provider = run(store, workspace, script([{"text": "Hello."}]), "hi", events=events)
    assert setup.agent.ctx.messages[-1].text == "Hello."
    sent = {tool["name"] for tool in provider.requests[0].tools}
    assert {"read_file", "write_file", "grep"} <= sent
    assert any(isinstance(e, ev.Warning) and e.kind == "deferral" and "deferral broke" in e.message for e in events)


def test_spec001_a_failing_prompt_builder_sends_the_base_instructions(
    store: Store, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.engine.agent.prompt import BASE_INSTRUCTIONS, PromptBuilder

    def broke(*_: Any, **__: Any) -> Any:
        raise RuntimeError("prompt broke")

    (workspace / "AGENTS.md").write_text("Project rules.\n", encoding="utf-8")
    monkeypatch.setattr(PromptBuilder, "sections", broke)
    events: list[ev.Event] = []
    setup, provider = run(store, workspace, script([{"text": "Hello."}]), "hi", events=events)
    assert setup.agent.ctx.messages[-1].text == "Hello."
    system = " ".join(block.text for block in provider.requests[0].system)
    assert BASE_INSTRUCTIONS in system
    assert any(isinstance(e, ev.Warning) and e.kind == "prompt" and "prompt broke" in e.message for e in events)


def test_spec001_a_failing_checkpoint_write_still_compacts_and_resume_replays_the_history(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.engine.plans import compaction

    ctx = load(store, long_session().save(store))
    monkeypatch.setattr(compaction, "save_checkpoint", _broken)
    plan = preview(store, ctx)
    result = run_async(Compactor(store, ctx).apply(plan))
    assert any("checkpoint" in w and "disk I/O error" in w for w in result.warnings)
    reopened = load(store, ctx.session.id, use_checkpoint=True)
    assert reopened.view().item_for(result.summary_id) is not None, "the compaction holds"
    assert len(reopened.messages) == len(ctx.messages)
