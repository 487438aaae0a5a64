"""Stored pictures of sessions: what a program last showed of a session, kept to show again at once.

Loading a long session is O(messages) work in Python (a 50,000-message session takes seconds), while
what a screen shows of it (a few dozen rows, a budget, a chart) is small. A program may store its own
picture of a session with :func:`save_picture` and read it back with :func:`load_picture` before the
load, to show it meanwhile. The engine does not look inside a picture; it keeps it current:

- each picture is stamped with the session's *revision*, a counter that triggers move on with every
  insert, update and delete of the session's messages and overlay events, whoever writes them; a
  picture of an older revision is never handed out;
- the caller's ``key`` (a digest of whatever else its picture depends on: settings, its own version)
  must match too.

A picture is only ever a stand-in until the session is loaded: it must never be the only source of
anything that changes the session.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from workbench.engine.transcript.store import Store


@dataclass(frozen=True)
class StoredPicture:
    session_id: str
    revision: int
    key: str
    header: bytes
    chunks: tuple[bytes, ...]


def session_revision(store: Store, session_id: str) -> int:
    """The session's revision now (0 for a session that has no messages or overlay yet, or none at all)."""
    row = store.db.execute("SELECT revision FROM sessions WHERE id = ?", [session_id]).fetchone()
    return int(row[0]) if row else 0


def load_picture(store: Store, session_id: str, key: str) -> StoredPicture | None:
    """The session's picture if it is current (same revision, same ``key``), else None."""
    row = store.db.execute(
        "SELECT p.revision, p.key, p.header, s.revision FROM pictures p JOIN sessions s ON s.id = p.session_id "
        "WHERE p.session_id = ?",
        [session_id],
    ).fetchone()
    if row is None or row[0] != row[3] or row[1] != key:
        return None
    chunks = store.db.execute(
        "SELECT body FROM picture_chunks WHERE session_id = ? ORDER BY chunk", [session_id]
    ).fetchall()
    return StoredPicture(session_id, int(row[0]), key, bytes(row[2]), tuple(bytes(c[0]) for c in chunks))


def save_picture(
    store: Store, session_id: str, revision: int, key: str, header: bytes, chunks: Iterable[bytes]
) -> bool:
    """Replace the session's picture with one made at ``revision``, in one transaction; False (nothing
    written) when the session has moved past that revision meanwhile, so the picture would be stale.

    ``chunks`` is consumed inside the transaction, so a generator keeps only one chunk in memory.
    """
    with store.transaction():
        if session_revision(store, session_id) != revision:
            return False
        store.db.execute("DELETE FROM picture_chunks WHERE session_id = ?", [session_id])
        store.db.execute(
            "INSERT OR REPLACE INTO pictures (session_id, revision, key, header, created_at) VALUES (?, ?, ?, ?, ?)",
            [session_id, revision, key, header, datetime.now(UTC).isoformat()],
        )
        store.db.conn.executemany(
            "INSERT INTO picture_chunks (session_id, chunk, body) VALUES (?, ?, ?)",
            ((session_id, number, body) for number, body in enumerate(chunks)),
        )
    return True
