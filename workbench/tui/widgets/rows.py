"""The message table as plain data: one row per transcript message, joined with the context view.

Built once per snapshot on the engine thread (O(messages)), so the list widget
only looks rows up by index while it paints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from workbench.engine.models import Message, ToolUsePart
from workbench.engine.projection import ContextItem, ContextView, preview_text

EXCLUSION_LABELS: Mapping[str, str] = {
    "before-compaction": "compacted",
    "sidechain": "sidechain",
    "hidden": "hidden",
    "archived": "archived",
    "marker": "boundary",
    "undone-summary": "undone",  # a summary whose compaction was undone; fits the list's badge column
}
"""How the list names why a message is not in context (the engine's reasons are longer)."""


@dataclass(frozen=True, slots=True)
class CallRef:
    """A tool call, as its result's row needs it: the tool, where it was called, with what."""

    name: str
    position: int
    """1-based position of the calling message."""
    input: Mapping[str, Any]


class RowMarks:
    """What the keys and the list read of a row's badges and exclusion, for loaded rows and pictured ones."""

    __slots__ = ()

    if TYPE_CHECKING:  # each row class provides these, as a field or a property; here they are only read
        @property
        def badges(self) -> tuple[str, ...]: ...
        @property
        def excluded(self) -> str | None: ...

    @property
    def exclusion_label(self) -> str | None:
        return EXCLUSION_LABELS.get(self.excluded, self.excluded) if self.excluded else None

    @property
    def pinned(self) -> bool:
        return "PERSIST" in self.badges

    @property
    def archived(self) -> bool:
        return self.excluded == "archived"


@dataclass(frozen=True, slots=True)
class Row(RowMarks):
    position: int
    """1-based position in the transcript."""
    message: Message
    item: ContextItem | None
    """The message as the model receives it; None when it is not in context."""
    excluded: str | None
    """The engine's reason the message is not in context, if it is not."""
    share: float | None
    """Percent of the tokens in context; None when excluded."""
    subagent_peak: int | None = None
    """The largest input a sub-agent this message started reported (its peak context)."""

    @property
    def message_id(self) -> str:
        return self.message.id

    @property
    def role(self) -> str:
        return self.message.role

    @property
    def tokens(self) -> int | None:
        return self.item.tokens if self.item is not None else None

    @property
    def badges(self) -> tuple[str, ...]:
        return self.item.badges if self.item is not None else ()

    def preview(self, width: int) -> str:
        return preview_text(self.message.parts, width)


class ListRow(Protocol):
    """What the list draws of one message and what the keys read of it: a loaded :class:`Row`, or a row of
    a session's stored picture shown while the session loads."""

    @property
    def position(self) -> int: ...
    @property
    def message_id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def tokens(self) -> int | None: ...
    @property
    def share(self) -> float | None: ...
    @property
    def badges(self) -> tuple[str, ...]: ...
    @property
    def excluded(self) -> str | None: ...
    @property
    def exclusion_label(self) -> str | None: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def archived(self) -> bool: ...
    @property
    def subagent_peak(self) -> int | None: ...
    def preview(self, width: int) -> str: ...


class RowSource(Protocol):
    """The rows of one session, by transcript index: :class:`MessageRows`, or a picture's rows."""

    def __len__(self) -> int: ...
    @property
    def in_context(self) -> int: ...
    def row(self, index: int) -> ListRow: ...
    def message_id(self, index: int) -> str: ...
    def tokens(self, index: int) -> int: ...
    def badges(self, index: int) -> tuple[str, ...]: ...
    def index_of(self, message_id: str) -> int | None: ...


class MessageRows:
    """Index -> :class:`Row`, computed on demand from the transcript and the view."""

    def __init__(self, messages: Sequence[Message], view: ContextView, used: int,
                 subagent_peaks: Mapping[str, int] | None = None) -> None:
        self._messages = messages
        self._peaks = subagent_peaks or {}
        self._items: dict[str, ContextItem] = {
            item.message_id: item for item in view.items if item.kind == "message" and item.message_id
        }
        self._excluded = view.excluded
        self._used = used
        self._positions: dict[str, int] | None = None
        self.tool_calls: dict[str, CallRef] = {
            part.id: CallRef(part.name, index + 1, part.input)
            for index, message in enumerate(messages)
            if message.role == "assistant"
            for part in message.parts
            if isinstance(part, ToolUsePart)
        }
        """Tool-use id -> the call, to label results and highlight their output."""

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def messages(self) -> Sequence[Message]:
        return self._messages

    def row(self, index: int) -> Row:
        message = self._messages[index]
        item = self._items.get(message.id)
        share = 100.0 * item.tokens / self._used if item is not None and self._used else None
        excluded = None if item is not None else self._excluded.get(message.id, "not in context")
        return Row(index + 1, message, item, excluded, share, self._peaks.get(message.id))

    def message_id(self, index: int) -> str:
        return self._messages[index].id

    def tokens(self, index: int) -> int:
        """Tokens of a message in context; -1 when it is not in context (for sorting)."""
        item = self._items.get(self._messages[index].id)
        return item.tokens if item is not None else -1

    def badges(self, index: int) -> tuple[str, ...]:
        item = self._items.get(self._messages[index].id)
        return item.badges if item is not None else ()

    def index_of(self, message_id: str) -> int | None:
        """0-based transcript index of a message (built on first use: O(messages) once)."""
        if self._positions is None:
            self._positions = {m.id: i for i, m in enumerate(self._messages)}
        return self._positions.get(message_id)

    @property
    def in_context(self) -> int:
        return len(self._items)
