"""The lookups the message table makes by message id and by tool call, without reading every message.

A long session resumed from its stored view state holds its items as columns and reads its messages a page at
a time (:mod:`workbench.engine.context.item_log`, :mod:`workbench.engine.transcript.message_log`): these
lookups answer for the rows on screen from what is read, and read only what a row asks for.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.engine.context.item_log import ItemLog, StoredItems
from workbench.engine.context.projection import ContextItem
from workbench.engine.transcript.message_log import MessageLog
from workbench.engine.transcript.models import Message


@dataclass(frozen=True, slots=True)
class CallRef:
    """A tool call, as its result's row needs it: the tool, where it was called, with what."""

    name: str
    position: int
    """1-based position of the calling message."""
    input: Mapping[str, Any]


class ItemIndex(Mapping[str, ContextItem]):
    """Message id -> its item in the view; a stored item is made when first asked for, its tokens and badges
    read without making it. Entries never change once added (an item made later is the same one each time),
    and a message has one item at most.

    A resumed view's rows in order are not entered one by one: their messages' positions are the stored column,
    ascending as the view keeps its messages in transcript order, so the row of a message is found by its
    position (a long session's open made a dictionary entry per message, 50,000 of them, for the few rows it
    shows). Asked for many rows (a sort by tokens, a filter), it makes a position -> row list once."""

    SCATTER_AFTER = 512
    """Lookups in the bulk rows by bisection before the position -> row list is made."""

    def __init__(self, items: Sequence[ContextItem] = (),
                 position_of: Callable[[str], int | None] | None = None) -> None:
        """``position_of``: a message's position by its id, for looking a bulk row up by id (the table's)."""
        self._stored: StoredItems | None = items.stored if isinstance(items, ItemLog) else None
        self._position_of = position_of
        self._where: dict[str, ContextItem | int] = {}
        self._bulk: Sequence[int] = ()
        """The positions of the messages of stored rows ``0 .. len - 1``, ascending: row ``r`` is the item of the
        message at ``self._bulk[r]``."""
        self._row_at: list[int] | None = None
        """Position -> row of the bulk (-1: none), made after :data:`SCATTER_AFTER` lookups."""
        self._lookups = 0
        self.add(items, 0)

    def add(self, items: Sequence[ContextItem], start: int) -> None:
        """The message items of ``items`` from ``start`` on."""
        if isinstance(items, ItemLog):
            stored = items.stored
            untouched = items.untouched
            if start < untouched:  # a resumed view's rows, in bulk
                assert stored is not None
                positions = stored.positions(start, untouched)
                if start == 0 and not self._where and not self._bulk and _ascending(positions):
                    self._bulk = positions
                else:
                    self._where.update(zip(stored.message_ids(start, untouched), range(start, untouched), strict=True))
                start = untouched
            for index in range(start, len(items)):
                slot = items.slot(index)
                if isinstance(slot, int):
                    assert stored is not None
                    self._where[stored.message_id(slot)] = slot
                elif slot.kind == "message" and slot.message_id:
                    self._where[slot.message_id] = slot
            return
        for item in items[start:] if start else items:
            if item.kind == "message" and item.message_id:
                self._where[item.message_id] = item

    def _bulk_row(self, position: int | None) -> int | None:
        """The bulk row of the message at ``position``, if it has one."""
        bulk = self._bulk
        if position is None or not bulk:
            return None
        row_at = self._row_at
        if row_at is not None:
            row = row_at[position] if position < len(row_at) else -1
            return row if row >= 0 else None
        self._lookups += 1
        if self._lookups > self.SCATTER_AFTER:
            row_at = [-1] * (bulk[-1] + 1)
            for row, at in enumerate(bulk):
                row_at[at] = row
            self._row_at = row_at
        row = bisect_left(bulk, position)
        return row if row < len(bulk) and bulk[row] == position else None

    def slot_at(self, position: int, message_id: str) -> ContextItem | int | None:
        """The item of the message at ``position`` (whose id is ``message_id``), or its stored row."""
        slot = self._where.get(message_id)
        return slot if slot is not None else self._bulk_row(position)

    def _slot(self, message_id: str) -> ContextItem | int | None:
        slot = self._where.get(message_id)
        if slot is None and self._bulk:
            assert self._position_of is not None, "a bulk row is looked up by id through its position"
            slot = self._bulk_row(self._position_of(message_id))
        return slot

    def item(self, slot: ContextItem | int | None) -> ContextItem | None:
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.item(slot)
        return slot

    def tokens_of(self, slot: ContextItem | int | None) -> int | None:
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.tokens(slot)
        return slot.tokens if slot is not None else None

    def badges_of(self, slot: ContextItem | int | None) -> tuple[str, ...]:
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.badges(slot)
        return slot.badges if slot is not None else ()

    def __getitem__(self, message_id: str) -> ContextItem:
        item = self.item(self._slot(message_id))
        if item is None:
            raise KeyError(message_id)
        return item

    def __contains__(self, message_id: object) -> bool:
        return isinstance(message_id, str) and self._slot(message_id) is not None

    def __len__(self) -> int:
        return len(self._bulk) + len(self._where)

    def __iter__(self) -> Iterator[str]:
        if self._bulk:
            assert self._stored is not None
            yield from self._stored.message_ids(0, len(self._bulk))
        yield from self._where

    def tokens(self, message_id: str) -> int | None:
        return self.tokens_of(self._slot(message_id))

    def badges(self, message_id: str) -> tuple[str, ...]:
        return self.badges_of(self._slot(message_id))


def _ascending(positions: Sequence[int]) -> bool:
    """Whether ``positions`` only rise (sorting a sorted run is one pass, in C)."""
    values = list(positions)
    return values == sorted(values)


class CallIndex(Mapping[str, CallRef]):
    """Tool-use id -> the call, to label results and highlight their output: the calls of every message read so
    far, and a stored one looked up in the store when a row asks for it before its message was read."""

    def __init__(self, messages: MessageLog) -> None:
        self._log = messages
        self._calls: dict[str, CallRef] = {}
        self._pages = 0
        """How many of the log's read pages are indexed (the messages added after the open are by :meth:`add`)."""

    def add(self, messages: Sequence[Message], start: int) -> None:
        """The calls of ``messages``, the log's messages from ``start`` on."""
        for offset, message in enumerate(messages):
            self._index(message, start + offset)

    def _index(self, message: Message, position: int) -> None:
        if message.role == "assistant":
            for part in message.tool_uses():
                self._calls[part.id] = CallRef(part.name, position + 1, part.input)

    def _catch_up(self) -> None:
        """Index the pages the log read since the last look."""
        pages = self._log.pages_read
        for page in pages[self._pages:]:
            for position in self._log.page_positions(page):
                self._index(self._log[position], position)
        self._pages = len(pages)

    def __getitem__(self, tool_use_id: str) -> CallRef:
        call = self._calls.get(tool_use_id)
        if call is None and self._log.stored_count:
            self._catch_up()
            call = self._calls.get(tool_use_id)
            if call is None and self._log.lazy:
                found = self._log.find_call(tool_use_id)
                if found is not None:
                    position, part = found
                    call = self._calls[tool_use_id] = CallRef(part.name, position + 1, part.input)
        if call is None:
            raise KeyError(tool_use_id)
        return call

    def _whole(self) -> dict[str, CallRef]:
        for _ in self._log:  # every page read
            pass
        self._catch_up()
        return self._calls

    def __len__(self) -> int:
        return len(self._whole())

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())
