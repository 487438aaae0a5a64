"""Tool-output pruning (spec 002 §5): the walk back, its stops, its thresholds at the boundary."""

from __future__ import annotations

import pytest
from test_strategies_common import COUNTER, Transcript, big, event, prunes, strategies

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.plans.measure import measure
from workbench.engine.plans.strategies.pruning import plan_tool_output_pruning
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart
from workbench.engine.transcript.overlay import OverlayEvent

PLACEHOLDER = COUNTER.count_text(PRUNED_PLACEHOLDER)


def _tokens(text: str) -> int:
    return COUNTER.count_part(ToolResultPart(tool_use_id="x", text=text))


def _session(skill: bool = False, error: bool = False) -> tuple[Transcript, list[str], list[str]]:
    """Four outputs in the oldest turn, then two newer user turns with outputs of their own."""
    t = Transcript()
    t.user("first task")
    old = []
    outputs = [big(f"out{n}", 300 + 50 * n) for n in range(4)]
    for n, output in enumerate(outputs):
        _, result, _ = t.call("Bash", {"command": f"step {n}"}, output)
        old.append(result)
        if n == 1 and skill:
            t.call("Skill", {"name": "pdf"}, big("skill instructions", 900))
        if n == 1 and error:
            t.call("Bash", {"command": "fail"}, big("traceback", 900), error=True)
    t.user("second task")
    _, _recent, _ = t.call("Bash", {"command": "recent"}, big("recent", 900))
    t.user("third task")
    _, _newest, _ = t.call("Bash", {"command": "newest"}, big("newest", 900))
    t.say()
    return t, old, outputs


def _config(protect: int, minimum: int = 0, **extra: object) -> StrategiesConfig:
    return strategies(tool_output_pruning={"protect": protect, "minimum": minimum, **extra})


def test_the_newest_two_user_turns_are_never_scanned() -> None:
    t, old, _ = _session()
    plan = plan_tool_output_pruning(t.context(), _config(protect=0))
    assert prunes(plan) == {(m, 0) for m in old}
    plan = plan_tool_output_pruning(t.context(), _config(protect=0, skip_turns=1))
    assert len(plan.items) == 5  # the second task's output too, never the third's


@pytest.mark.parametrize(("slack", "pruned"), [(0, 2), (-1, 3)])
def test_protect_boundary(slack: int, pruned: int) -> None:
    """Exactly ``protect`` tokens of newer output are kept; one token less and the next output goes too."""
    t, old, outputs = _session()
    protect = _tokens(outputs[3]) + _tokens(outputs[2]) + slack
    plan = plan_tool_output_pruning(t.context(), _config(protect))
    assert prunes(plan) == {(m, 0) for m in old[:pruned]}


@pytest.mark.parametrize(("slack", "applies"), [(0, False), (-1, True)])
def test_minimum_boundary(slack: int, applies: bool) -> None:
    """Pruning happens only when it saves more than ``minimum`` tokens."""
    t, _old, outputs = _session()
    protect = _tokens(outputs[3]) + _tokens(outputs[2])
    saving = _tokens(outputs[1]) - PLACEHOLDER + _tokens(outputs[0]) - PLACEHOLDER
    plan = plan_tool_output_pruning(t.context(), _config(protect, minimum=saving + slack))
    assert bool(plan.items) is applies


def test_protected_tools_are_neither_pruned_nor_counted() -> None:
    t, old, outputs = _session(skill=True)
    protect = _tokens(outputs[3]) + _tokens(outputs[2])
    plan = plan_tool_output_pruning(t.context(), _config(protect))
    assert prunes(plan) == {(old[0], 0), (old[1], 0)}  # as without the skill output
    plan = plan_tool_output_pruning(t.context(), _config(protect, protected_tools=[]))
    assert len(plan.items) == 3


def test_failed_calls_are_neither_pruned_nor_counted() -> None:
    t, old, outputs = _session(error=True)
    protect = _tokens(outputs[3]) + _tokens(outputs[2])
    assert prunes(plan_tool_output_pruning(t.context(), _config(protect))) == {(old[0], 0), (old[1], 0)}


def test_the_walk_stops_at_an_already_pruned_output() -> None:
    t, old, _ = _session()
    ctx = t.context([event(1, "prune", old[1], 0)])
    plan = plan_tool_output_pruning(ctx, _config(protect=0))
    assert prunes(plan) == {(old[2], 0), (old[3], 0)}  # old[0] lies beyond the boundary of the earlier pass


def test_pinned_outputs_are_kept() -> None:
    t, old, _ = _session()
    plan = plan_tool_output_pruning(t.context([event(1, "pin", old[0])]), _config(protect=0))
    assert prunes(plan) == {(m, 0) for m in old[1:]}


def test_the_walk_stops_at_the_latest_compaction() -> None:
    """Before the pivot nothing is in context; a pinned output kept through the compaction is left alone."""
    t = Transcript()
    t.user("before")
    _, before, _ = t.call("Bash", {"command": "a"}, big("before", 900))
    _, pinned, _ = t.call("Bash", {"command": "b"}, big("pinned", 900))
    tail_start = t.user("after the compaction")
    _, after, _ = t.call("Bash", {"command": "c"}, big("after", 900))
    t.user("second")
    t.user("third")
    summary = Message(id="summary-1", session_id="s", index=len(t.messages), role="user", kind="summary",
                      parts=[TextPart(text="[Previous conversation summary]\nwork so far")],
                      source={"compaction": "c1"})
    t.messages.append(summary)
    events = [
        event(1, "pin", pinned),
        OverlayEvent(id="c1:summary", session_id="s", plan_id="c1", action="summary", message_id=summary.id),
        OverlayEvent(id="c1:pivot", session_id="s", plan_id="c1", action="pivot", message_id=tail_start,
                     data={"summary_id": summary.id}),
    ]
    ctx = t.context(events)
    assert ctx.view().excluded[before] == "before-compaction"
    plan = plan_tool_output_pruning(ctx, _config(protect=0))
    assert prunes(plan) == {(after, 0)}


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_the_walk_stops_at_a_summary_the_transcript_wrote(role: str) -> None:
    """A summary message with no compaction event (an OpenCode summary is the assistant's) is a floor too."""
    t = Transcript()
    t.user("before")
    _, before, _ = t.call("Bash", {"command": "a"}, big("before", 900))
    t.messages.append(Message(id="written-summary", session_id="s", index=len(t.messages), role=role,
                              kind="summary", parts=[TextPart(text="what happened so far")]))
    t.user("after")
    _, after, _ = t.call("Bash", {"command": "c"}, big("after", 900))
    t.user("second")
    t.user("third")
    t.say()
    ctx = t.context()
    assert before not in ctx.view().excluded
    assert prunes(plan_tool_output_pruning(ctx, _config(protect=0))) == {(after, 0)}


def test_defaults_leave_a_small_session_alone() -> None:
    t, _, _ = _session()
    assert not plan_tool_output_pruning(t.context(), StrategiesConfig()).items


def test_applied_plan_saves_what_it_says() -> None:
    t, old, _ = _session()
    ctx = t.context()
    plan = measure(ctx, plan_tool_output_pruning(ctx, _config(protect=0)))
    trial = t.context(plan.events())
    assert plan.tokens_saved == ctx.budget().used - trial.budget().used > 0
    assert sum(i.tokens_saved for i in plan.items) == plan.tokens_saved
    assert all(trial.view().item_for(m).parts[0].text == PRUNED_PLACEHOLDER for m in old)  # type: ignore[union-attr]
