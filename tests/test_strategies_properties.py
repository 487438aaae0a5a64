"""Properties of every strategy over generated sessions: the transcript never changes, the plan's
numbers are the budget's, undo gives back the same projection, tool pairs stay whole, pins are kept."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_strategies_common import Transcript, big, event

from workbench.engine.context.projection import ContextView
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply
from workbench.engine.plans.plan import undo
from workbench.engine.plans.strategies.registry import STRATEGIES, plan_strategy, run_automatic
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.store import Store

TOOLS = ("Read", "Write", "Edit", "Bash", "Skill")
PATHS = ("a.py", "src/b.py", "docs/plan/p.md")
SIZES = (3, 120, 700)
"""Output sizes in words: tiny, medium, over the (lowered) offload threshold."""


@st.composite
def _sessions(draw: st.DrawFn) -> tuple[Transcript, list[str], StrategiesConfig]:
    t = Transcript(usage=draw(st.booleans(), label="usage"))
    for turn in range(draw(st.integers(1, 6), label="turns")):
        t.user(f"turn {turn}")
        for _ in range(draw(st.integers(0, 4))):
            specs = []
            for _ in range(draw(st.integers(1, 2))):
                tool = draw(st.sampled_from(TOOLS))
                path = draw(st.sampled_from(PATHS))
                tool_input: dict[str, Any] = {
                    "Read": {"file_path": path},
                    "Write": {"file_path": path, "content": big("content", 150)},
                    "Edit": {"file_path": path, "old_string": big("old", 60), "new_string": big("new", 60)},
                    "Bash": {"command": draw(st.sampled_from(("ls", "make test", big("script", 80))))},
                    "Skill": {"name": "pdf"},
                }[tool]
                specs.append((tool, tool_input, big("out", draw(st.sampled_from(SIZES)))))
            if len(specs) == 1:
                tool, tool_input, output = specs[0]
                t.call(tool, tool_input, output, error=draw(st.integers(0, 4)) == 0)
            else:
                t.calls(specs)
        if draw(st.booleans()):
            t.say()
    ids = [m.id for m in t.messages]
    pins = draw(st.lists(st.sampled_from(ids), max_size=3, unique=True), label="pins")
    config = StrategiesConfig.model_validate({
        "dcp": {"turn_protection": draw(st.integers(0, 2))},
        "purge_errors": {"turns": draw(st.integers(0, 2))},
        "tool_output_pruning": {"protect": draw(st.sampled_from((0, 300, 2000))), "minimum": 100, "skip_turns": 1},
        "offload": {"threshold": 2000, "mode": "automatic"},
        "archive": {"cutoff": draw(st.integers(0, 4)), "mode": "automatic"},
    })
    return t, pins, config


def _stored(t: Transcript, pins: list[str]) -> tuple[Store, SessionContext]:
    store = Store(":memory:")
    ctx = t.stored(store)
    pin_events = [event(n, "pin", m) for n, m in enumerate(pins)]
    with ctx.writing(store, check=False):  # the context stays current: its next change is checked against it
        store.add_overlay_events(pin_events)
    ctx.apply_events(pin_events)
    return store, ctx


def _pairs_whole(view: ContextView) -> bool:
    uses: list[str] = []
    results: list[str] = []
    for message in view.wire:
        for block in message["content"]:
            if block["type"] == "tool_use":
                uses.append(block["id"])
            elif block["type"] == "tool_result":
                results.append(block["tool_use_id"])
    return sorted(uses) == sorted(results)


def _snapshot(view: ContextView) -> tuple[object, ...]:
    return tuple((i.kind, i.message_id, i.tokens, i.parts) for i in view.items), view.wire


def _transcript(store: Store) -> list[dict[str, Any]]:
    return [m.model_dump() for m in store.load_messages("s")]


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(generated=_sessions(), name=st.sampled_from(list(STRATEGIES)))
def test_any_plan_applied_then_undone(generated: tuple[Transcript, list[str], StrategiesConfig], name: str) -> None:
    t, pins, config = generated
    store, ctx = _stored(t, pins)
    transcript = _transcript(store)
    before_view = ctx.view()
    assert _pairs_whole(before_view)
    before = ctx.budget().used

    plan = plan_strategy(ctx, name, config)
    assert sum(i.tokens_saved for i in plan.items) == plan.tokens_saved
    touched = {i.message_id for i in plan.items if i.action in ("prune", "archive", "offload")}
    assert not touched & set(pins), "an automatic strategy changed a pinned message"
    apply(store, ctx, plan)

    after_stored = _transcript(store)
    assert after_stored[: len(transcript)] == transcript, "the transcript changed"
    assert all(m["kind"] == "tool_summary" for m in after_stored[len(transcript):])
    reloaded = SessionContext.load(store, "s")
    assert reloaded.budget().used == ctx.budget().used
    assert before - reloaded.budget().used == plan.tokens_saved
    assert _pairs_whole(reloaded.view())

    if plan.items:
        undo(store, ctx)
        assert _snapshot(ctx.view()) == _snapshot(before_view)
        assert _snapshot(SessionContext.load(store, "s").view()) == _snapshot(before_view)
        assert ctx.budget().used == before
    store.close()


@SETTINGS
@given(generated=_sessions())
def test_the_automatic_path(generated: tuple[Transcript, list[str], StrategiesConfig]) -> None:
    t, pins, config = generated
    store, ctx = _stored(t, pins)
    transcript = _transcript(store)
    before_view = ctx.view()
    before = ctx.budget().used
    plans = run_automatic(store, ctx, config)
    assert all(p.items and p.tokens_saved > 0 for p in plans)
    assert before - ctx.budget().used == sum(p.tokens_saved for p in plans)
    assert SessionContext.load(store, "s").budget().used == ctx.budget().used
    assert _transcript(store)[: len(transcript)] == transcript
    assert _pairs_whole(ctx.view())
    for plan in plans:
        assert not {i.message_id for i in plan.items if i.action in ("prune", "archive", "offload")} & set(pins)
    for _ in plans:
        undo(store, ctx)
    assert _snapshot(ctx.view()) == _snapshot(before_view)
    store.close()
