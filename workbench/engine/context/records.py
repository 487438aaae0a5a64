"""What the projector tells the estimator: one immutable record per message, and the pivots and restarts.

Raw counts and facts only, never an estimate or a calibrated figure: the records of a session are the same
whatever the estimator and its calibration, so an estimator fed them (live, or from a stored state) arrives
at the same estimate as one fed while the view was built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from workbench.engine.transcript.models import Usage

SUMMARISER = " (summariser)"
"""Appended to the model of a summariser's own request (OpenCode records it on the summary): it runs as another
agent, with its own system prompt and no session tools, so the estimate keeps its overhead apart from the
session's and does not carry the session's into it. The projector keys such a request with it; the estimator
reads it."""

RawChange = tuple[int, datetime | None]
"""An overlay change to one message in raw tokens, and when it was made (None: live, not stored yet)."""


class MessageRecord(NamedTuple):
    """One message as the estimator needs it: what it added to the context (or, ``left``, what it took out).

    A named tuple, not a frozen dataclass: one is made per message read, and a frozen dataclass's slower
    construction showed in reopening a long session."""

    message_id: str
    raw: Mapping[str, int]
    """Raw tokens of its parts as the model gets them, by budget component, framing included."""
    raw_total: int
    """Their sum (a message with no parts still costs its framing)."""
    blocks: int
    """Its content blocks (at least one)."""
    thinking: int
    """How many of those blocks are thinking."""
    new_turn: bool
    """A user's message (or a summary) opens a turn: thinking from the turn before stops being sent."""
    key: str | None
    """Whose anchor, calibration and overhead the request it answers uses (see ``projector.estimate_key``)."""
    model: str | None
    """The model that wrote it (reported by its usage, else recorded on it)."""
    view_model: str | None
    """The view's model once this message is read: whose calibration counts the view's items."""
    usage: Usage | None
    reported: bool
    """Its usage reports a request's input."""
    at: datetime | None
    changes: tuple[RawChange, ...] = ()
    """What the overlay changed in it, one raw change per time it was changed, oldest first, live ones last."""
    written: Mapping[str, int] | None = None
    """With ``changes``: the raw tokens by component of the message as written."""
    written_blocks: int = 0
    left: bool = False
    """Archived: the message left the context; its usage still anchors (the request happened)."""
    left_at: datetime | None = None
    """When it was archived (None: live)."""
    output_whole: bool | None = None
    """Whether its usage's output count is the whole response (its transcript says so: True; says it is the
    count the response started with: False); None when nothing tells."""

    @property
    def visible_raw(self) -> int:
        """Raw tokens without its thinking."""
        return self.raw_total - self.raw.get("thinking", 0)

    @property
    def visible_blocks(self) -> int:
        return max(1, self.blocks - self.thinking)


@dataclass(frozen=True, slots=True)
class PivotRecord:
    """A compaction pivot was reached: what was in context before it is gone (pinned items stay)."""

    message_id: str
    trigger: str
    reported_pre_tokens: int | None
    model: str | None
    """The view's model when the pivot was reached: whose estimate the context before it had."""


@dataclass(frozen=True, slots=True)
class Restart:
    """Nothing reported describes the context any more: estimate it from its items alone."""

    contents: tuple[tuple[int, int], ...]
    """Each item's raw tokens and blocks."""
    model: str | None
