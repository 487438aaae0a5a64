"""Stored view states: what the context layer worked out from a session, kept so an open resumes from it.

Replaying a 50,000-message session through the projection and the estimator costs about a second; the
result is small beside the messages. The engine keeps it here, stamped with the session's *revision* (a
counter the store's triggers move on with every change to the session's messages and overlay, whoever
writes them) and a ``key`` (a digest of whatever else it depends on), and hands it back only while both
still match. The body is opaque here (``context.view_state`` makes and reads it).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from workbench.engine.transcript.store import Store


def revision(store: Store, session_id: str) -> int:
    """The session's revision now (0 for a session with no messages or overlay yet, or none at all)."""
    row = store.connection.execute("SELECT revision FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return int(row[0]) if row else 0


def load(store: Store, session_id: str, key: str) -> tuple[int, bytes] | None:
    """The stored state and its revision, if it is current (same revision, same ``key``); else None."""
    row = store.connection.execute(
        "SELECT v.revision, v.key, v.body, s.revision FROM view_states v JOIN sessions s ON s.id = v.session_id "
        "WHERE v.session_id = ?", (session_id,)).fetchone()
    if row is None or row[0] != row[3] or row[1] != key:
        return None
    return int(row[0]), bytes(row[2])


def save(store: Store, session_id: str, made_at: int, key: str, body: bytes | Sequence[bytes | array[int]]) -> bool:
    """Keep ``body`` (whole, or the pieces it is joined from), made from the session as of revision ``made_at``;
    False (nothing written) when the session has moved on since, so the state would describe an older session.

    The pieces are written into the stored blob one by one: a long session's state is kept right after it
    loaded whole, and neither a joined copy of it nor SQLite's copy of a bound value then adds to that peak."""
    pieces = (body,) if isinstance(body, bytes) else body
    size = sum(len(piece) * (piece.itemsize if isinstance(piece, array) else 1) for piece in pieces)
    with store.transaction():
        if revision(store, session_id) != made_at:
            return False
        row = store.connection.execute(
            "INSERT OR REPLACE INTO view_states (session_id, revision, key, body) VALUES (?, ?, ?, zeroblob(?))",
            (session_id, made_at, key, size)).lastrowid
        assert row is not None
        with store.connection.blobopen("view_states", "body", row) as blob:
            for piece in pieces:
                blob.write(piece)
    return True
