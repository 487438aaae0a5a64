"""Context strategies as plans: DCP, tool-output pruning, offloading, archiving, and manual changes.

Every strategy is a planner, ``(SessionContext, StrategiesConfig) -> Plan``:
what it would change, why, and the tokens before and after, without changing
anything. ``measure.apply`` commits a plan in one transaction and
``plans.undo`` reverts it. The transcript is never modified.

The registry is imported lazily: ``workbench.engine.config`` imports the
settings from this package, and the planners import the context, which
imports the config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.engine.strategies.settings import StrategiesConfig

if TYPE_CHECKING:
    from workbench.engine.strategies.registry import (
        STRATEGIES,
        automatic_plans,
        enabled_plans,
        nudge,
        plan_strategy,
        run_automatic,
    )

_REGISTRY = ("STRATEGIES", "automatic_plans", "enabled_plans", "nudge", "plan_strategy", "run_automatic")

__all__ = [  # spelled out, not built from _REGISTRY, so that type checkers see what is exported
    "STRATEGIES",
    "StrategiesConfig",
    "automatic_plans",
    "enabled_plans",
    "nudge",
    "plan_strategy",
    "run_automatic",
]


def __getattr__(name: str) -> Any:
    if name in _REGISTRY:
        from workbench.engine.strategies import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
