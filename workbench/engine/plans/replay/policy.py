"""A policy: which strategies run on their own for a proxied agent, and when their edits are worth sending.

Every edit of what an agent already sent breaks its prompt cache from the edited block on, so an edit made on
every request keeps the cache from ever being read. A policy therefore plans its strategies only every few
requests, or when the cache has gone cold; keeps what they find waiting, together; and sends it all at once
only when that pays: when the edited request costs no more than the unedited one would have (a cold cache, or
an edit the cache does not reach), or when what every later request saves, over the policy's ``payback``
requests, is more than what the edited request costs more.

The strategies leave pinned messages and the newest turns alone themselves (``[strategies]``'s protections).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.strategies.registry import STRATEGIES, strategy_name
from workbench.engine.settings.strategies import StrategiesConfig


class Policy(BaseModel):
    """The settings of one policy; the defaults are the built-in ``default``."""

    model_config = ConfigDict(extra="forbid")

    name: str = "default"
    strategies: list[str] = Field(
        default_factory=lambda: ["dedup", "supersede_writes", "purge_errors", "tool_output_pruning"])
    """Run in this order, each as ``[strategies]`` configures it (its protections included)."""
    payback: int = Field(3, ge=1)
    """An edit the warm cache must re-write is sent only if the next this many requests save more than that."""
    plan_every: int = Field(5, ge=1)
    """Requests between two plannings while the cache is warm (a cold cache is planned for at once)."""
    protect_turns: int = Field(2, ge=1)
    """The newest this many user turns are left alone by every strategy (the current one at least: the agent is
    working in it). An agent like Claude Code does a whole task in one turn, so ``[strategies]``' own protection
    (six turns) would leave a whole session alone."""

    def settings(self, strategies: StrategiesConfig) -> StrategiesConfig:
        """``strategies`` with this policy's protection of the newest turns."""
        dcp = strategies.dcp.model_copy(update={"turn_protection": self.protect_turns})
        pruning = strategies.tool_output_pruning.model_copy(update={"skip_turns": self.protect_turns})
        return strategies.model_copy(update={"dcp": dcp, "tool_output_pruning": pruning})


POLICIES: Mapping[str, Policy] = {"default": Policy()}
"""The built-in policies by name."""


def policy_named(name: str, defined: Mapping[str, Policy] | None = None) -> Policy:
    """The policy ``name``: one the user defined, else a built-in one."""
    found = (defined or {}).get(name) or POLICIES.get(name)
    if found is None:
        known = sorted({*POLICIES, *(defined or {})})
        raise WorkbenchError(f"no policy {name!r}: choose one of {', '.join(known)}")
    for strategy in found.strategies:
        if strategy_name(strategy) == "archive":
            raise WorkbenchError(f"policy {name!r} names archive: a policy prunes, it does not take messages "
                                 "off the wire")
    return found


def planned_edits(ctx: SessionContext, policy: Policy, settings: StrategiesConfig) -> dict[Hashable, int]:
    """What the policy's strategies would change now: the tokens each part would save, by (message id, part
    index), each part once (the first strategy that takes it)."""
    edits: dict[Hashable, int] = {}
    for name in policy.strategies:
        plan = STRATEGIES[strategy_name(name)](ctx, settings)
        for item in plan.items:
            if item.part_index is not None and item.tokens_saved > 0:
                edits.setdefault((item.message_id, item.part_index), item.tokens_saved)
    return edits
