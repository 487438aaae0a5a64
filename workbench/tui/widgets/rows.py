"""The message table as plain data: one row per transcript message, joined with the context view.

Built on the engine thread, once when a session loads (O(messages)) and then grown a message at a time, so
the list widget only looks rows up by index while it paints.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import overload

from workbench.engine.context.projection import ContextItem, preview_text
from workbench.engine.transcript.message_log import MessageLog
from workbench.engine.transcript.models import Message
from workbench.tui.widgets.row_lookups import CallIndex, CallRef, ItemIndex

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
class Row:
    """One line of the message list: the message, its item in context (or why it is not there) and its share."""

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

    @property
    def exclusion_label(self) -> str | None:
        return EXCLUSION_LABELS.get(self.excluded, self.excluded) if self.excluded else None

    @property
    def pinned(self) -> bool:
        return "PERSIST" in self.badges

    @property
    def archived(self) -> bool:
        return self.excluded == "archived"

    def preview(self, width: int) -> str:
        return preview_text(self.message.parts, width)


class RowTable:
    """The lookups the rows of one session share, grown as its transcript grows (on the engine thread).

    Each :class:`MessageRows` reads only its first ``count`` messages, whose entries never change once added,
    so a screen state handed to the UI stays what it was while the next one is built: a new message costs
    O(that message), not a new table. The messages are the context's own log (it only grows); a long
    session's are read a page at a time as rows ask for them, and its items made likewise."""

    __slots__ = ("_own", "count", "excluded", "items", "messages", "positions", "tool_calls")

    def __init__(self, messages: MessageLog | None = None) -> None:
        self._own = messages is None
        self.messages = messages if messages is not None else MessageLog()
        """The transcript (shared with the context that grows it); the table holds its first :attr:`count`."""
        self.count = 0
        self.positions = Positions(self.messages.ids)
        """Message id -> 0-based transcript index."""
        self.items = ItemIndex(position_of=self.positions.get)
        """Message id -> its item in the view."""
        self.excluded: dict[str, str] = {}
        """Message id -> why it is not in context."""
        self.tool_calls = CallIndex(self.messages)
        """Tool-use id -> the call, to label results and highlight their output."""

    def add(self, messages: Sequence[Message], items: Sequence[ContextItem], start: int,
            excluded: Mapping[str, str]) -> None:
        """Messages appended to the transcript (``messages``: a table made without a log of its own keeps them;
        otherwise they are the log's next ones), the view's items from ``start`` on, and the view's
        exclusions (read for these messages only)."""
        first = self.count
        if self._own:
            for message in messages:
                self.messages.append(message)
        for message in messages:
            reason = excluded.get(message.id)
            if reason is not None:
                self.excluded[message.id] = reason
        self.positions.grow([message.id for message in messages], first)
        self.tool_calls.add(messages, first)
        self.count = first + len(messages)
        self.items.add(items, start)

    @classmethod
    def build(cls, messages: MessageLog, items: Sequence[ContextItem], excluded: Mapping[str, str]) -> RowTable:
        """From scratch: what :meth:`add` gives for all ``messages`` at once, in bulk; a long session's messages
        are not read, and nothing is made per message (the positions wait until asked for, a resumed view's
        items are looked up by position)."""
        table = cls(messages)
        table.count = len(messages)
        table.positions = Positions(messages.ids, len(messages))
        table.excluded = dict(excluded)
        table.items = ItemIndex(items, table.positions.get)
        stored = messages.stored_count
        table.tool_calls.add(messages[stored:], stored)  # the stored ones are looked up when asked for
        return table


