"""Full compaction as a planner: split, preserved messages, apply, undo, a second compaction, history.

Against the real Claude Code fixtures and small sessions built here. What the tests hold the
engine to: preview changes nothing; apply commits exactly the plan; the projection afterwards is
summary + preserved + tail and is a valid request; ``after_tokens`` of the preview is what the
budget shows after apply; undo gives back a byte-identical projection.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from compaction_helpers import (
    SessionBuilder,
    assert_valid_request,
    compact,
    filler,
    fingerprint,
    import_fixture,
    load,
    long_session,
    message_ids,
    preview,
    run,
)
from helpers import CLAUDE_FIXTURES, COMPACTABLE, claude_fixture

from workbench.engine import events as ev
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ConfigError, WorkbenchError
from workbench.engine.plans import plan as plans
from workbench.engine.plans.compaction import SUMMARY_PREFIX, Compactor, StalePlan
from workbench.engine.plans.compaction_history import compaction_history, plan_files_to_reinject, undo_compaction
from workbench.engine.plans.compaction_prompt import FINAL_INSTRUCTION, MARKER_QUESTION, SUMMARIZER_SYSTEM
from workbench.engine.plans.compaction_split import split_point, tail_budget, valid_starts
from workbench.engine.plans.measure import apply, measure
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.settings.config import load_config
from workbench.engine.transcript.models import ImagePart, Message, TextPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store

BIG_FIXTURES = ["subagent", "258c7280", "session-196820da"]


def _summary_message(ctx: SessionContext, plan_id: str) -> Message:
    return next(m for m in ctx.messages if m.id == f"{plan_id}-summary")


# --- the split -----------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(CLAUDE_FIXTURES))
def test_no_split_point_parts_a_tool_call_from_its_result(store: Store, key: str) -> None:
    ctx = import_fixture(store, claude_fixture(key))
    items = [i for i in ctx.view().items if i.kind == "message"]
    valid = valid_starts(items)
    for budget in (0, 50, 500, 2_000, 8_000, 15_000, 60_000, 10**9):
        start = split_point(items, budget, 5)
        assert valid[start], (key, budget, start)
        tail = items[start:]
        assert sum(i.tokens for i in tail) <= budget or not tail
        calls = {p.id for i in tail for p in i.parts if isinstance(p, ToolUsePart)}
        results = {p.tool_use_id for i in tail for p in i.parts if isinstance(p, ToolResultPart)}
        older_calls = {p.id for i in items[:start] for p in i.parts if isinstance(p, ToolUsePart)}
        assert not results & older_calls, "a tail result answers a call that would be summarised"
        assert results <= calls | older_calls


def test_a_tail_that_cannot_hold_one_turn_still_keeps_the_users_message(store: Store) -> None:
    """The turn in progress: its steps are summarised, the user's message is kept verbatim (the model has not
    answered it yet; it used to be summarised away)."""
    b = SessionBuilder()
    b.user("Read the big file.")
    b.assistant("Reading.", tools=[("read_file", {"path": "big.txt"}, filler("Big", 3_000), False)])
    config = CompactionConfig(split="keep_recent", keep_recent_tokens=100)
    plan = preview(store, load(store, b.save(store)), config=config)
    assert plan.tail == [] and plan.preserved == ["m0000"] and plan.summarized == ["m0001", "m0002"]
    b.assistant("Read it: the totals are wrong.")
    plan = preview(store, load(store, b.save(store)), config=config)  # answered: the whole turn may go
    assert plan.tail == ["m0003"] and plan.summarized == ["m0000", "m0001", "m0002"]


def test_tail_budget_rules_are_selectable() -> None:
    opencode = CompactionConfig()
    assert tail_budget(opencode, 4_000, 0) == 2_000  # 25% of 4k, clamped up
    assert tail_budget(opencode, 40_000, 0) == 10_000
    assert tail_budget(opencode, 190_000, 0) == 15_000  # clamped down
    recent = CompactionConfig(split="keep_recent")
    assert tail_budget(recent, 190_000, 0) == 20_000 and tail_budget(recent, 30_000, 0) == 15_000
    assert tail_budget(CompactionConfig(split="keep_recent", keep_recent_tokens=0), 190_000, 0) is None
    assert tail_budget(CompactionConfig(split="preserve_ratio"), 190_000, 50_000) == 20_000


def test_message_count_rule_keeps_that_many_messages(store: Store) -> None:
    b = long_session(turns=6, words=50, tools_every=100)
    config = CompactionConfig(split="keep_recent", keep_recent_tokens=0, keep_recent_messages=3)
    plan = preview(store, load(store, b.save(store)), config=config)
    assert plan.tail == [m.id for m in b.messages[-3:]]


def test_preserve_ratio_keeps_about_forty_percent(store: Store) -> None:
    b = long_session(turns=20, words=200, tools_every=100)
    ctx = load(store, b.save(store))
    items = {i.message_id: i.tokens for i in ctx.view().items if i.kind == "message"}
    plan = preview(store, ctx, config=CompactionConfig(split="preserve_ratio"))
    kept = sum(items[i] for i in plan.tail) / sum(items.values())
    assert 0.3 < kept <= 0.4


# --- preview, apply, the projection after --------------------------------------------------


@pytest.mark.parametrize("key", BIG_FIXTURES)
def test_fixture_compaction_frees_context_and_preview_predicts_it(store: Store, key: str) -> None:
    ctx = import_fixture(store, claude_fixture(key))
    before = fingerprint(ctx.view())
    events_before, messages_before = len(store.load_overlay(ctx.session.id)), store.message_count(ctx.session.id)
    compactor = Compactor(store, ctx)
    plan = run(compactor.preview())
    assert fingerprint(ctx.view()) == before, "preview changed the context"
    stored = (len(store.load_overlay(ctx.session.id)), store.message_count(ctx.session.id))
    assert stored == (events_before, messages_before)
    assert plan.summarized and plan.after_tokens < plan.before_tokens == ctx.budget().used
    result = run(compactor.apply(plan))
    assert result.after_tokens == plan.after_tokens == ctx.budget().used
    view = ctx.view()
    assert message_ids(view) == [f"{plan.plan_id}-summary", *plan.preserved, *plan.tail]
    assert_valid_request(view)
    # a fresh load from the store gives the same view
    assert fingerprint(load(store, ctx.session.id).view()) == fingerprint(view)


def test_summary_message_marker_and_badges(store: Store) -> None:
    ctx = load(store, long_session().save(store))
    seen: list[ev.Event] = []
    plan, result = compact(store, ctx, emit=seen.append)
    summary = _summary_message(ctx, plan.plan_id)
    marker = next(m for m in ctx.messages if m.id == result.marker_id)
    assert summary.kind == "summary" and summary.role == "user" and summary.text.startswith(SUMMARY_PREFIX)
    assert summary.text == plan.summary
    assert marker.kind == "compact_boundary" and not marker.agent_visible
    assert marker.source == {"compaction": plan.plan_id, "trigger": "manual", "auto": False}
    item = ctx.view().items[[i.kind for i in ctx.view().items].index("message")]
    assert item.message_id == summary.id and "summary" in item.badges
    [boundary] = [e for e in seen if isinstance(e, ev.CompactBoundary)]
    assert boundary.trigger == "manual"
    assert (boundary.pre_tokens, boundary.post_tokens) == (plan.before_tokens, result.after_tokens)
    assert boundary.summarized == len(plan.summarized)
    assert [e.kind for e in seen if isinstance(e, ev.MessageAdded)] == ["compact_boundary", "summary"]


def test_auto_trigger_is_recorded_on_the_marker_and_pivot(store: Store) -> None:
    ctx = load(store, long_session().save(store))
    _plan, result = compact(store, ctx, trigger="auto")
    marker = next(m for m in ctx.messages if m.id == result.marker_id)
    pivot = next(e for e in ctx.events if e.action == "pivot")
    assert marker.source["auto"] is True and pivot.data["trigger"] == "auto" and pivot.data["auto"] is True


def test_pinned_messages_are_verbatim_in_order_in_prompt_and_projection(store: Store) -> None:
    b = SessionBuilder()
    b.user(filler("Intro", 300))
    b.assistant(filler("Ok", 300))
    b.user("Remember: the billing integration uses webhooks only.", pin=True)
    b.assistant("Understood: webhooks only, SDK for the UI, the database enforces.", pin=True)
    for n in range(5):
        b.user(filler(f"Work{n}", 400))
        b.assistant(filler(f"Done{n}", 400))
    b.user("Second rule: never touch the legacy importer.", pin=True)
    b.assistant("Noted: the legacy importer stays as it is.", pin=True)
    for n in range(8):
        b.user(filler(f"Later{n}", 400))
        b.assistant(filler(f"Reply{n}", 400))
    ctx = load(store, b.save(store))
    plan = preview(store, ctx, config=CompactionConfig(tail_max=3_000))
    pinned = ["m0002", "m0003", "m0014", "m0015"]
    assert plan.preserved == pinned and not set(pinned) & set(plan.summarized)
    block = plan.prompt.split("<preserved_messages>")[1].split("</preserved_messages>")[0]
    texts = [m.text for m in b.messages if m.id in pinned]
    positions = [block.index(t) for t in texts]
    assert positions == sorted(positions), "preserved messages out of order"
    conversation = plan.prompt.split("<conversation>")[1]
    assert not any(t in conversation for t in texts), "a preserved message is also summarised"
    run(Compactor(store, ctx).apply(plan))
    ids = message_ids(ctx.view())
    assert ids[1:5] == pinned and ids[0] == f"{plan.plan_id}-summary"
    shown = [ctx.view().item_for(m) for m in pinned]
    assert [("\n".join(p.text for p in i.parts if isinstance(p, TextPart))) for i in shown] == texts  # type: ignore[union-attr]
    assert_valid_request(ctx.view())


def test_a_preserved_tool_call_keeps_its_result(store: Store) -> None:
    b = SessionBuilder()
    b.user("[PERSIST] Look at the config first.", pin=True)
    b.assistant("Reading it.", pin=True, tools=[("read_file", {"path": "config.toml"}, "debug = true", False)])
    b.assistant("Debug is on.")
    for n in range(8):
        b.user(filler(f"Work{n}", 400))
        b.assistant(filler(f"Done{n}", 400))
    ctx = load(store, b.save(store))
    plan, _ = compact(store, ctx, config=CompactionConfig(tail_max=2_000))
    assert plan.preserved == ["m0000", "m0001", "m0002"] and plan.pair_pins == ["m0002"]
    assert "m0002" in ctx.overlay.pinned
    assert_valid_request(ctx.view())
    undo_compaction(store, ctx)
    assert "m0002" not in ctx.overlay.pinned, "undo takes the compaction's own pins back too"


def test_only_agent_visible_content_reaches_the_prompt(store: Store) -> None:
    b = SessionBuilder()
    b.user("Check the logs.")
    b.assistant("Reading.", thinking="PRIVATE-THOUGHT", tools=[
        ("shell", {"command": "cat log"}, "X" * 5_000, False),
        ("read_file", {"path": "old.txt"}, "PRUNED-SECRET", False),
    ])
    b.user("Here is a screenshot.", images=(ImagePart(media_type="image/png", name="shot.png"),))
    hidden = b._add("user", [TextPart(text="HIDDEN-NOTE")], agent_visible=False)
    b.assistant(filler("Analysis", 300))
    for n in range(6):
        b.user(filler(f"Work{n}", 400))
        b.assistant(filler(f"Done{n}", 400))
    b.events.append(OverlayEvent(id="prune-1", session_id=b.session_id, plan_id="prune", action="prune",
                                 message_id="m0002", part_index=1, origin="user"))
    ctx = load(store, b.save(store))
    plan = preview(store, ctx, config=CompactionConfig(tail_max=2_000))
    assert "m0002" in plan.summarized and hidden not in plan.summarized + plan.tail
    prompt = plan.prompt
    assert "PRIVATE-THOUGHT" not in prompt and "HIDDEN-NOTE" not in prompt and "PRUNED-SECRET" not in prompt
    assert "[Old tool result content cleared]" in prompt
    assert "X" * 1_800 in prompt and "X" * 1_801 not in prompt and "3,200 more characters clipped" in prompt
    assert "[Attached image/png: shot.png]" in prompt


def test_prompt_structure_follows_the_specs(store: Store) -> None:
    ctx = load(store, long_session(pins=(0,)).save(store))
    plan = preview(store, ctx, focus="the failing invoice test")
    assert plan.system_prompt == SUMMARIZER_SYSTEM
    order = ["## Compaction Instructions", "<preserved_messages>", "### Session metadata", "- Current position:",
             "- Plan files loaded:", "- Files modified:", "- Active sub-agent sessions:", "### Todo List",
             "### Key Decisions", "<conversation>", "### Focus", "the failing invoice test", "### Instructions",
             MARKER_QUESTION, FINAL_INSTRUCTION]
    positions = [plan.prompt.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert plan.prompt.rstrip().endswith(FINAL_INSTRUCTION)
    assert "the failing invoice test" in plan.summary, "the heuristic summary keeps the focus too"


def test_apply_uses_the_summary_as_edited(store: Store) -> None:
    ctx = load(store, long_session().save(store))
    plan = preview(store, ctx)
    plan.summary = "In my own words: we refactored the parser."
    result = run(Compactor(store, ctx).apply(plan))
    text = _summary_message(ctx, plan.plan_id).text
    assert text == f"{SUMMARY_PREFIX}\n\nIn my own words: we refactored the parser."
    assert result.after_tokens == ctx.budget().used < plan.after_tokens


def test_apply_refuses_a_plan_for_a_session_that_moved_on(store: Store) -> None:
    ctx = load(store, long_session().save(store))
    plan = preview(store, ctx)
    late = Message(id="late", session_id=ctx.session.id, index=len(ctx.messages), role="user",
                   parts=[TextPart(text="one more thing")])
    store.save_messages([late], ctx.counter)
    ctx.append(late)
    with pytest.raises(StalePlan, match="preview it again"):
        run(Compactor(store, ctx).apply(plan))
    assert not [e for e in store.load_overlay(ctx.session.id) if e.action == "pivot"]


def test_auto_compaction_with_nothing_older_than_the_tail_fails_clearly(store: Store) -> None:
    b = SessionBuilder()
    b.user("hi")
    b.assistant("hello")
    ctx = load(store, b.save(store))
    with pytest.raises(WorkbenchError, match="nothing to compact"):
        preview(store, ctx, trigger="auto")
    plan = preview(store, ctx)
    assert plan.summarized == [] and any("nothing older" in w for w in plan.warnings)


# --- a second compaction, undo, history ---------------------------------------------------


def test_a_second_compaction_quotes_the_first_summary_once(store: Store) -> None:
    b = long_session(turns=10)
    ctx = load(store, b.save(store))
    first, _ = compact(store, ctx, config=CompactionConfig(tail_max=2_000))
    first_body = _summary_message(ctx, first.plan_id).text.split("### Session metadata")[0]
    marker_line = first_body.strip().splitlines()[2]  # "Checkpoint of N earlier messages …"
    for n in range(6):
        extra = [Message(id=f"x{n}{r}", session_id=ctx.session.id, index=len(ctx.messages) + i, role=r,
                         parts=[TextPart(text=filler(f"More{n}", 300))]) for i, r in enumerate(("user", "assistant"))]
        with ctx.writing(store, check=False):  # this program appends, as the agent loop does
            store.save_messages(extra, ctx.counter)
        for m in extra:
            ctx.append(m)
    second, _ = compact(store, ctx, config=CompactionConfig(tail_max=2_000))
    assert second.prior_summaries == [f"{first.plan_id}-summary"]
    assert f"{first.plan_id}-summary" in second.summarized
    assert second.prompt.count(marker_line) == 1
    prior = second.prompt.split("<prior_summary>")[1].split("</prior_summary>")[0]
    assert marker_line in prior and "### Session metadata" not in prior
    assert second.prompt.split("<conversation>")[1].count(marker_line) == 0
    assert second.summary.count(marker_line) == 1, "the heuristic summary carries the first one forward, once"
    view = ctx.view()
    assert message_ids(view)[0] == f"{second.plan_id}-summary"
    assert f"{first.plan_id}-summary" not in message_ids(view)
    assert_valid_request(view)
    assert fingerprint(load(store, ctx.session.id).view()) == fingerprint(view)


def test_the_tail_never_reaches_back_past_the_previous_summary(store: Store) -> None:
    ctx = load(store, long_session(turns=10).save(store))
    first, _ = compact(store, ctx, config=CompactionConfig(tail_max=6_000))
    second = preview(store, ctx, config=CompactionConfig(tail_max=6_000))
    assert second.tail == [] and set(first.tail) <= set(second.summarized)


@pytest.mark.parametrize("key", COMPACTABLE)
def test_undo_restores_a_byte_identical_projection(store: Store, key: str) -> None:
    ctx = import_fixture(store, claude_fixture(key))
    before, used = fingerprint(ctx.view()), ctx.budget().used
    plan, _ = compact(store, ctx)
    assert fingerprint(ctx.view()) != before
    entry = undo_compaction(store, ctx)
    assert entry.plan_id == plan.plan_id and entry.undone
    assert fingerprint(ctx.view()) == before and ctx.budget().used == used
    assert fingerprint(load(store, ctx.session.id).view()) == before, "the stored state undoes too"
    plans.redo(store, ctx)
    assert ctx.budget().used == plan.after_tokens


def test_undo_refuses_when_the_latest_change_is_not_a_compaction(store: Store) -> None:
    ctx = load(store, long_session().save(store))
    with pytest.raises(WorkbenchError, match="nothing to undo"):
        undo_compaction(store, ctx)
    compact(store, ctx)
    plan = plans.Plan(session_id=ctx.session.id, strategy="manual-prune",
                      items=[plans.PlanItem(message_id=message_ids(ctx.view())[-1], action="pin")])
    apply(store, ctx, measure(ctx, plan))
    with pytest.raises(WorkbenchError, match="not a compaction"):
        undo_compaction(store, ctx)


def test_history_lists_every_compaction(store: Store) -> None:
    ctx = import_fixture(store, claude_fixture("258c7280"))
    first, _ = compact(store, ctx)
    undo_compaction(store, ctx)
    second, result = compact(store, ctx, trigger="auto")
    history = compaction_history(load(store, ctx.session.id))
    assert [(h.origin, h.trigger, h.undone) for h in history] == [
        ("import", "auto", False), ("compaction", "manual", True), ("compaction", "auto", False)]
    imported, undone, live = history
    assert imported.before_tokens == 167094 and imported.after_tokens is None
    assert (undone.plan_id, undone.summarizer) == (first.plan_id, "heuristic")
    assert undone.before_tokens == first.before_tokens
    assert (live.before_tokens, live.after_tokens, live.summarized) == (
        second.before_tokens, result.after_tokens, len(second.summarized))
    assert all(h.created_at is not None for h in history[1:])


def test_plan_files_are_flagged_for_the_next_request(store: Store, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "docs" / "plan").mkdir(parents=True)
    (workspace / "docs" / "plan" / "01-vision.md").write_text("# Vision\n")
    b = long_session()
    b.workspace = workspace
    ctx = load(store, b.save(store))
    plan, _ = compact(store, ctx)
    assert plan.metadata.plan_files == ["docs/plan/01-vision.md"]
    assert plan_files_to_reinject(ctx) == ["docs/plan/01-vision.md"]
    reply = Message(id="r", session_id=ctx.session.id, index=len(ctx.messages), role="assistant",
                    parts=[TextPart(text="ok")])
    ctx.append(reply)
    assert plan_files_to_reinject(ctx) == []


def test_compaction_of_a_session_built_from_scratch_counts_like_a_fresh_load(store: Store) -> None:
    """The live context after apply equals what loading the store gives (token counts included)."""
    b = long_session(turns=14, pins=(2,))
    ctx = load(store, b.save(store))
    _plan, result = compact(store, ctx)
    fresh = load(store, ctx.session.id)
    assert fingerprint(fresh.view()) == fingerprint(ctx.view())
    assert fresh.budget().used == result.after_tokens
    assert store.integrity_check() == "ok"


def test_the_compaction_section_of_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('''[compaction]
split = "preserve_ratio"
summarizer = "heuristic"
decision_markers = ["agreed"]

[[compaction.hooks.session_start]]
command = "echo started"
''')
    config = load_config(path)
    assert (config.compaction.split, config.compaction.summarizer) == ("preserve_ratio", "heuristic")
    assert config.compaction.decision_markers == ["agreed"]
    assert config.compaction.hooks.session_start[0].command == "echo started"
    path.write_text("[compaction]\ntail_min = 9000\ntail_max = 1000\n")
    with pytest.raises(ConfigError, match="compaction"):
        load_config(path)
    path.write_text("[compaction]\nsplitt = \"opencode\"\n")
    with pytest.raises(ConfigError, match="compaction.splitt"):
        load_config(path)
