"""Typed events the agent loop emits; any front end subscribes with a callback.

Each event is a pydantic model with a ``type`` tag, so ``workbench run --json``
prints ``event.model_dump_json()`` one per line and a reader can parse them back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter


class _Event(BaseModel):
    session_id: str = ""


class TurnStart(_Event):
    type: Literal["turn_start"] = "turn_start"
    step: int


class TurnEnd(_Event):
    type: Literal["turn_end"] = "turn_end"
    step: int
    stop_reason: str | None = None


class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    text: str


class ThinkingDelta(_Event):
    type: Literal["thinking_delta"] = "thinking_delta"
    text: str


class MessageAdded(_Event):
    type: Literal["message"] = "message"
    message_id: str
    role: str
    kind: str = "message"


class ToolCall(_Event):
    type: Literal["tool_call"] = "tool_call"
    tool_use_id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResult(_Event):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    name: str
    is_error: bool = False
    preview: str = ""
    bytes: int = 0


class Offloaded(_Event):
    type: Literal["offload"] = "offload"
    tool_use_id: str
    ref_id: str
    bytes: int


class UsageReported(_Event):
    type: Literal["usage"] = "usage"
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    estimated_input_tokens: int | None = None
    synthetic: bool = False


class BudgetChanged(_Event):
    type: Literal["budget"] = "budget"
    used: int
    effective_window: int
    percent: float
    level: str
    source: str
    steered: int = 0
    """Tokens steering took out of what the API last reported (``source`` is then ``calibrated``)."""


class Warning(_Event):
    type: Literal["warning"] = "warning"
    kind: str
    message: str


class Retry(_Event):
    type: Literal["retry"] = "retry"
    attempt: int
    delay: float
    reason: str


class CompactionStart(_Event):
    type: Literal["compaction_start"] = "compaction_start"
    trigger: str
    before_tokens: int


class CompactionEnd(_Event):
    type: Literal["compaction_end"] = "compaction_end"
    trigger: str
    before_tokens: int
    after_tokens: int
    summarizer: str = ""
    error: str | None = None


class CompactBoundary(_Event):
    """A compaction was applied (spec 004): the model sees nothing before this point but the summary."""

    type: Literal["compact_boundary"] = "compact_boundary"
    trigger: str
    pre_tokens: int
    post_tokens: int
    plan_id: str = ""
    summary_id: str = ""
    summarizer: str = ""
    summarized: int = 0
    """How many messages the summary replaced."""
    preserved: int = 0
    plan_files: list[str] = Field(default_factory=list)
    """Plan files to inject again into the next request."""


class PlanApplied(_Event):
    """A strategy changed the context (automatically, or by the model's prune / distill)."""

    type: Literal["plan_applied"] = "plan_applied"
    strategy: str
    plan_id: str
    items: int
    tokens_saved: int


class ApprovalNeeded(_Event):
    type: Literal["approval"] = "approval"
    tool_use_id: str
    name: str
    approved: bool


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    message: str


Event = Annotated[
    TurnStart
    | TurnEnd
    | TextDelta
    | ThinkingDelta
    | MessageAdded
    | ToolCall
    | ToolResult
    | Offloaded
    | UsageReported
    | BudgetChanged
    | Warning
    | Retry
    | CompactionStart
    | CompactionEnd
    | CompactBoundary
    | PlanApplied
    | ApprovalNeeded
    | ErrorEvent,
    Field(discriminator="type"),
]
EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)

EventSink = Callable[[Event], None]
"""Receives every event, in order, on the loop's own task: keep it quick."""
