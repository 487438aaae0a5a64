"""Model limits: context window, maximum output and the 1M context.

A data table, extendable from config. Model ids are read the way providers write them: dated
(``claude-sonnet-4-5-20250929``), ``-latest``, with Claude Code's ``[1m]`` suffix, or behind a
provider prefix (``anthropic/``, Bedrock's ``us.anthropic.…-v1:0``, Vertex's ``@20250929``). A Claude
id the table does not hold yet (``claude-opus-7``) gets its family's newest limits and a warning; any
other unknown model gets a fallback and a warning, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

MAX_TOKENS = 10**9
"""No window or output is larger: a bigger number in a config is a mistake, and past ~1e308 not even a float."""

WINDOW_1M = 1_000_000
STANDARD_WINDOW = 200_000
"""The window of every Claude model without the 1M context, and the threshold of long-context pricing."""


class ModelLimits(BaseModel):
    model_config = ConfigDict(defer_build=True)  # see config.defaults
    context_window: int = Field(gt=0, le=MAX_TOKENS)
    max_output: int = Field(gt=0, le=MAX_TOKENS)
    context_window_1m: int | None = Field(None, gt=0, le=MAX_TOKENS)
    """Window with the 1M context (a beta header, Claude Code's ``[1m]`` models), where the model offers it."""
    max_input: int | None = Field(None, gt=0, le=MAX_TOKENS)
    """A model's own limit on input, where it has one below window − output (spec 002 §3.1's ``inputLimit``):
    the effective window is then at most this."""


def _limits(window: int, output: int, window_1m: int | None = None) -> ModelLimits:
    """An entry of the table: constants, made without validating them (which would build the model's validator
    on import, see ``config.defaults``)."""
    return ModelLimits.model_construct(context_window=window, max_output=output, context_window_1m=window_1m)


FALLBACK = _limits(200_000, 8_192)

_1M = _limits(WINDOW_1M, 128_000)
"""Models whose standard window is 1M (Opus 4.7 and later, Sonnet 5, Haiku 5.5, Fable, Mythos)."""

KNOWN_MODELS: dict[str, ModelLimits] = {
    # Newest first within a family: the first entry of a family is what an unknown id of that family gets.
    "claude-fable-5-1": _1M,
    "claude-fable-5": _1M,
    "claude-mythos-5-1": _1M,
    "claude-mythos-5": _1M,
    "claude-opus-5-5": _1M,
    "claude-opus-5": _1M,
    "claude-opus-4-8": _1M,
    "claude-opus-4-7": _1M,
    "claude-opus-4-6": _limits(200_000, 128_000, WINDOW_1M),
    "claude-opus-4-5": _limits(200_000, 64_000),
    "claude-opus-4-1": _limits(200_000, 32_000),
    "claude-opus-4": _limits(200_000, 32_000),
    "claude-sonnet-5-5": _1M,
    "claude-sonnet-5": _1M,
    "claude-sonnet-4-6": _limits(200_000, 64_000, WINDOW_1M),
    "claude-sonnet-4-5": _limits(200_000, 64_000, WINDOW_1M),
    "claude-sonnet-4": _limits(200_000, 64_000, WINDOW_1M),
    "claude-haiku-5-5": _1M,
    "claude-haiku-4-5": _limits(200_000, 64_000),
    "claude-3-7-sonnet": _limits(200_000, 64_000),
    "claude-3-5-sonnet": _limits(200_000, 8_192),
    "claude-3-5-haiku": _limits(200_000, 8_192),
    "claude-3-opus": _limits(200_000, 4_096),
    "claude-3-haiku": _limits(200_000, 4_096),
    # OpenAI: windows of the models in Codex CLI 0.171's built-in catalog (``codex debug models``, read
    # 2026-11-28) as Codex uses them; the others and every output limit from OpenAI's model pages (128k for
    # the GPT-5 family). A version the table does not list is not taken for an older one (``gpt-5.7``).
    "gpt-6.2-sol": _limits(500_000, 128_000),
    "gpt-6.2-astra": _limits(272_000, 128_000),
    "gpt-6.1-sol": _limits(500_000, 128_000),
    "gpt-6.1-terra": _limits(500_000, 128_000),
    "gpt-6-astra": _limits(272_000, 128_000),
    "gpt-6-sol": _limits(272_000, 128_000),
    "gpt-6-luna": _limits(272_000, 128_000),
    "gpt-5.6-sol": _limits(272_000, 128_000),
    "gpt-5.6-terra": _limits(272_000, 128_000),
    "gpt-5.6-luna": _limits(272_000, 128_000),
    "gpt-5.5": _limits(272_000, 128_000),
    "gpt-5.4": _limits(400_000, 128_000),
    "gpt-5.3-codex": _limits(400_000, 128_000),
    "gpt-5.2": _limits(400_000, 128_000),
    "gpt-5.1": _limits(400_000, 128_000),
    "gpt-5": _limits(400_000, 128_000),
    "gpt-4.1": _limits(1_047_576, 32_768),
    "gpt-4o": _limits(128_000, 16_384),
    "o3": _limits(200_000, 100_000),
    "o4-mini": _limits(200_000, 100_000),
    "scripted-demo": _limits(32_000, 4_096),
}
"""Claude models as of 2026-11 (platform.claude.com/docs models overview; Opus 4.6 and Sonnet 4.x keep the
200k window unless the 1M context is asked for, as Claude Code's transcripts of them show)."""

FAMILIES = ("fable", "mythos", "opus", "sonnet", "haiku")

_DATE_SUFFIX = re.compile(r"(-\d{8}|-latest|@\d{8}|-v\d+(:\d+)?)$")
_ONE_M_SUFFIX = re.compile(r"\[1m\]$")
_PROVIDER_PREFIX = re.compile(r"^(?:[a-z0-9-]+/|(?:[a-z]{2,4}\.)?anthropic\.)")
_POINT_ZERO = re.compile(r"^(claude-[a-z]+-\d+)-0$")
"""``claude-sonnet-4-0`` is the alias of ``claude-sonnet-4``."""
_FAMILY = re.compile(r"^claude-(?:(fable|mythos|opus|sonnet|haiku)\b|[\d-]+-(sonnet|opus|haiku)\b)")


def normalize(model: str) -> str:
    """The id a model's table entry is keyed by: lower case, no provider prefix, date, ``-latest`` or ``[1m]``."""
    name = _ONE_M_SUFFIX.sub("", model.strip().lower())
    name = _PROVIDER_PREFIX.sub("", name)
    while (shorter := _DATE_SUFFIX.sub("", name)) != name:  # Bedrock: a date, then a version
        name = shorter
    return _POINT_ZERO.sub(r"\1", name)


def asks_for_1m(model: str | None) -> bool:
    """Whether the model id itself selects the 1M context (Claude Code's ``claude-opus-4-6[1m]``)."""
    return bool(model) and bool(_ONE_M_SUFFIX.search(str(model).strip().lower()))


def family(model: str | None) -> str | None:
    """``opus``, ``sonnet``, ``haiku``, ``fable`` or ``mythos`` for a Claude id, else None."""
    if not model:
        return None
    match = _FAMILY.match(normalize(model))
    return (match.group(1) or match.group(2)) if match else None


def match_key(name: str, keys: Mapping[str, object] | list[str]) -> str | None:
    """The table key for a normalized ``name``: itself, else the longest key it extends.

    A key only matches an id that extends it with something other than a version number, so
    ``claude-opus-4`` is not taken for ``claude-opus-4-8`` nor ``gpt-5`` for ``gpt-5.5`` (models of their own).
    """
    if name in keys:
        return name
    best: str | None = None
    for key in keys:
        if not name.startswith(key) or (best is not None and len(key) <= len(best)):
            continue
        rest = name[len(key):]
        if key.startswith("claude-") and re.match(r"-\d", rest):
            continue
        if not key.startswith("claude-") and re.match(r"[.\d]", rest):
            continue  # ``gpt-5.5`` is not ``gpt-5``, nor ``o30`` ``o3``
        best = key
    return best


def family_key(model: str | None, keys: Mapping[str, object] | list[str]) -> str | None:
    """The newest table key of the model's family (the first listed), for an id the table does not hold."""
    name = family(model)
    if name is None:
        return None
    return next((key for key in keys if family(key) == name), None)


def lookup(model: str | None, extra: Mapping[str, ModelLimits] | None = None) -> tuple[ModelLimits, bool]:
    """Limits for ``model`` and whether it was known; config entries (``extra``) win over the table.

    An unknown Claude id gets its family's newest limits, still reported as not known (see :func:`model_warning`).
    """
    if not model:
        return FALLBACK, False
    table = {**(extra or {}), **{k: v for k, v in KNOWN_MODELS.items() if k not in (extra or {})}}
    key = match_key(normalize(model), table)
    if key is not None:
        return table[key], True
    guess = family_key(model, list(KNOWN_MODELS))
    return (KNOWN_MODELS[guess] if guess else FALLBACK), False


def model_warning(model: str | None, extra: Mapping[str, ModelLimits] | None = None) -> str | None:
    """One line for a model the table does not know, saying what is assumed instead; None for a known one."""
    limits, known = lookup(model, extra)
    if known:
        return None
    guess = family_key(model, list(KNOWN_MODELS))
    if guess is not None:
        return (f"unknown model {model}: assuming the limits of {guess}, the newest {family(model)} model known "
                f"({limits.context_window:,}-token window)")
    return f"unknown model {model or '(none)'}: assuming a {limits.context_window:,}-token window"


BETA_1M_PREFIX = "context-1m"
"""The ``anthropic-beta`` value that asks for the 1M context (``context-1m-2025-08-07``)."""


def inferred_window(
    model: str | None, limits: ModelLimits, *, peak_input: int = 0, betas: tuple[str, ...] = ()
) -> tuple[int | None, str | None]:
    """The 1M window when the session shows it has it, and what shows it; (None, None) otherwise.

    Evidence, in order: the model id's ``[1m]`` suffix, a request's ``context-1m`` beta header, a
    reported request larger than the standard window of a model that has a 1M variant. A model whose
    standard window is already 1M needs none; a model without a 1M variant (a local model's configured
    window, say) keeps its window whatever a request reports: an oversized report is an error of the
    model's, not a bigger window. A window the transcript records, or the config's, is not this
    function's business.
    """
    if limits.context_window >= WINDOW_1M:
        return None, None
    big = limits.context_window_1m or WINDOW_1M
    if asks_for_1m(model):
        return big, f"{model} asks for the 1M context"
    if any(beta.strip().lower().startswith(BETA_1M_PREFIX) for beta in betas):
        return big, "its requests carry the 1M-context beta header"
    if limits.context_window_1m is not None and peak_input > limits.context_window:
        return max(big, peak_input), f"a request of {peak_input:,} tokens is larger than the standard window"
    return None, None


_KEEPS_THINKING = (
    "claude-opus-4-5", "claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8", "claude-opus-5", "claude-sonnet-4-6",
    "claude-sonnet-5", "claude-haiku-4-6", "claude-haiku-5", "claude-fable", "claude-mythos",
)


def keeps_thinking(model: str | None) -> bool:
    """Whether the API keeps earlier turns' thinking blocks in context for this model."""
    return bool(model) and normalize(str(model)).startswith(_KEEPS_THINKING)
