"""The token budget: the view summed by component, against the model's effective window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from workbench.engine.context.projection import ContextView
from workbench.engine.context.view import EstimateSource
from workbench.engine.settings.config import BudgetConfig
from workbench.engine.settings.limits import ModelLimits

COMPONENTS = (
    "system",
    "project",
    "memory",
    "skills",
    "tools",
    "user",
    "assistant",
    "thinking",
    "tool_calls",
    "tool_results",
    "unattributed",
)
"""Components that occupy the window, in the order the budget bar draws them."""

COMPONENT_LABELS = {
    "system": "System prompt",
    "project": "Project / plan",
    "memory": "Memory files",
    "skills": "Skills",
    "tools": "Tool definitions",
    "tools_deferred": "Tools (deferred)",
    "tools_mcp": "MCP tools",
    "reminders": "System reminders",
    "tokenizer_gap": "Tokenizer gap",
    "user": "User text",
    "assistant": "Assistant text",
    "thinking": "Thinking",
    "tool_calls": "Tool calls",
    "tool_results": "Tool results",
    "unattributed": "Unattributed",
    "output_reserve": "Output reserve",
    "free": "Free",
}

Level = Literal["ok", "warn", "compact", "block"]

SOURCE_LABELS: dict[EstimateSource, str] = {
    "reported": "reported by the API",
    "calibrated": "calibrated estimate",
    "estimated": "estimate (tiktoken)",
}
SCRIPTED_LABEL = "counted by the scripted demo, not an API"


class Budget(BaseModel):
    """The context window by component, with its thresholds. Made by :func:`budget_from_totals` from the engine's
    own numbers, without validating them: its validator, built before a session's first frame, took 1 ms, and
    as the process's first one 55 ms more (pydantic loads its plugin machinery then)."""

    model_config = ConfigDict(defer_build=True)
    model: str | None
    context_window: int
    output_reserve: int
    effective_window: int
    components: dict[str, int]
    used: int
    free: int
    percent: float
    warn_at: int
    compact_at: int
    block_at: int
    level: Level
    source: EstimateSource
    cache_hit_rate: float | None = None
    known_model: bool = True
    deferred_tool_tokens: int = 0
    """Tool definitions deferred (spec 001 §5): shown beside ``tools``, not counted in ``used``."""
    steered: int = 0
    """Tokens steering (prune, offload, archive, a strategy) made after the request the API last reported on
    took out of its figure (negative: put back); steering applied to that request is already out of it.
    Nonzero makes the source ``calibrated``: the figure is the report less this."""
    reported: int | None = None
    """With ``steered``: the figure the last report gives for the context as it would be unsteered."""
    scripted: bool = False
    """The report the figure builds on came from a scripted provider (the offline demo): the engine counted
    it, no API reported anything."""

    def source_label(self) -> str:
        """What the figure is, in words: 'reported by the API', 'calibrated: reported N − M steered since', …"""
        if self.steered and self.reported is not None:
            sign, amount = ("−", self.steered) if self.steered > 0 else ("+", -self.steered)
            said = "the scripted demo counted" if self.scripted else "reported"
            return f"calibrated: {said} {self.reported:,} {sign} {amount:,} steered since"
        if self.scripted and self.source == "reported":
            return SCRIPTED_LABEL
        return SOURCE_LABELS[self.source]

    @property
    def over(self) -> bool:
        return self.used > self.effective_window


def output_reserve_for(limits: ModelLimits, config: BudgetConfig) -> int:
    if config.output_reserve is not None:
        return config.output_reserve
    return min(limits.max_output, config.output_reserve_cap)


def budget_from_totals(
    totals: Mapping[str, int],
    *,
    model: str | None,
    limits: ModelLimits,
    config: BudgetConfig,
    source: EstimateSource,
    cache_hit_rate: float | None = None,
    known_model: bool = True,
    context_window: int | None = None,
    deferred_tool_tokens: int = 0,
    steered: int = 0,
    estimate: int | None = None,
    scripted: bool = False,
) -> Budget:
    """Budget from component totals; O(components), so a live session can call it per event. ``estimate``
    (with ``steered``): the estimator's figure, so that the label can say what it was before steering."""
    window = context_window or config.context_window or limits.context_window
    reserve = min(output_reserve_for(limits, config), window // 2)
    effective = window - reserve if limits.max_input is None else min(window - reserve, limits.max_input)
    components = {name: int(totals.get(name, 0)) for name in COMPONENTS}
    for name, tokens in totals.items():
        components.setdefault(name, int(tokens))
    used = sum(components.values())
    percent = 100.0 * used / effective if effective else 100.0
    warn_at, compact_at, block_at = (round(effective * share) for share in (config.warn, config.compact, config.block))
    level: Level = "ok"
    if used >= block_at:
        level = "block"
    elif used >= compact_at:
        level = "compact"
    elif used >= warn_at:
        level = "warn"
    return Budget.model_construct(
        model=model,
        context_window=window,
        output_reserve=reserve,
        effective_window=effective,
        components=components,
        used=used,
        free=max(0, effective - used),
        percent=round(percent, 2),
        warn_at=warn_at,
        compact_at=compact_at,
        block_at=block_at,
        level=level,
        source=source,
        cache_hit_rate=cache_hit_rate,
        known_model=known_model,
        deferred_tool_tokens=deferred_tool_tokens,
        steered=steered,
        reported=(estimate if estimate is not None else used) + steered if steered else None,
        scripted=scripted,
    )


def budget_from_view(
    view: ContextView,
    *,
    limits: ModelLimits,
    config: BudgetConfig,
    known_model: bool = True,
    context_window: int | None = None,
) -> Budget:
    return budget_from_totals(
        view.components(),
        model=view.model,
        limits=limits,
        config=config,
        source=view.estimate_source,
        cache_hit_rate=view.cache_hit_rate,
        known_model=known_model,
        context_window=context_window,
        deferred_tool_tokens=sum(item.deferred_tokens for item in view.items),
    )
