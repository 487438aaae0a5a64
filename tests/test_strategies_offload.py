"""Offloading results already in context (spec 001 §2), by plan and by hand, and inlining them back."""

from __future__ import annotations

import pytest
from test_strategies_common import Transcript, big, event, strategies

from workbench.engine.context.projection import offload_reference
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import redo, undo
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.plans.strategies.offload import plan_offload, ref_id
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.overlay import Offload
from workbench.engine.transcript.store import Store


def _sized(n_bytes: int, fill: str = "x") -> str:
    text = "line of output " * (n_bytes // 15 + 1)
    text = text[: n_bytes - len(fill.encode())] + fill
    assert len(text.encode()) == n_bytes
    return text


@pytest.mark.parametrize(("size", "offloaded"), [(4095, False), (4096, False), (4097, True)])
def test_threshold_boundary_in_bytes(size: int, offloaded: bool) -> None:
    t = Transcript()
    t.user("go")
    _, result, _ = t.call("Bash", {"command": "build"}, _sized(size))
    plan = plan_offload(t.context(), StrategiesConfig())
    assert [(i.message_id, i.part_index) for i in plan.items] == ([(result, 0)] if offloaded else [])


def test_the_threshold_counts_bytes_not_characters() -> None:
    t = Transcript()
    t.user("go")
    t.call("Bash", {"command": "x"}, _sized(4096, fill="é"))  # 4,095 characters, 4,096 bytes
    t.call("Bash", {"command": "y"}, "é" * 2100)  # 2,100 characters, 4,200 bytes
    plan = plan_offload(t.context(), StrategiesConfig())
    assert [i.data["byte_size"] for i in plan.items] == [4200]


def test_apply_stores_the_blob_and_shows_the_reference(store: Store) -> None:
    t = Transcript()
    t.user("go")
    output = big("log", 2000)
    _, result, _ = t.call("Bash", {"command": "make"}, output)
    ctx = t.stored(store)
    before = ctx.budget().used
    plan = measure(ctx, plan_offload(ctx, StrategiesConfig()))
    ref = ref_id("s", result, 0)
    assert plan.items[0].data == {"ref_id": ref, "tool_name": "Bash", "byte_size": len(output.encode())}
    apply(store, ctx, plan)
    assert store.read_blob("s", ref) == output
    expected = offload_reference(Offload(ref, "Bash", len(output.encode())), output)
    assert ctx.view().item_for(result).parts[0].text == expected  # type: ignore[union-attr]
    assert expected.startswith('[Tool result stored — ') and f'ref_id="{ref}"' in expected
    assert before - ctx.budget().used == plan.tokens_saved > 0
    assert store.load_messages("s")[-1].parts[0].text == output  # type: ignore[union-attr]
    undo(store, ctx)
    assert ctx.budget().used == before
    assert store.read_blob("s", ref) == output  # the blob stays; a redo needs it
    redo(store, ctx)
    assert ctx.view().item_for(result).parts[0].text == expected  # type: ignore[union-attr]


def test_what_is_not_offloaded() -> None:
    t = Transcript()
    t.user("go")
    _, pinned, _ = t.call("Bash", {"command": "a"}, big("a", 2000))
    _, pruned, _ = t.call("Bash", {"command": "b"}, big("b", 2000))
    _, done, _ = t.call("Bash", {"command": "c"}, big("c", 2000))
    t.call("read_result", {"ref_id": "r-1"}, big("d", 2000))
    _, plain, _ = t.call("Bash", {"command": "e"}, big("e", 2000))
    events = [event(1, "pin", pinned), event(2, "prune", pruned, 0),
              event(3, "offload", done, 0, ref_id="r-x", tool_name="Bash", byte_size=9)]
    plan = plan_offload(t.context(events), StrategiesConfig())
    assert [i.message_id for i in plan.items] == [plain]
    assert not plan_offload(t.context(), strategies(offload={"threshold": 100_000})).items


def test_manual_offload_and_inline(store: Store) -> None:
    t = Transcript()
    t.user("go")
    _, result, _ = t.call("Bash", {"command": "ls"}, big("listing", 300))  # under the threshold: by hand only
    ctx = t.stored(store)
    before = ctx.budget().used
    message = next(m for m in ctx.messages if m.id == result)
    plan = measure(ctx, plan_action(ctx, "offload", message, StrategiesConfig()))
    assert plan.origin == "user" and len(plan.items) == 1
    apply(store, ctx, plan)
    assert (result, 0) in ctx.overlay.offloaded
    plan = measure(ctx, plan_action(ctx, "inline", message, StrategiesConfig()))
    assert [(i.action, i.part_index) for i in plan.items] == [("inline", 0)]
    apply(store, ctx, plan)
    assert ctx.budget().used == before
    assert not plan_action(ctx, "inline", message, StrategiesConfig()).items


def test_a_tiny_result_is_not_worth_offloading_even_by_hand() -> None:
    t = Transcript()
    t.user("go")
    _, result, _ = t.call("Bash", {"command": "true"}, "ok")
    ctx = t.context()
    message = next(m for m in ctx.messages if m.id == result)
    assert not plan_action(ctx, "offload", message, StrategiesConfig()).items
