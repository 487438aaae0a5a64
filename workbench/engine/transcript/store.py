"""The SQLite store: one file, WAL, foreign keys on, schema versioned.

Every multi-row write happens inside :meth:`Store.transaction`, so a crash
leaves either all of a change or none of it.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from workbench.engine.errors import SessionNotFound, StoreError, WorkbenchError
from workbench.engine.transcript import db_health, store_rows
from workbench.engine.transcript.migrations import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from workbench.engine.transcript.models import Message, Session, Usage
    from workbench.engine.transcript.overlay import OverlayEvent
    from workbench.engine.transcript.tokens import TokenCounter

T = TypeVar("T")

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
LOCK_PATIENCE = BUSY_TIMEOUT_MS / 1000
"""Seconds to keep trying while SQLite reports the database locked without waiting itself (switching to
WAL, a schema read racing another process's first open); its busy wait counts towards them too."""


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _full(exc: BaseException) -> bool:
    """SQLITE_FULL: the disk (or the database's page limit) has no room for the write."""
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)


def read_only_notice(path: Path) -> str:
    return (f"{path} is read-only (the file or its folder cannot be written): it is opened for reading only, and "
            "changes to it are refused; use --db to pick a file that can be changed")


def full_notice(path: Path) -> str:
    return (f"cannot write {path}: the disk is full; it is opened for reading only and changes to it are refused: "
            "free some space and run it again")


def _no_room(exc: BaseException) -> bool:
    """Whether an error opening a database says the disk has no room (SQLite's I/O error making its -shm file)."""
    cause = exc.__cause__
    return isinstance(cause, sqlite3.OperationalError) and ("disk I/O error" in str(cause) or _full(cause))


def _writable(path: Path) -> bool:
    """Whether SQLite can write the existing database ``path``: the file, and the folder too unless the
    write-ahead log files it keeps beside the file are there already."""
    if not os.access(path, os.W_OK):
        return False
    beside = [Path(f"{path}-wal"), Path(f"{path}-shm")]
    return os.access(path.parent, os.W_OK) or all(p.exists() and os.access(p, os.W_OK) for p in beside)


def _problem(path: Path, exc: sqlite3.DatabaseError) -> str:
    """What a user reads when SQLite refuses ``path``: what is wrong and what to do."""
    text = str(exc)
    if _full(exc):
        return f"cannot write {path}: the disk is full; free some space and run it again (nothing was changed)"
    if "readonly" in text or "read-only" in text:
        return (f"cannot write {path} ({text}): the file or its folder is read-only; the workbench needs to write "
                "both (it keeps -wal and -shm files beside the database), or use --db to pick another file")
    if "disk I/O error" in text:
        return (f"cannot use {path} ({text}): the disk may be full or failing; free some space and run it again, "
                "or use --db to pick another file")
    if "unable to open" in text:
        return f"cannot open {path} ({text}); check that its folder exists and is writable, or use --db"
    if "locked" in text:
        return f"{path} is locked by another program ({text}); close it or try again"
    return f"{path} is not a workbench database ({text})"


DAMAGED = "damaged"
"""Key of a stored JSON object that could not be read (bytes of it changed on disk): it holds why, and nothing
else of the object is known. The session is still listed and opened; a change (overlay event) like that is
left undone."""


_SESSION_COLUMNS = ("s.id, CAST(s.title AS BLOB) AS title, s.source_format, s.source_path, s.source_digest, s.model, "
                    "s.context_window, s.created_at, s.updated_at, CAST(s.metadata AS BLOB) AS metadata")
"""A session's columns, its free text read as bytes: a byte changed on disk into one that is not UTF-8 would make
SQLite's driver refuse the whole row (every listing of sessions) instead of this one value."""


def _stored_text(value: bytes | str | None) -> str | None:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _stored_object(text: str | bytes | None, what: str) -> dict[str, Any]:
    """A JSON object as stored, or ``{DAMAGED: why}`` when its text cannot be read as one."""
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        log.info("stored %s cannot be read: %s", what, reason)
        return {DAMAGED: f"its stored {what} cannot be read ({reason})"}
    return value if isinstance(value, dict) else {DAMAGED: f"its stored {what} is not an object"}


