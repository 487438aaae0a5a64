"""The strategies by name, and the automatic path the agent loop calls."""

from __future__ import annotations

from collections.abc import Callable

from workbench.engine.context.session import SessionContext
from workbench.engine.context.wire_offload import refusal
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.measure import apply, measure, measure_on
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.strategies import dcp
from workbench.engine.plans.strategies.archive import due as archive_due
from workbench.engine.plans.strategies.archive import plan_archive
from workbench.engine.plans.strategies.base import Planner, Rewrite
from workbench.engine.plans.strategies.dcp import plan_dedup, plan_purge_errors, plan_supersede_writes
from workbench.engine.plans.strategies.offload import plan_offload
from workbench.engine.plans.strategies.pruning import plan_tool_output_pruning
from workbench.engine.settings.config import Config
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.store import Store

STRATEGIES: dict[str, Planner] = {
    "dedup": plan_dedup,
    "supersede_writes": plan_supersede_writes,
    "purge_errors": plan_purge_errors,
    "tool_output_pruning": plan_tool_output_pruning,
    "offload": plan_offload,
    "archive": plan_archive,
}
"""In the order the automatic path runs them: cheap, exact removals first, the digest last."""

DCP_STRATEGIES = ("dedup", "supersede_writes", "purge_errors")
"""Spec 000 §5's three: the only automatic strategies a sub-agent runs, and only with
``[strategies.dcp] subagents = true``."""

BY_COUNT: dict[str, Callable[[SessionContext, StrategiesConfig], bool]] = {"archive": archive_due}
"""Strategies whose trigger is a count of their own (spec 003's cutoff of tool results), not the share of the
window in use: the automatic path runs them when this says they are due, below ``[strategies] automatic_from`` too
(and plans nothing when they are not: asked before every request, it is cheaper than planning)."""


def _settings(config: Config | StrategiesConfig) -> StrategiesConfig:
    return config.strategies if isinstance(config, Config) else config


def strategy_name(name: str) -> str:
    """``supersede-writes`` and ``supersede_writes`` both name the strategy; anything else is an error."""
    key = name.strip().lower().replace("-", "_")
    if key not in STRATEGIES:
        raise WorkbenchError(f"unknown strategy {name!r}; one of {', '.join(STRATEGIES)}")
    return key


def is_enabled(config: Config | StrategiesConfig, name: str) -> bool:
    return bool(getattr(_settings(config), name).enabled)


def is_automatic(config: Config | StrategiesConfig, name: str) -> bool:
    section = getattr(_settings(config), name)
    return bool(section.enabled and section.mode == "automatic")


def plan_strategy(ctx: SessionContext, name: str, config: Config | StrategiesConfig, *, exact: bool = True) -> Plan:
    """One strategy's plan; ``exact`` measures it by projecting it (otherwise the totals are estimates)."""
    key = strategy_name(name)
    reason = refusal(ctx.session, key)
    if reason is not None:
        raise WorkbenchError(reason)
    plan = STRATEGIES[key](ctx, _settings(config))
    return measure(ctx, plan) if exact else plan


def enabled_plans(ctx: SessionContext, config: Config | StrategiesConfig, *, exact: bool = True) -> list[Plan]:
    """Every enabled strategy's plan against the context as it is now, each on its own (but those the session's
    agent could not follow: ``wire_offload.refusal``)."""
    return [plan_strategy(ctx, name, config, exact=exact) for name in STRATEGIES
            if is_enabled(config, name) and refusal(ctx.session, name) is None]


def automatic_plans(ctx: SessionContext, config: Config | StrategiesConfig, *, window: bool = True,
                    only: tuple[str, ...] | None = None) -> list[Plan]:
    """The enabled automatic strategies' non-empty plans, measured.

    Each is planned and measured on the context as the plans before it leave it,
    so applying them in order (:func:`run_automatic`) gives exactly the measured totals.
    Plans that would not make the context smaller are left out (an archive then waits until
    enough results are past the cutoff to pay for their digest). ``window`` false: the window
    is not full enough for the others, only the :data:`BY_COUNT` strategies that are due run. ``only``:
    these strategies and no others.
    """
    out: list[Plan] = []
    current = ctx
    settings = _settings(config)
    for name, planner in STRATEGIES.items():
        if not is_automatic(config, name) or (only is not None and name not in only):
            continue
        due = BY_COUNT.get(name)
        if (due is None and not window) or (due is not None and not due(current, settings)):
            continue
        plan = planner(current, settings)
        if not plan.items or (due is not None and plan.tokens_saved <= 0):  # estimated: asked every request
            continue
        after = measure_on(current, plan)
        if plan.tokens_saved <= 0:
            continue
        out.append(plan)
        current = after
    return out


def run_automatic(store: Store, ctx: SessionContext, config: Config | StrategiesConfig) -> list[Plan]:
    """Plan and apply the automatic strategies; returns what was applied."""
    plans = automatic_plans(ctx, config)
    for plan in plans:
        apply(store, ctx, plan)
    return plans


async def run_automatic_async(
    store: Store, ctx: SessionContext, config: Config | StrategiesConfig, *, window: bool = True,
    rewrite: Rewrite | None = None, only: tuple[str, ...] | None = None,
) -> list[Plan]:
    """:func:`run_automatic` for the agent loop: ``window`` as in :func:`automatic_plans`, and each plan
    through ``rewrite`` on the context it was planned on (the plans before it applied), then applied; ``only`` as
    there."""
    applied: list[Plan] = []
    for plan in automatic_plans(ctx, config, window=window, only=only):
        final = plan if rewrite is None else await rewrite(ctx, plan)
        apply(store, ctx, final)
        applied.append(final)
    return applied


def nudge(ctx: SessionContext, tool_calls_so_far: int, config: Config | StrategiesConfig) -> str | None:
    """A reminder for the agent to prune (DCP: from 70% of the window, every 15 tool calls), or None."""
    return dcp.nudge(ctx, tool_calls_so_far, _settings(config))
