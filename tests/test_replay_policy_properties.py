"""A policy's plan over generated sessions: never a pinned message changed, never a request the API would refuse
(every tool call still answered, every message and tool result with content), and undone to the same view."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_strategies_properties import SETTINGS, _pairs_whole, _sessions, _snapshot, _stored

from workbench.engine.plans.measure import apply
from workbench.engine.plans.plan import undo
from workbench.engine.plans.policies import policy_plan
from workbench.engine.plans.replay import Policy
from workbench.engine.settings.config import Config
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.store import Store

NAMES = ["dedup", "supersede_writes", "purge_errors", "tool_output_pruning"]


def _valid(wire: list[dict[str, Any]]) -> bool:
    """What the API checks of the messages a strategy can change: content everywhere, no empty text block."""
    for message in wire:
        content = message["content"]
        if not content:
            return False
        for block in content if isinstance(content, list) else ():
            if block["type"] == "text" and not block["text"]:
                return False
            if block["type"] == "tool_result" and block.get("content") in (None, "", []):
                return False
    return True


@SETTINGS
@given(generated=_sessions(), names=st.lists(st.sampled_from(NAMES), min_size=1, unique=True),
       turns=st.integers(1, 3))
def test_a_policy_keeps_pins_and_requests_valid(generated: tuple[Any, list[str], StrategiesConfig],
                                                names: list[str], turns: int) -> None:
    t, pins, strategies = generated
    store: Store
    store, ctx = _stored(t, pins)
    before = ctx.view()
    config = Config(strategies=strategies)
    plan = policy_plan(ctx, Policy(name="p", strategies=names, protect_turns=turns), config)
    assert not {item.message_id for item in plan.items} & set(pins), "a policy changed a pinned message"
    assert len({(i.message_id, i.part_index) for i in plan.items}) == len(plan.items), "each part once"
    apply(store, ctx, plan)
    assert _pairs_whole(ctx.view()) and _valid(ctx.view().wire)
    if plan.items:
        undo(store, ctx)
        assert _snapshot(ctx.view()) == _snapshot(before)
    store.close()
