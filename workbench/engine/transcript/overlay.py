"""The overlay: per-message state that changes what the model sees.

The transcript is never edited; every change is an :class:`OverlayEvent`
recorded with a reason, and :func:`fold` turns the events (minus the undone
ones) into the :class:`OverlayState` that projection reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from workbench.engine.transcript.models import DEFERRED

Action = Literal[
    "pin",
    "unpin",
    "prune",
    "restore",
    "offload",
    "inline",
    "archive",
    "unarchive",
    "summary",
    "pivot",
]

Origin = Literal["user", "persist-tag", "import", "strategy", "compaction", "agent", "policy"]
NOT_UNDOABLE_ORIGINS: tuple[Origin, ...] = ("import",)
"""What a transcript recorded (its own compactions, summaries) is history, not an edit to undo."""


class OverlayEvent(BaseModel):
    model_config = DEFERRED

    id: str
    session_id: str
    plan_id: str
    """Events applied together share a plan id; undo reverts one plan at a time."""
    action: Action
    message_id: str
    part_index: int | None = None
    origin: Origin = "user"
    reason: str = ""
    tokens_saved: int = 0
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = Field(default_factory=lambda: datetime.now(UTC))
    """When the change was made: stamped on creation, so a live context dates it as a reopened one does (the
    estimate reads a change made before a request as reflected in that request's report)."""
    undone: bool = False


@dataclass(frozen=True)
class Pivot:
    """A compaction boundary: the model sees nothing before it."""

    message_id: str
    """The first message the model sees after the compaction (the start of the kept tail)."""
    trigger: str = "manual"
    pre_tokens: int | None = None
    summary_id: str | None = None
    """The summary message, shown first however late in the transcript it was written."""


@dataclass(frozen=True)
class Offload:
    """A tool result moved to the blob table; the model sees a reference instead."""

    ref_id: str
    tool_name: str = ""
    byte_size: int = 0
    path: str = ""
    """A proxied agent's: the file its whole output was written to, which the agent reads back itself."""
    lines: int = 0


@dataclass
class OverlayState:
    """The live overlay events folded into what they say now: what is pinned, pruned, offloaded, archived,
    summarised."""

    pinned: set[str] = field(default_factory=set)
    pruned: set[tuple[str, int | None]] = field(default_factory=set)
    offloaded: dict[tuple[str, int | None], Offload] = field(default_factory=dict)
    archived: set[str] = field(default_factory=set)
    archived_at: dict[str, datetime | None] = field(default_factory=dict)
    """When each archived message left the context; None for a change not yet stored."""
    dropped: set[str] = field(default_factory=set)
    """The archived messages a proxied agent itself stopped sending: the proxy leaves its requests as they are for
    these, and takes the others (the user's, a strategy's) out of them."""
    replacements: dict[tuple[str, int | None], str] = field(default_factory=dict)
    """Text shown instead of the default placeholder for a pruned part (a distilled summary, say)."""
    summaries: set[str] = field(default_factory=set)
    pivots: list[Pivot] = field(default_factory=list)
    changed_at: dict[tuple[str, int | None], datetime | None] = field(default_factory=dict)
    """When a part's content was replaced (pruned or offloaded); None for a change not yet stored."""

    def change_time(self, message_id: str, part_index: int) -> datetime | None:
        key = (message_id, part_index)
        return self.changed_at[key] if key in self.changed_at else self.changed_at.get((message_id, None))

    @property
    def last_pivot(self) -> Pivot | None:
        return self.pivots[-1] if self.pivots else None

    def is_pruned(self, message_id: str, part_index: int) -> bool:
        return (message_id, part_index) in self.pruned or (message_id, None) in self.pruned


PENDING = "cache-cold"
"""``data["when"]`` of an event queued until a proxied agent's prompt cache has gone cold: it changes
nothing until the proxy sets ``data["activated_at"]`` (see ``edit_price``)."""


def is_pending(event: OverlayEvent) -> bool:
    return event.data.get("when") == PENDING and not event.data.get("activated_at")


EntryState = Literal["applied", "queued", "undone", "cancelled"]
"""Of a plan in the history: ``queued`` waits for a proxied agent's cache to go cold (``overlay.PENDING``);
``cancelled`` was taken back while it waited, so no request ever carried it."""


def entry_state(event: OverlayEvent) -> EntryState:
    """Where a plan stands, read from one of its events."""
    if event.undone:
        return "cancelled" if is_pending(event) else "undone"
    return "queued" if is_pending(event) else "applied"


def fold(events: Iterable[OverlayEvent]) -> OverlayState:
    """Replay events in order; later events win, undone and still-queued ones are skipped."""
    state = OverlayState()
    for ev in events:
        if ev.undone or (ev.data and is_pending(ev)):
            continue
        key = (ev.message_id, ev.part_index)
        match ev.action:
            case "pin":
                state.pinned.add(ev.message_id)
            case "unpin":
                state.pinned.discard(ev.message_id)
            case "prune":
                state.pruned.add(key)
                state.changed_at[key] = ev.created_at
                if "replacement" in ev.data:
                    state.replacements[key] = str(ev.data["replacement"])
                else:
                    state.replacements.pop(key, None)
            case "restore":
                state.pruned.discard(key)
                state.replacements.pop(key, None)
            case "offload":
                state.changed_at[key] = ev.created_at
                state.offloaded[key] = Offload(
                    ref_id=str(ev.data.get("ref_id", "")),
                    tool_name=str(ev.data.get("tool_name", "")),
                    byte_size=int(ev.data.get("byte_size", 0)),
                    path=str(ev.data.get("path", "")),
                    lines=int(ev.data.get("lines", 0)),
                )
            case "inline":
                state.offloaded.pop(key, None)
            case "archive":
                state.archived.add(ev.message_id)
                state.archived_at[ev.message_id] = ev.created_at
                if ev.origin == "agent":
                    state.dropped.add(ev.message_id)
                else:
                    state.dropped.discard(ev.message_id)
            case "unarchive":
                state.archived.discard(ev.message_id)
                state.dropped.discard(ev.message_id)
                state.archived_at.pop(ev.message_id, None)
            case "summary":
                state.summaries.add(ev.message_id)
            case "pivot":
                state.pivots.append(
                    Pivot(
                        message_id=ev.message_id,
                        trigger=str(ev.data.get("trigger", "manual")),
                        pre_tokens=ev.data.get("pre_tokens"),
                        summary_id=ev.data.get("summary_id"),
                    )
                )
    return state
