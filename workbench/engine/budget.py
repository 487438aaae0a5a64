"""The token budget: the view summed by component, against the model's effective window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel

from workbench.engine.config import BudgetConfig
from workbench.engine.limits import ModelLimits
from workbench.engine.projection import ContextView
from workbench.engine.view import EstimateSource

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


class Budget(BaseModel):
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
) -> Budget:
    """Budget from component totals; O(components), so a live session can call it per event."""
    window = context_window or config.context_window or limits.context_window
    reserve = min(output_reserve_for(limits, config), window // 2)
    effective = window - reserve
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
    return Budget(
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
