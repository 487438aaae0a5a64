"""Settings of full compaction: where the tail starts, who summarises, hooks. The ``[compaction]`` config section.

The specs disagree on the split and the summariser; each choice is an option here,
the default the one a user of the workbench would expect (see docs/configuration.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SplitRule = Literal["opencode", "keep_recent", "preserve_ratio"]
SummarizerChoice = Literal["auto", "llm", "heuristic"]

DEFAULT_DECISION_MARKERS = (
    "decided",
    "we will",
    "we'll",
    "i will",
    "i'll go with",
    "chose",
    "going with",
    "decision:",
    "the plan is",
)


class HookCommand(BaseModel):
    """A shell command run like a Claude Code hook: JSON on stdin, exit 0 for success,
    optional JSON on stdout (``{"instructions": ...}`` or ``{"cancel": true, "reason": ...}``)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    command: str = Field(min_length=1)
    timeout: float = Field(60.0, gt=0)
    """Seconds before the command is killed and reported as failed."""


class CompactionHooks(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    pre_compact: list[HookCommand] = Field(default_factory=list)
    """Run before the summary is made; may add instructions or cancel (spec 004)."""
    session_start: list[HookCommand] = Field(default_factory=list)
    """Run after a compaction is applied, with ``source: "compact"`` (spec 004)."""


class CompactionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    auto: bool = True
    """Compact on the agent's own: at the compact and block thresholds (spec 001 §3) and after a step whose
    reported usage overflows the window (spec 002 §3.1). ``false`` is spec 000's manual-only mode: only ``c``,
    ``/compact``, ``compact_context`` or ``workbench compact`` compact, and the recovery after the API refuses
    a request as too long still does (spec 000's cascade)."""
    split: SplitRule = "opencode"
    """How much recent conversation is kept verbatim: ``opencode`` (a share of the usable window,
    clamped), ``keep_recent`` (spec 003: a token count, or a message count when that is 0),
    ``preserve_ratio`` (spec 004: a share of the conversation's current tokens)."""
    tail_share: float = Field(0.25, gt=0, le=1)
    """``opencode``: share of the usable window (window minus output reserve) kept as the tail."""
    tail_min: int = Field(2_000, ge=0)
    tail_max: int = Field(15_000, ge=0)
    keep_recent_tokens: int = Field(20_000, ge=0)
    """``keep_recent``: tokens kept, at most half the usable window; 0 to keep a message count instead."""
    keep_recent_messages: int = Field(5, ge=0)
    preserve_ratio: float = Field(0.40, ge=0, le=1)
    """``preserve_ratio``: share of the conversation's tokens kept verbatim."""
    tail_at_turn: bool = False
    """The tail starts where a user turn starts (the first inside the tail's budget, else the turn the budget
    ends in, kept whole even past the budget), never mid-turn; off, it starts at any message that keeps
    tool calls with their results, so a finished turn bigger than the tail can still be compacted. Either
    way the turn in progress is kept whole: the model has not answered it yet."""

    summarizer: SummarizerChoice = "auto"
    """``auto``: the model through the session's provider, or the offline heuristic when the
    provider cannot summarise (the scripted replay). ``llm`` or ``heuristic`` force one."""
    model: str | None = None
    """Model for the summary; by default the session's own."""
    summary_max_tokens: int = Field(8_192, gt=0)
    tool_result_clip: int = Field(1_800, gt=0)
    """Characters of each tool result (and tool input) the summariser reads (spec 003)."""
    prior_summary_clip: int = Field(6_000, gt=0)
    """Characters of the previous summary the heuristic summary carries forward."""
    decision_markers: list[str] = Field(default_factory=lambda: list(DEFAULT_DECISION_MARKERS))
    """Agent sentences containing one of these (case-insensitive) are listed as key decisions."""
    max_decisions: int = Field(15, ge=0)
    hooks: CompactionHooks = Field(default_factory=CompactionHooks)

    @model_validator(mode="after")
    def _ordered(self) -> CompactionConfig:
        if self.tail_min > self.tail_max:
            raise ValueError("compaction.tail_min must not exceed compaction.tail_max")
        return self