class Positions:
    """Message id -> 0-based transcript index. A long session's open asks for a few (a compaction's mark) or
    none: they are looked for in the ids, and the map is made only when more are asked for (a search, a jump),
    on whichever thread asks; its 50,000 entries were a tenth of the screen state's making. Grown on the engine
    thread, as the table is."""

    __slots__ = ("_count", "_ids", "_lock", "_map", "_scans")

    SCANS = 8
    """Lookups made by a scan of the ids (in C, well under a millisecond each) before the map is made."""

    def __init__(self, ids: Sequence[str], count: int = 0) -> None:
        """``ids``: the transcript's ids by position; the first ``count`` of them are in the table already."""
        self._ids = ids
        self._count = count
        self._map: dict[str, int] | None = None if count else {}
        self._scans = 0
        self._lock = threading.Lock()
        """Held while the map is made and while it grows, so neither misses what the other adds."""

    def get(self, message_id: str) -> int | None:
        found = self._map
        if found is None and self._scans < self.SCANS:
            self._scans += 1
            try:
                return self._ids.index(message_id, 0, self._count)
            except ValueError:
                return None
        if found is None:
            with self._lock:
                found = self._map
                if found is None:
                    found = self._map = dict(zip(self._ids, range(self._count)))
        return found.get(message_id)

    def grow(self, message_ids: Sequence[str], first: int) -> None:
        """The ids of the messages at ``first`` on, appended to the table."""
        with self._lock:
            if self._map is not None:
                self._map.update(zip(message_ids, range(first, first + len(message_ids))))
            self._count = first + len(message_ids)


class Prefix(Sequence[Message]):
    """The first ``count`` messages of a log that only grows: a fixed sequence, without copying it."""

    __slots__ = ("_count", "_messages")

    def __init__(self, messages: Sequence[Message], count: int) -> None:
        self._messages = messages
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            if step == 1:
                return tuple(self._messages[start:max(start, stop)])
            return tuple(self._messages[i] for i in range(start, stop, step))
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("message index out of range")
        return self._messages[index]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._messages, self._count)


class MessageRows:
    """Index -> :class:`Row`, computed on demand from the transcript and the view."""

    def __init__(self, table: RowTable, used: int, subagent_peaks: Mapping[str, int] | None = None) -> None:
        """``subagent_peaks``: message id -> the peak input of the sub-agents it started (shown on its row)."""
        self._table = table
        self._peaks: Mapping[str, int] = subagent_peaks or {}
        self._count = table.count
        self._in_context = len(table.items)
        self._used = used
        self.messages: Sequence[Message] = Prefix(table.messages, self._count)
        self.tool_calls: Mapping[str, CallRef] = table.tool_calls
        """Tool-use id -> the call, to label results and highlight their output."""

    @property
    def table(self) -> RowTable:
        return self._table

    def with_used(self, used: int) -> MessageRows:
        """The same rows against another total (a budget change): O(1)."""
        return self if used == self._used else MessageRows(self._table, used, self._peaks)

    def __len__(self) -> int:
        return self._count

    def _index(self, index: int) -> int:
        """``index`` within these rows (negative from the end): never a message a later state added."""
        if not 0 <= index < self._count:
            if not -self._count <= index < 0:
                raise IndexError("row index out of range")
            index += self._count
        return index

    def _message(self, index: int) -> Message:
        return self._table.messages[self._index(index)]

    def row(self, index: int) -> Row:
        index = self._index(index)
        message = self._table.messages[index]
        items = self._table.items
        item = items.item(items.slot_at(index, message.id))
        share = 100.0 * item.tokens / self._used if item is not None and self._used else None
        excluded = None if item is not None else self._table.excluded.get(message.id, "not in context")
        return Row(index + 1, message, item, excluded, share, self._peaks.get(message.id))

    def message_id(self, index: int) -> str:
        return self._table.messages.ids[self._index(index)]

    def tokens(self, index: int) -> int:
        """Tokens of a message in context; -1 when it is not in context (for sorting). Reads no message."""
        index = self._index(index)
        items = self._table.items
        tokens = items.tokens_of(items.slot_at(index, self._table.messages.ids[index]))
        return tokens if tokens is not None else -1

    def badges(self, index: int) -> tuple[str, ...]:
        index = self._index(index)
        items = self._table.items
        return items.badges_of(items.slot_at(index, self._table.messages.ids[index]))

    def index_of(self, message_id: str) -> int | None:
        """0-based transcript index of a message."""
        index = self._table.positions.get(message_id)
        return index if index is not None and index < self._count else None

    @property
    def in_context(self) -> int:
        return self._in_context
