"""The one measure tries a compaction without replaying the session, and gets what a replay gets.

``plans.measure.trial`` starts a plan with a pivot from the live view's kept items (``pivot_trial``);
each case here checks that start is taken and that its items, requests, excluded messages and budget
equal a full replay of the session with the plan applied, and that a plan it cannot start that way is
replayed (and measured exactly all the same).
"""

from __future__ import annotations

import pytest
from compaction_helpers import compact, import_fixture, load, long_session, preview
from helpers import COMPACTABLE, claude_fixture

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import NEW_MESSAGE, dated_events, measure, new_messages, trial
from workbench.engine.plans.pivot_trial import after_pivot
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.transcript.store import Store


def replayed(ctx: SessionContext, plan: Plan) -> SessionContext:
    """The session replayed from its first message with the plan applied."""
    return SessionContext(ctx.session, [*ctx.messages, *new_messages(ctx, plan)], [*ctx.events, *dated_events(plan)],
                          ctx.counter, ctx.config, ctx.calibrator, ctx.fixed_items)


def started_afresh(ctx: SessionContext, plan: Plan) -> bool:
    return after_pivot(ctx, plan, new_messages(ctx, plan), [*ctx.events, *dated_events(plan)]) is not None


def assert_as_replayed(ctx: SessionContext, plan: Plan) -> None:
    fast, full = trial(ctx, plan), replayed(ctx, plan)
    assert fast.view().items == full.view().items
    assert fast.view().requests == full.view().requests
    assert fast.view().excluded == full.view().excluded
    assert fast.budget() == full.budget()
    assert plan.tokens_after == full.budget().used


@pytest.mark.parametrize("key", COMPACTABLE)
def test_a_fixture_compaction_is_tried_without_a_replay(store: Store, key: str) -> None:
    ctx = import_fixture(store, claude_fixture(key))
    plan = preview(store, ctx).plan
    assert started_afresh(ctx, plan)
    assert_as_replayed(ctx, plan)


def test_pins_that_keep_tool_pairs_whole_show_on_the_kept_items(store: Store) -> None:
    ctx = load(store, long_session(turns=12, pins=(1,)).save(store))
    made = preview(store, ctx, config=CompactionConfig(tail_max=2_000))
    assert made.pair_pins, "the case needs a message pinned by the plan"
    assert started_afresh(ctx, made.plan)
    assert_as_replayed(ctx, made.plan)
    pinned = next(i for i in trial(ctx, made.plan).view().items if i.message_id == made.pair_pins[0])
    assert "PERSIST" in pinned.badges


def test_a_second_compaction(store: Store) -> None:
    ctx = load(store, long_session(turns=10).save(store))
    compact(store, ctx, config=CompactionConfig(tail_max=2_000))
    second = preview(store, ctx, config=CompactionConfig(tail_max=2_000))
    assert started_afresh(ctx, second.plan)
    assert_as_replayed(ctx, second.plan)


def test_a_compaction_with_no_tail_pivots_on_its_own_marker(store: Store) -> None:
    ctx = load(store, long_session(turns=10, words=100).save(store))
    compact(store, ctx, config=CompactionConfig(tail_max=6_000))
    empty = preview(store, ctx, config=CompactionConfig(tail_max=6_000))
    assert empty.tail == [] and started_afresh(ctx, empty.plan)
    assert_as_replayed(ctx, empty.plan)


def test_a_truncation_inside_the_previous_tail_keeps_the_previous_summary_first(store: Store) -> None:
    ctx = load(store, long_session(turns=10, words=100).save(store))
    first, _ = compact(store, ctx, config=CompactionConfig(tail_max=6_000))
    cut = preview(store, ctx, truncate_before=first.tail[2])
    assert f"{first.plan_id}-summary" in cut.pair_pins
    assert started_afresh(ctx, cut.plan)
    assert_as_replayed(ctx, cut.plan)


def test_a_pivot_a_replay_would_place_otherwise_is_replayed(store: Store) -> None:
    """A pivot inside the previous tail leaving the previous summary unpinned: a replay reaches that summary
    after the pivot and keeps it, which the kept items cannot say; the measure replays, and is exact."""
    ctx = load(store, long_session(turns=10, words=100).save(store))
    first, _ = compact(store, ctx, config=CompactionConfig(tail_max=6_000))
    spec = {"role": "user", "kind": "summary", "text": "a summary", "source": {"compaction": "hand"}}
    plan = Plan(session_id=ctx.session.id, strategy="compaction", origin="compaction", items=[
        PlanItem(first.tail[2], "pivot", None, "by hand", 0, {"summary_id": "hand-summary"}),
        PlanItem("hand-summary", "summary", None, "by hand", 0, {NEW_MESSAGE: spec}),
    ])
    assert not started_afresh(ctx, plan)
    measure(ctx, plan)
    assert_as_replayed(ctx, plan)


def test_a_plan_that_also_changes_a_kept_message_is_replayed(store: Store) -> None:
    """Pruning a kept message changes an item the live view holds: only a replay projects it anew."""
    ctx = load(store, long_session(turns=10, words=100).save(store))
    made = preview(store, ctx, config=CompactionConfig(tail_max=6_000))
    plan = made.plan.model_copy(deep=True)
    result = next(m for m in ctx.messages if m.id in made.tail and m.kind == "tool_result")
    plan.items.append(PlanItem(result.id, "prune", 0, "by hand"))
    assert started_afresh(ctx, made.plan) and not started_afresh(ctx, plan)
    measure(ctx, plan)
    assert_as_replayed(ctx, plan)
    assert plan.tokens_after < made.after_tokens
