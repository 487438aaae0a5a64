"""The lookups the message table makes by message id and by tool call, without reading every message.

A long session resumed from its stored view state holds its items as columns and reads its messages a page at
a time (:mod:`workbench.engine.context.item_log`, :mod:`workbench.engine.transcript.message_log`): these
lookups answer for the rows on screen from what is read, and read only what a row asks for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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
    read without making it. Entries never change once added (an item made later is the same one each time)."""

    def __init__(self, items: Sequence[ContextItem] = ()) -> None:
        self._stored: StoredItems | None = items.stored if isinstance(items, ItemLog) else None
        self._where: dict[str, ContextItem | int] = {}
        self.add(items, 0)

    def add(self, items: Sequence[ContextItem], start: int) -> None:
        """The message items of ``items`` from ``start`` on."""
        if isinstance(items, ItemLog):
            stored = items.stored
            untouched = items.untouched
            if start < untouched:  # a resumed view's rows, in bulk
                assert stored is not None
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

    def _item(self, slot: ContextItem | int) -> ContextItem:
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.item(slot)
        return slot

    def __getitem__(self, message_id: str) -> ContextItem:
        return self._item(self._where[message_id])

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._where

    def __len__(self) -> int:
        return len(self._where)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def tokens(self, message_id: str) -> int | None:
        slot = self._where.get(message_id)
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.tokens(slot)
        return slot.tokens if slot is not None else None

    def badges(self, message_id: str) -> tuple[str, ...]:
        slot = self._where.get(message_id)
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.badges(slot)
        return slot.badges if slot is not None else ()


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
