"""Model limits: context window, maximum output and the 1M-context beta.

A data table, extendable from config; an unknown model gets a fallback and a
warning, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, Field

MAX_TOKENS = 10**9
"""No window or output is larger: a bigger number in a config is a mistake, and past ~1e308 not even a float."""


class ModelLimits(BaseModel):
    context_window: int = Field(gt=0, le=MAX_TOKENS)
    max_output: int = Field(gt=0, le=MAX_TOKENS)
    context_window_1m: int | None = Field(None, gt=0, le=MAX_TOKENS)
    """Window with the 1M-context beta header, where the model supports it."""


FALLBACK = ModelLimits(context_window=200_000, max_output=8_192)

KNOWN_MODELS: dict[str, ModelLimits] = {
    "claude-opus-4-6": ModelLimits(context_window=200_000, max_output=128_000, context_window_1m=1_000_000),
    "claude-opus-4-5": ModelLimits(context_window=200_000, max_output=64_000),
    "claude-opus-4-1": ModelLimits(context_window=200_000, max_output=32_000),
    "claude-opus-4": ModelLimits(context_window=200_000, max_output=32_000),
    "claude-sonnet-4-6": ModelLimits(context_window=200_000, max_output=64_000, context_window_1m=1_000_000),
    "claude-sonnet-4-5": ModelLimits(context_window=200_000, max_output=64_000, context_window_1m=1_000_000),
    "claude-sonnet-4": ModelLimits(context_window=200_000, max_output=64_000, context_window_1m=1_000_000),
    "claude-haiku-4-5": ModelLimits(context_window=200_000, max_output=64_000),
    "claude-3-7-sonnet": ModelLimits(context_window=200_000, max_output=64_000),
    "claude-3-5-sonnet": ModelLimits(context_window=200_000, max_output=8_192),
    "claude-3-5-haiku": ModelLimits(context_window=200_000, max_output=8_192),
    "claude-3-opus": ModelLimits(context_window=200_000, max_output=4_096),
    "claude-3-haiku": ModelLimits(context_window=200_000, max_output=4_096),
    "gpt-5": ModelLimits(context_window=400_000, max_output=128_000),
    "gpt-4.1": ModelLimits(context_window=1_047_576, max_output=32_768),
    "gpt-4o": ModelLimits(context_window=128_000, max_output=16_384),
    "scripted-demo": ModelLimits(context_window=32_000, max_output=4_096),
}

_DATE_SUFFIX = re.compile(r"-(\d{8}|latest)$")


def lookup(model: str | None, extra: Mapping[str, ModelLimits] | None = None) -> tuple[ModelLimits, bool]:
    """Limits for ``model`` and whether it was known; the longest matching prefix wins."""
    table = {**KNOWN_MODELS, **(extra or {})}
    if not model:
        return FALLBACK, False
    name = _DATE_SUFFIX.sub("", model.strip().lower())
    if name in table:
        return table[name], True
    matches = [key for key in table if name.startswith(key)]
    if matches:
        return table[max(matches, key=len)], True
    return FALLBACK, False


_KEEPS_THINKING = ("claude-opus-4-5", "claude-opus-4-6", "claude-sonnet-4-6", "claude-haiku-4-6")


def keeps_thinking(model: str | None) -> bool:
    """Whether the API keeps earlier turns' thinking blocks in context for this model."""
    return bool(model) and any(str(model).lower().startswith(p) for p in _KEEPS_THINKING)
