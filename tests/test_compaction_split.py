"""Property tests: on any session (random turns, tool loops, pins, result sizes) and any split rule,
a compaction parts no tool call from its result, keeps every pinned message, renders a valid
request, predicts its tokens exactly, and undoes to the identical projection; one that would not
make the context smaller is refused and changes nothing."""

from __future__ import annotations

import pytest
from compaction_helpers import SessionBuilder, assert_valid_request, fingerprint, load, message_ids, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.engine.plans.compaction import Compactor, NothingToCompact
from workbench.engine.plans.compaction_history import undo_compaction
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.transcript.models import ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store


@st.composite
def sessions(draw: st.DrawFn) -> SessionBuilder:
    b = SessionBuilder()
    words = st.integers(min_value=5, max_value=600)
    for turn in range(draw(st.integers(min_value=1, max_value=7))):
        b.user(" ".join(f"ask{turn}w{i}" for i in range(draw(words))), pin=draw(st.booleans()) and draw(st.booleans()))
        for loop in range(draw(st.integers(min_value=0, max_value=3))):
            calls = [(draw(st.sampled_from(["read_file", "shell", "Edit", "todo_write"])), {"n": f"{turn}.{loop}.{c}"},
                      " ".join(f"out{c}x{i}" for i in range(draw(words))), draw(st.booleans()) and draw(st.booleans()))
                     for c in range(draw(st.integers(min_value=1, max_value=3)))]
            b.assistant(draw(st.sampled_from([None, f"step {turn}.{loop}"])), pin=draw(st.integers(0, 5)) == 0,
                        tools=calls)
        b.assistant(" ".join(f"reply{turn}w{i}" for i in range(draw(words))), pin=draw(st.integers(0, 5)) == 0)
    return b


configs = st.one_of(
    st.builds(CompactionConfig, tail_min=st.integers(0, 1_500), tail_max=st.integers(1_500, 6_000)),
    st.builds(CompactionConfig, split=st.just("keep_recent"), keep_recent_tokens=st.integers(0, 4_000),
              keep_recent_messages=st.integers(0, 6)),
    st.builds(CompactionConfig, split=st.just("preserve_ratio"), preserve_ratio=st.floats(0, 1)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), config=configs)
def test_any_compaction_keeps_pairs_pins_and_a_valid_request(session: SessionBuilder, config: CompactionConfig) -> None:
    with Store(":memory:") as store:
        ctx = load(store, session.save(store))
        before, used = fingerprint(ctx.view()), ctx.budget().used
        compactor = Compactor(store, ctx, config)
        plan = run(compactor.preview())
        ids = message_ids(ctx.view())
        assert [*plan.summarized, *plan.preserved, *plan.tail] != [] and ids[len(ids) - len(plan.tail):] == plan.tail
        assert sorted([*plan.summarized, *plan.preserved, *plan.tail]) == sorted(ids)
        kept = set(plan.preserved) | set(plan.tail)
        assert set(ctx.overlay.pinned) <= kept
        call_at = {p.id: m.id for m in ctx.messages for p in m.parts if isinstance(p, ToolUsePart)}
        for message in ctx.messages:
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    assert (message.id in kept) == (call_at[part.tool_use_id] in kept), "a tool pair was split"
        if not plan.summarized or plan.after_tokens >= plan.before_tokens:  # spec 001 §6: only what reduces applies
            with pytest.raises(NothingToCompact):
                run(compactor.apply(plan))
            assert fingerprint(ctx.view()) == before and ctx.budget().used == used
            return
        result = run(compactor.apply(plan))
        assert result.after_tokens == plan.after_tokens == ctx.budget().used
        assert message_ids(ctx.view()) == [result.summary_id, *plan.preserved, *plan.tail]
        assert_valid_request(ctx.view())
        undo_compaction(store, ctx)
        assert fingerprint(ctx.view()) == before and ctx.budget().used == used
