"""The view's message items, those a stored view state holds made only when first read.

A long session resumed from its view state (:mod:`view_state`) holds each item as a row of integer columns;
an item itself (with its message's parts, as the model gets them) is made when something reads it: a row on
screen, the wire, a strategy. What the list and the budget read of every item (its message, tokens and
badges) comes from the columns without making it, so opening a session costs O(what is shown).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence, Sequence
from itertools import accumulate
from typing import overload

from workbench.engine.context.view import ContextItem
from workbench.engine.transcript.models import Message, Part


class StoredItems:
    """Items as a view state's columns hold them: by row, the message's position, the shape (component names
    and badges), tokens, raw tokens, and the components' values in one run."""

    def __init__(self, messages: Sequence[Message], ids: Sequence[str], at: Sequence[int], shape: Sequence[int],
                 tokens: Sequence[int], raw: Sequence[int], values: Sequence[int],
                 shapes: Sequence[tuple[tuple[str, ...], tuple[str, ...]]],
                 sent_parts: Callable[[Message], tuple[Part, ...]],
                 shared: Callable[[dict[str, int]], Mapping[str, int]]) -> None:
        self._messages, self._ids = messages, ids
        self._at, self._shape, self._tokens, self._raw, self._values = at, shape, tokens, raw, values
        self._shapes, self._sent_parts, self._shared = shapes, sent_parts, shared
        self._starts: list[int] | None = None
        self._made: dict[int, ContextItem] = {}
        """Rows made into items: the same item each time, whoever asks (the list on the UI thread, the engine)."""

    def __len__(self) -> int:
        return len(self._at)

    def message_id(self, row: int) -> str:
        return self._ids[self._at[row]]

    def message_ids(self, start: int, stop: int) -> Iterator[str]:
        """The message ids of rows ``start`` to ``stop``, in bulk."""
        return map(self._ids.__getitem__, self._at[start:stop])

    def positions(self, start: int, stop: int) -> Sequence[int]:
        """The positions of the messages of rows ``start`` to ``stop`` (the stored column itself, not a copy)."""
        return self._at[start:stop]

    def tokens(self, row: int) -> int:
        return self._tokens[row]

    def badges(self, row: int) -> tuple[str, ...]:
        return self._shapes[self._shape[row]][1]

    def item(self, row: int) -> ContextItem:
        made = self._made.get(row)
        return made if made is not None else self._made.setdefault(row, self._make(row))

    def _make(self, row: int) -> ContextItem:
        if self._starts is None:
            sizes = [len(names) for names, _ in self._shapes]
            self._starts = [0, *accumulate(map(sizes.__getitem__, self._shape))]
        names, badges = self._shapes[self._shape[row]]
        start = self._starts[row]
        message = self._messages[self._at[row]]
        components = self._shared(dict(zip(names, self._values[start:start + len(names)], strict=True)))
        return ContextItem(kind="message", tokens=self._tokens[row], components=components, message_id=message.id,
                           index=message.index, role=message.role, badges=badges,
                           parts=self._sent_parts(message), raw_tokens=self._raw[row])


class ItemLog(MutableSequence[ContextItem]):
    """A list of items whose stored ones are made on first read (then kept: the same object each time). A
    stored item stays a row number here, so a reader that noted it (:class:`ItemIndex` of the list) still
    finds it when items are inserted before it."""

    def __init__(self, stored: StoredItems | None = None, items: Iterable[ContextItem] = ()) -> None:
        self._stored = stored
        self._slots: list[ContextItem | int] = [*range(len(stored))] if stored is not None else list(items)
        self._untouched = len(self._slots) if stored is not None else 0
        """How many leading slots are still the stored rows in order (slot ``n`` is row ``n``)."""

    def _made(self, index: int) -> ContextItem:
        slot = self._slots[index]
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.item(slot)
        return slot

    @property
    def stored(self) -> StoredItems | None:
        return self._stored

    def slot(self, index: int) -> ContextItem | int:
        """The item at ``index``, or its row in :attr:`stored` when it has not been made."""
        return self._slots[index]

    @property
    def untouched(self) -> int:
        """How many leading items are :attr:`stored`'s rows in order, as resumed (item ``n`` is row ``n``): a reader
        takes them in bulk."""
        return self._untouched

    def _touch(self, index: int | slice) -> None:
        """Slots from ``index`` on may no longer be the stored rows in order."""
        count = len(self._slots)
        if isinstance(index, slice):
            span = range(*index.indices(count))
            start = min(span[0], span[-1]) if span else index.indices(count)[0]
        else:
            start = index if index >= 0 else max(0, index + count)
        self._untouched = min(self._untouched, start)

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, index: int) -> ContextItem: ...
    @overload
    def __getitem__(self, index: slice) -> list[ContextItem]: ...
    def __getitem__(self, index: int | slice) -> ContextItem | list[ContextItem]:
        if isinstance(index, slice):
            return [self._made(i) for i in range(*index.indices(len(self._slots)))]
        if index < 0:
            index += len(self._slots)
        if not 0 <= index < len(self._slots):
            raise IndexError("item index out of range")
        return self._made(index)

    @overload
    def __setitem__(self, index: int, value: ContextItem) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[ContextItem]) -> None: ...
    def __setitem__(self, index: int | slice, value: ContextItem | Iterable[ContextItem]) -> None:
        self._touch(index)
        if isinstance(index, slice):
            assert not isinstance(value, ContextItem)
            self._slots[index] = list(value)
        else:
            assert isinstance(value, ContextItem)
            self._slots[index] = value

    def __delitem__(self, index: int | slice) -> None:
        self._touch(index)
        del self._slots[index]

    def insert(self, index: int, value: ContextItem) -> None:
        self._touch(index)
        self._slots.insert(index, value)

    def __iter__(self) -> Iterator[ContextItem]:
        for index in range(len(self._slots)):
            yield self._made(index)

    # --- what is read of every item, without making it -----------------------------------------------

    def message_id(self, index: int) -> str | None:
        slot = self._slots[index]
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.message_id(slot)
        return slot.message_id if slot.kind == "message" else None

    def tokens(self, index: int) -> int:
        slot = self._slots[index]
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.tokens(slot)
        return slot.tokens

    def badges(self, index: int) -> tuple[str, ...]:
        slot = self._slots[index]
        if isinstance(slot, int):
            assert self._stored is not None
            return self._stored.badges(slot)
        return slot.badges
