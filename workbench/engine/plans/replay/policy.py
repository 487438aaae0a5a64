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

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.strategies.registry import STRATEGIES, strategy_name
from workbench.engine.settings.policies import Policy
from workbench.engine.settings.strategies import StrategiesConfig

POLICIES: Mapping[str, Policy] = {"default": Policy()}
"""The built-in policies by name."""


def policy_named(name: str, defined: Mapping[str, Policy] | None = None) -> Policy:
    """The policy ``name``: one the user defined (``[policies.NAME]``), else a built-in one."""
    own = (defined or {}).get(name)
    found = own.model_copy(update={"name": name}) if own is not None else POLICIES.get(name)
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
