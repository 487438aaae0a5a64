"""What a projection produces: the items of the next model request, with tokens, and the view over them.

Plain frozen data, so the UI, the strategies and the wire can hold a view while the
builder (``projection.py``) goes on with the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from workbench.engine.context.request_log import RequestEstimate
from workbench.engine.transcript.blocks import append_wire, blocks_of
from workbench.engine.transcript.models import Part, TextPart
from workbench.engine.transcript.openai_requests import AGENT_MEMORY, AGENT_REMINDERS

ItemKind = Literal["system", "project", "memory", "skills", "tools", "message", "unattributed"]
EstimateSource = Literal["reported", "calibrated", "estimated"]
Wire = tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One entry of the context as the model receives it: a message (with its parts as sent), or a fixed part
    of the prompt, with its tokens by component."""

    kind: ItemKind
    tokens: int
    components: Mapping[str, int]
    message_id: str | None = None
    index: int | None = None
    role: str | None = None
    badges: tuple[str, ...] = ()
    parts: tuple[Part, ...] = ()
    """The parts as the model receives them, placeholders substituted."""
    raw_tokens: int = 0
    cacheable: bool = False
    """A cache breakpoint follows this system section."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """Tool definitions, for the ``tools`` item."""
    blocks: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)
    """The parts as API content blocks (see ``blocks.py``), when known beforehand; the wire makes them otherwise."""
    deferred_tokens: int = 0
    """For the ``tools`` item: definitions held back (spec 001 §5); not sent, so not in ``tokens``."""


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """A compaction the view went through: its summary message, what triggered it, the tokens before it."""

    message_id: str
    trigger: str
    reported_pre_tokens: int | None
    estimated_pre_tokens: int


@dataclass(frozen=True)
class ContextView:
    """The context as the next request will send it: its items in order, the requests so far and what was
    left out, with why."""

    session_id: str
    model: str | None
    items: tuple[ContextItem, ...]
    estimate_source: EstimateSource
    requests: tuple[RequestEstimate, ...] = ()
    compactions: tuple[CompactionRecord, ...] = ()
    excluded: Mapping[str, str] = field(default_factory=dict)
    """Messages not in the view, with why: before-compaction, sidechain, hidden, archived, marker."""
    cache_hit_rate: float | None = None
    wire_source: Callable[[], Wire | None] | None = field(default=None, repr=False, compare=False)
    """Gives :attr:`wire` from the builder's running copy, or None when that has moved past this view."""

    @cached_property
    def wire(self) -> Wire:
        """The messages as the API receives them: consecutive same-role items joined.

        Made when first asked (a request is about to be sent), not with the view: the content blocks
        double a session's memory, and opening a session to look at it never sends one.
        """
        wire = self.wire_source() if self.wire_source is not None else None
        return wire if wire is not None else wire_of(self.items)

    @property
    def total(self) -> int:
        return sum(item.tokens for item in self.items)

    def components(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for item in self.items:
            for name, tokens in item.components.items():
                totals[name] = totals.get(name, 0) + tokens
        return totals

    def item_for(self, message_id: str) -> ContextItem | None:
        for item in self.items:
            if item.message_id == message_id:
                return item
        return None


PART_COMPONENTS: Mapping[str, str] = {"tool_result": "tool_results", "tool_use": "tool_calls", "thinking": "thinking"}
"""The budget component of a part by kind; text and images count as their message's role."""


def wire_of(items: Iterable[ContextItem]) -> Wire:
    """The API messages of the message items, from scratch."""
    wire: list[dict[str, Any]] = []
    for item in items:
        if item.kind == "message":
            append_wire(wire, item.role or "", item.blocks or blocks_of(item.parts))
    return tuple(wire)


REMINDER = "<system-reminder>"
MEMORY_MARKERS = ("claudemd", "claude.md", "agents.md", "# memory", "memory files")
SKILL_MARKERS = ("<available_skills>", "<skills>", "# skills")


def section_component(text: str) -> str:
    """The budget component of a section of prompt text, by its heading or its markers."""
    head = text[:400].lower()
    if any(marker in head for marker in MEMORY_MARKERS):
        return "memory"
    if any(marker in head for marker in SKILL_MARKERS):
        return "skills"
    return "system"


def text_component(role: str, text: str) -> str:
    """The component of a message's text: the role's, except that a ``<system-reminder>`` the agent put in a
    user message counts as a reminder (or as memory, which Claude Code sends that way); only the text's
    start is read."""
    if role in ("assistant", "system"):
        return role
    head = text[:64].lstrip()
    if head.startswith(AGENT_MEMORY):
        return "memory"
    if head.startswith(AGENT_REMINDERS):
        return "reminders"
    if not head.startswith(REMINDER):
        return "user"
    return "memory" if section_component(text) == "memory" else "reminders"


def component_of(role: str, part: Part) -> str:
    """The budget component a part of a ``role`` message counts in (the same table the projection uses)."""
    if isinstance(part, TextPart):
        return text_component(role, part.text)
    return PART_COMPONENTS.get(part.kind, "assistant" if role == "assistant" else "user")
