"""A session's messages by position, a long stored session's read from the store a page at a time when asked for.

Opening a long stored session needs only each message's id and order (what the list's lookups and the view's
exclusions need of every message): a stored view state holds them, so a resumed open reads no message row. The
messages' times are read as one column when first asked for (the timeline places overlay changes by them); a
message itself (its parts, usage, source) is read with its page when something asks for it: a row on screen, a
detail, a replay. A page read stays (the same objects each time: the screen state relies on it), so a session
read whole ends holding what an eager load holds. Messages added after the open (a live session's) are kept as
they come.

Pages are read on a read-only connection the log shares with its copies, under one lock, and each once for
all of them: the engine thread and the UI (drawing rows, from a copy) may both ask, and the store that opened
the session may be closed before the last screen state that shows it is gone. It reads what is committed; a
message rewritten since the open is read as it is now, and the session's revision moving makes its viewer
reload it anyway.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import overload

from workbench.engine.errors import StoreError
from workbench.engine.transcript.message_rows import read_messages
from workbench.engine.transcript.models import Message, ToolUsePart
from workbench.engine.transcript.store_rows import stored_time

PAGE = 64
"""Messages read at once: a screen of rows and a bit, in one pair of queries. (Reading a page costs about the
same per message whatever its size, so a small one costs the first screen of a long session least: 256 made
it read up to 512 messages, 7 ms, to show 40.)"""


class PageReader:
    """Reads one stored session's messages by position, on a read-only connection of its own."""

    def __init__(self, path: Path, session_id: str, order: Sequence[int]) -> None:
        """``order``: each position's ``idx`` (the stored order), as read at the open."""
        self.path = path
        self.session_id = session_id
        self.order = order
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the messages of {self.session_id} from {self.path}: {exc}") from exc
            weakref.finalize(self, conn.close)
            self._conn = conn
        return self._conn

    def read(self, ids: Sequence[str], start: int) -> list[Message]:
        """The messages at positions ``start`` to ``start + len(ids)``, whose ids are ``ids``."""
        low, high = self.order[start], self.order[start + len(ids) - 1]
        try:
            found = {m.id: m for m in read_messages(self._connection(), self.session_id, " AND idx BETWEEN ? AND ?",
                                                      (min(low, high), max(low, high)))}
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the messages of {self.session_id} from {self.path}: {exc}") from exc
        missing = [message_id for message_id in ids if message_id not in found]
        if missing:
            raise StoreError(f"message {missing[0]} of {self.session_id} is no longer in {self.path}: reopen the session")
        return [found[message_id] for message_id in ids]

    def times(self, ids: list[str]) -> list[str | None]:
        """The stored times (as stored) of the messages whose ids are ``ids``, by position."""
        try:
            rows = self._connection().execute("SELECT id, created_at FROM messages WHERE session_id = ? ORDER BY idx",
                                              (self.session_id,)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the messages of {self.session_id} from {self.path}: {exc}") from exc
        if [row[0] for row in rows] != ids:
            raise StoreError(f"the messages of {self.session_id} changed in {self.path}: reopen the session")
        return [row[1] for row in rows]

    def calling(self, tool_use_id: str) -> list[str]:
        """Ids of the stored messages whose tool calls' bodies hold ``tool_use_id`` (a candidate, checked by
        the caller; a compressed body is not searched)."""
        try:
            rows = self._connection().execute(
                "SELECT DISTINCT message_id FROM parts WHERE session_id = ? AND kind = 'tool_use' AND instr(body, ?)",
                (self.session_id, f'"{tool_use_id}"'))
            return [str(row[0]) for row in rows]
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the messages of {self.session_id} from {self.path}: {exc}") from exc


class StoredPages:
    """The pages of a stored session's messages read so far, shared by every copy of its log (so a page the
    engine read is not read again for the screen, whose state holds a copy), read under one lock on one
    connection."""

    def __init__(self, reader: PageReader, ids: Sequence[str]) -> None:
        """``ids``: the stored messages' ids by position (only the stored positions are read of it)."""
        self.reader = reader
        self._ids = ids
        self._pages: dict[int, list[Message]] = {}
        self._times: list[str | None] | None = None
        self.lock = threading.Lock()

    def page(self, page: int, start: int, stop: int) -> list[Message]:
        """The messages at positions ``start`` to ``stop`` (page ``page``), read once whoever asks."""
        with self.lock:
            found = self._pages.get(page)
            if found is None:
                found = self._pages[page] = self.reader.read(self._ids[start:stop], start)
            return found

    def times(self, count: int) -> list[str | None]:
        """The first ``count`` stored messages' times, as stored (read once, as one column)."""
        with self.lock:
            if self._times is None:
                self._times = self.reader.times(list(self._ids[:count]))
            return self._times

    def calling(self, tool_use_id: str) -> list[str]:
        with self.lock:
            return self.reader.calling(tool_use_id)


class MessageLog(Sequence[Message]):
    """The session's messages in order; grows by :meth:`append` only."""

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._slots: list[Message | None] = list(messages)
        self.ids: list[str] = [m.id for m in self._slots if m is not None]
        """Every message's id, by position (read without the message)."""
        self._pages: StoredPages | None = None
        self._stored = 0
        """How many leading positions the reader holds (those not read yet are None in ``_slots``)."""
        self.pages_read: list[int] = []
        """The pages read so far, in the order they were read (a reader of the log indexes them as they come)."""
        self._lock = threading.Lock()

    @classmethod
    def stored(cls, conn: sqlite3.Connection, path: Path, session_id: str) -> MessageLog:
        """The session's messages as stored in the file at ``path`` (``conn`` open on it): their ids and order
        now, the rest when asked for."""
        rows = conn.execute("SELECT id, idx FROM messages WHERE session_id = ? ORDER BY idx", (session_id,)).fetchall()
        return cls._of(path, session_id, [row[0] for row in rows], [row[1] for row in rows])

    @classmethod
    def known(cls, conn: sqlite3.Connection, path: Path, session_id: str, ids: list[str], order: Sequence[int]
              ) -> MessageLog | None:
        """The session's messages, whose ids and order (``idx``) by position are known already (a view state of
        the session's current revision holds them): what is read now is their count and the first and last
        ids, to check. None when the store holds other messages (a state that does not describe them)."""
        found = conn.execute(
            "SELECT (SELECT COUNT(*) FROM messages WHERE session_id = ?1),"
            " (SELECT id FROM messages WHERE session_id = ?1 ORDER BY idx LIMIT 1),"
            " (SELECT id FROM messages WHERE session_id = ?1 ORDER BY idx DESC LIMIT 1)", (session_id,)).fetchone()
        if tuple(found) != (len(ids), ids[0] if ids else None, ids[-1] if ids else None):
            return None
        return cls._of(path, session_id, ids, order)

    @classmethod
    def _of(cls, path: Path, session_id: str, ids: list[str], order: Sequence[int]) -> MessageLog:
        log = cls()
        log.ids = ids
        log._slots = [None] * len(ids)
        log._stored = len(ids)
        log._pages = StoredPages(PageReader(path, session_id, order), ids)
        return log

    def copy(self) -> MessageLog:
        """Another log of the same messages, sharing their pages (read already or not): only what is appended
        is its own."""
        with self._lock:
            log = MessageLog()
            log._slots, log.ids, log._pages = list(self._slots), list(self.ids), self._pages
            log._stored = self._stored
            log.pages_read = list(self.pages_read)
        return log

    def append(self, message: Message) -> None:
        self._slots.append(message)
        self.ids.append(message.id)

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self._slots)))]
        if index < 0:
            index += len(self._slots)
        if not 0 <= index < len(self._slots):
            raise IndexError("message index out of range")
        return self._at(index)

    def _at(self, index: int) -> Message:
        message = self._slots[index]
        if message is None:
            self._read_page(index // PAGE)
            message = self._slots[index]
            assert message is not None
        return message

    def _read_page(self, page: int) -> None:
        with self._lock:
            start, stop = page * PAGE, min(self._stored, (page + 1) * PAGE)
            if self._slots[start] is not None and self._slots[stop - 1] is not None:
                return  # another thread read it meanwhile
            assert self._pages is not None
            for offset, message in enumerate(self._pages.page(page, start, stop)):
                if self._slots[start + offset] is None:
                    self._slots[start + offset] = message
            self.pages_read.append(page)

    def page_positions(self, page: int) -> range:
        """The positions of a page of stored messages."""
        return range(page * PAGE, min(self._stored, (page + 1) * PAGE))

    @property
    def stored_count(self) -> int:
        """How many leading messages are read from the store when asked for (0: all were given)."""
        return self._stored

    def __iter__(self) -> Iterator[Message]:
        for index in range(len(self._slots)):
            yield self._at(index)

    def every(self) -> list[Message]:
        """Every message by position, the pages not read yet read now: for a reader that walks them all, which
        asking one at a time makes a tenth of a planning's time."""
        for start in range(0, self._stored, PAGE):
            self._at(start)  # reads the page that starts there, unless read already
        return list(self._slots)  # type: ignore[arg-type]  # no position is None once every page is read

    def __reversed__(self) -> Iterator[Message]:
        for index in range(len(self._slots) - 1, -1, -1):
            yield self._at(index)

    def created_at(self, index: int) -> datetime | None:
        """When the message at ``index`` was written, without reading the message (the first time one is asked
        for, the stored messages' times are read, as one column)."""
        message = self._slots[index]
        if message is not None:
            return message.created_at
        assert self._pages is not None
        return stored_time(self._pages.times(self._stored)[index])

    def order(self) -> list[int]:
        """Each message's ``idx`` (its stored order), by position, reading only the messages added since the open."""
        stored = list(self._pages.reader.order[:self._stored]) if self._pages is not None else []
        return stored + [self._at(index).index for index in range(len(stored), len(self._slots))]

    @property
    def lazy(self) -> bool:
        """Whether some messages are still unread."""
        return self._pages is not None and None in self._slots

    def find_call(self, tool_use_id: str) -> tuple[int, ToolUsePart] | None:
        """The position and part of the tool call ``tool_use_id``, read from the store if need be; None when no
        message calls it. Only for a log that reads from the store (an eager one is searched by its owner)."""
        if self._pages is None:
            return None
        positions = {message_id: n for n, message_id in enumerate(self.ids)}
        candidates = [positions[m] for m in self._pages.calling(tool_use_id) if m in positions]
        for position in sorted(candidates) or range(len(self._slots)):  # none found: a compressed body, search all
            for part in self._at(position).tool_uses():
                if part.id == tool_use_id:
                    return position, part
        return None