class Store:
    """A handle on one workbench database. Opening it creates or migrates the schema."""

    def __init__(self, path: Path | str, *, checked: bool = False, found: str | None = None) -> None:
        """``checked``: this process has just checked the same file's health (``PRAGMA quick_check``: it reads
        the whole file, up to a second on a big one), so it is not checked again; ``found``: what that check
        found damaged (None: nothing)."""
        self.path = Path(path)
        self.damage: str | None = None
        """Set when the database is damaged: it is then open read-only, and every write is refused with this."""
        self.read_only: str | None = None
        """Set when the file or its folder cannot be written: it is then open read-only (reads work), and every
        write is refused with this notice."""
        self.lock_patience = LOCK_PATIENCE
        """Seconds a write waits for another program's lock before it fails as locked (see :meth:`be_brief`)."""
        try:
            self._open(checked, found)
        except StoreError as exc:
            if not (self.writes_refused is None and self.path.is_file() and _no_room(exc)):
                raise
            # A full disk: SQLite could not make the files it keeps beside the database. Read it read-only.
            self.read_only = full_notice(self.path)
            self._conn = db_health.read_only_connection(self.path)
            self._migrate()

    def _open(self, checked: bool, found: str | None) -> None:
        self._conn = self._connect(self.path, checked, found)
        try:
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(_problem(self.path, exc)) from exc
        except BaseException:
            self._conn.close()
            raise

    def _connect(self, path: Path, checked: bool, found: str | None) -> sqlite3.Connection:
        if str(path) != ":memory:":
            if path.is_dir():
                raise StoreError(f"database path {path} is a directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            what = found if checked else db_health.damage(path)
            if what is not None:
                self.damage = db_health.damaged_message(path, what)
                try:
                    conn = db_health.read_only_connection(path)
                except sqlite3.Error as exc:
                    raise StoreError(self.damage) from exc
                return db_health.whole_pages(path, conn)
            if path.exists() and not _writable(path):
                self.read_only = read_only_notice(path)
                try:
                    return db_health.read_only_connection(path)
                except sqlite3.DatabaseError as exc:
                    raise StoreError(_problem(path, exc)) from exc
        try:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        except sqlite3.DatabaseError as exc:
            raise StoreError(_problem(path, exc)) from exc
        try:
            if str(path) != ":memory:":
                db_health.check_size(path, conn)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
        except StoreError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()  # at once: an open connection keeps -wal and -shm files beside the user's file
            raise StoreError(_problem(path, exc)) from exc
        return conn

    def _migrate(self) -> None:
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer workbench (schema {version} > {SCHEMA_VERSION}); "
                "upgrade the workbench to open it"
            )
        refused = self.writes_refused
        if refused is not None:
            if version != SCHEMA_VERSION:  # an upgrade would write it
                raise StoreError(refused)
            return
        if version == 0:
            tables = self._retry_locked(lambda: [r[0] for r in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'schema_version'")])
            if tables and self.schema_version() == 0:  # tables and still no version: another program's file
                raise StoreError(f"{self.path} is not a workbench database (it holds other tables: "
                                 f"{', '.join(sorted(tables)[:5])}); use --db to pick another file")
        # Only after these checks: switching to WAL rewrites the file header.
        self._retry_locked(lambda: self._conn.execute("PRAGMA journal_mode = WAL"))
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction():
                if self.schema_version() >= target:
                    continue  # another process opening the same new file migrated it first
                for statement in MIGRATIONS[target]:
                    self._conn.execute(statement)
                self._conn.execute("DELETE FROM schema_version")
                self._conn.execute("INSERT INTO schema_version (version) VALUES (?)", (target,))

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection itself, for the engine's modules that keep a table of their own."""
        return self._conn

    def _dicts(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        cursor = self._conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def schema_version(self) -> int:
        try:
            row = self._retry_locked(lambda: self._conn.execute("SELECT version FROM schema_version").fetchone())
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise StoreError(_problem(self.path, exc)) from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(_problem(self.path, exc)) from exc
        return int(row[0]) if row else 0

    def be_brief(self, seconds: float) -> None:
        """Give up on another program's write lock after ``seconds`` instead of :data:`LOCK_PATIENCE`: for a
        writer that keeps what it has to write and tries again itself, saying that it waits."""
        self.lock_patience = seconds
        self._conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def _retry_locked(self, action: Callable[[], T]) -> T:
        """``action()``, tried again with a growing pause while SQLite says the database is locked."""
        deadline = time.monotonic() + self.lock_patience
        pause = 0.02
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if not _locked(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit of work; nested calls join the outer transaction."""
        if self.writes_refused is not None:
            raise StoreError(self.writes_refused)
        if self._conn.in_transaction:
            yield
            return
        try:
            self._retry_locked(lambda: self._conn.execute("BEGIN IMMEDIATE"))
        except sqlite3.OperationalError as exc:
            raise StoreError(_problem(self.path, exc)) from exc
        try:
            yield
        except BaseException as exc:
            self._conn.rollback()
            if isinstance(exc, sqlite3.OperationalError) and ("readonly" in str(exc) or _locked(exc) or _full(exc)):
                raise StoreError(_problem(self.path, exc)) from exc
            if db_health.is_damage(exc):
                raise self.damaged(exc) from exc
            raise
        try:
            self._conn.commit()
        except sqlite3.OperationalError as exc:  # the log could not grow at the end: nothing of it is kept
            self._conn.rollback()
            if _full(exc) or "readonly" in str(exc):
                raise StoreError(_problem(self.path, exc)) from exc
            raise

    @property
    def writes_refused(self) -> str | None:
        """Why nothing can be written (the file is damaged, or read-only), or None."""
        return self.damage or self.read_only

    def attempt(self, work: Callable[[], None]) -> Exception | None:
        """Run ``work`` inside the current transaction so that, if it fails, only what it wrote is taken back
        and the transaction goes on: a part the rest of a change can do without. Returns its failure."""
        self._conn.execute("SAVEPOINT attempt")
        try:
            work()
        except (sqlite3.Error, WorkbenchError, OSError) as exc:
            self._conn.execute("ROLLBACK TO attempt")
            return exc
        finally:
            self._conn.execute("RELEASE attempt")
        return None

    # --- sessions -----------------------------------------------------------

    def save_session(self, session: Session) -> None:
        now = store_rows.now()
        row = {
            "id": session.id,
            "title": session.title,
            "source_format": session.source_format,
            "source_path": session.source_path,
            "source_digest": session.source_digest,
            "model": session.model,
            "context_window": session.context_window,
            "created_at": session.created_at.isoformat() if session.created_at else now,
            "updated_at": now,
            "metadata": json.dumps(session.metadata),
        }
        with self.transaction():
            self._conn.execute(store_rows.upsert("sessions", row, ("id",)), tuple(row.values()))

    def get_session(self, session_id: str) -> Session:
        rows = self._dicts(f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE id = ?", [session_id])
        if not rows:
            raise SessionNotFound(f"no session {session_id!r} in {self.path}")
        return self._session(rows[0])

    def find_session(self, source_digest: str) -> Session | None:
        rows = self._dicts(f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE source_digest = ?", [source_digest])
        return self._session(rows[0]) if rows else None

    def list_sessions(self) -> list[tuple[Session, int]]:
        """Sessions, most recently used first, with their message counts."""
        sql = (
            f"SELECT {_SESSION_COLUMNS}, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) AS n "
            "FROM sessions s ORDER BY s.updated_at DESC"
        )
        return [(self._session(r), int(r["n"])) for r in self._dicts(sql)]

    def sessions_mentioning(self, session_id: str) -> list[Session]:
        """Sessions whose metadata holds ``session_id`` (a sub-agent's names its parent), most recently used
        first. Asked as every session opens: unlike :meth:`list_sessions` it counts no messages (a few ms per
        50,000 of them)."""
        written = json.dumps(session_id)[1:-1]  # as :meth:`save_session` writes it, escapes and all
        sql = f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE instr(metadata, ?) > 0 ORDER BY updated_at DESC"
        return [self._session(r) for r in self._dicts(sql, (written,))]

    @staticmethod
    def _session(row: dict[str, Any]) -> Session:
        from workbench.engine.transcript.models import Session  # deferred: listing no session needs no pydantic

        # The store's own columns, read back without validating them again: building the model's validator,
        # the process's first, took 55 ms of opening a session, before its first frame.
        return Session.model_construct(
            id=row["id"],
            title=_stored_text(row["title"]),
            source_format=row["source_format"],
            source_path=row["source_path"],
            source_digest=row["source_digest"],
            model=row["model"],
            context_window=row["context_window"],
            created_at=store_rows.stored_time(row["created_at"]),
            updated_at=store_rows.stored_time(row["updated_at"]),
            metadata=_stored_object(row["metadata"], "metadata"),
        )

    # --- messages -----------------------------------------------------------

    def save_messages(self, messages: Sequence[Message], counter: TokenCounter, *,
                      compress_over: int | None = None) -> None:
        """Insert or replace messages with their parts and token counts, in one transaction.

        ``compress_over``: part bodies longer than this many characters are stored zlib-compressed (as
        bytes; loading reads either). The proxy uses it: it records whole histories as they grow.

        Counting happens here so that every stored part has its count: a message
        costs O(its size) once, and never again. Rows are made as they are written, so a batch's bodies are
        never held twice.
        """
        if not messages:
            return
        with self.transaction():
            self._conn.executemany(store_rows.DELETE_PARTS, ((m.session_id, m.id) for m in messages))
            self._conn.executemany(store_rows.INSERT_MESSAGE, map(store_rows.message_row, messages))
            self._conn.executemany(store_rows.INSERT_PART, store_rows.part_rows(messages, counter, compress_over))
            self._conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (store_rows.now(), messages[0].session_id)
            )

    def load_messages(self, session_id: str, ids: Sequence[str] | None = None) -> list[Message]:
        """The session's messages in order (only ``ids``, if given), each part with its stored token count
        (``TokenCounter`` reads it)."""
        from workbench.engine.transcript.message_rows import read_messages  # deferred: it builds pydantic models

        if ids is None:
            return read_messages(self._conn, session_id)
        chosen = tuple(ids)
        return read_messages(self._conn, session_id, f" AND id IN ({', '.join('?' * len(chosen))})", chosen)

    def token_cache(self, session_id: str) -> dict[str, int]:
        """Stored counts of this session's parts, keyed by content hash: seed for a TokenCounter."""
        return dict(
            self._conn.execute(
                "SELECT content_hash, tokens FROM parts WHERE session_id = ?", (session_id,)
            ).fetchall()
        )

    def part_tokens(self, session_id: str) -> int:
        """The tokens the session's stored parts hold, each counted once when it was stored."""
        row = self._conn.execute("SELECT COALESCE(SUM(tokens), 0) FROM parts WHERE session_id = ?", (session_id,))
        return int(row.fetchone()[0])

    def message_count(self, session_id: str) -> int:
        row = self._conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,))
        return int(row.fetchone()[0])

    # --- overlay ------------------------------------------------------------

    def add_overlay_events(self, events: Iterable[OverlayEvent], *, ignore_existing: bool = False) -> None:
        rows = [
            {
                **ev.model_dump(exclude={"data", "created_at", "undone"}),
                "data": json.dumps(ev.data),
                "created_at": (ev.created_at.isoformat() if ev.created_at else store_rows.now()),
                "undone": int(ev.undone),
            }
            for ev in events
        ]
        if rows:
            verb = "INSERT OR IGNORE" if ignore_existing else "INSERT"
            sql = f"{verb} INTO overlay_events ({', '.join(rows[0])}) VALUES ({', '.join('?' * len(rows[0]))})"
            with self.transaction():
                self._conn.executemany(sql, (tuple(r.values()) for r in rows))

    def set_plan_undone(self, session_id: str, plan_id: str, undone: bool) -> None:
        with self.transaction():
            self._conn.execute(
                "UPDATE overlay_events SET undone = ? WHERE session_id = ? AND plan_id = ?",
                (int(undone), session_id, plan_id),
            )

    def load_overlay(self, session_id: str) -> list[OverlayEvent]:
        from workbench.engine.transcript.overlay import OverlayEvent  # deferred: a pydantic model

        rows = self._dicts("SELECT * FROM overlay_events WHERE session_id = ? ORDER BY seq", [session_id])
        out = []
        for r in rows:
            data = _stored_object(r["data"], "change")
            out.append(OverlayEvent(
                **{k: v for k, v in r.items() if k not in {"seq", "data", "created_at", "undone"}},
                data=data,
                created_at=store_rows.stored_time(r["created_at"]),
                undone=bool(r["undone"]) or DAMAGED in data,  # a change that cannot be read is not applied
            ))
        return out

    # --- offloaded tool results -------------------------------------------

    def save_blob(self, session_id: str, ref_id: str, tool_name: str, content: str) -> None:
        data = content.encode("utf-8")
        row = {"id": ref_id, "session_id": session_id, "tool_name": tool_name, "content": data,
               "byte_size": len(data), "created_at": store_rows.now()}
        with self.transaction():
            self._conn.execute(f"INSERT OR REPLACE INTO tool_result_blobs ({', '.join(row)}) VALUES "
                               f"({', '.join('?' * len(row))})", tuple(row.values()))

    def read_blob(self, session_id: str, ref_id: str) -> str | None:
        """A stored result, only for the session that owns it."""
        row = self._conn.execute(
            "SELECT content FROM tool_result_blobs WHERE id = ? AND session_id = ?", (ref_id, session_id)
        ).fetchone()
        return bytes(row[0]).decode("utf-8", errors="replace") if row else None

    # --- usage --------------------------------------------------------------

    def record_usage(self, session_id: str, message_id: str, usage: Usage, estimated_input: int | None) -> None:
        self.record_usages(session_id, [(message_id, usage, estimated_input)])

    def record_usages(self, session_id: str, usages: Iterable[tuple[str, Usage, int | None]]) -> None:
        """Store (or replace) the usage the API reported for each ``(message id, usage, estimated input)``."""
        created = store_rows.now()
        with self.transaction():
            self._conn.executemany(store_rows.UPSERT_USAGE, (
                store_rows.usage_row(session_id, message_id, usage, estimated, created)
                for message_id, usage, estimated in usages))

    def damaged(self, exc: BaseException) -> StoreError:
        """The error for SQLite finding the database malformed mid-way: a full check says what is damaged."""
        what = db_health.damage(self.path, db_health.FULL_CHECK_SECONDS) or f"SQLite reports: {exc}"
        return StoreError(db_health.damaged_message(self.path, what, opened=False))

    def integrity_check(self) -> str:
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])
