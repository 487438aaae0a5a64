"""Which stored sessions a user is shown, and removing a session with everything it owns.

A session the workbench's own agent started holds nothing until its first message is stored; one whose run
failed or was killed before that stays empty. Such a session has nothing to show, so the listings leave it
out (:func:`listed_sessions`), the bare ``workbench`` never opens it (:func:`latest_session`), and the app
removes the one it started itself if it is still empty when it closes it.

:func:`delete_session` removes a session in one transaction; the schema's foreign keys (``ON DELETE
CASCADE``) take its messages, parts, overlay events, offloaded results, usage records, stored view states and
proxied requests with it. Sub-agent sessions it started (``metadata.parent_session``) go too: they are
part of its work and would be orphans without it, and so do their output files. Request content shared by
hash between sessions stays.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.redaction import redact
from workbench.engine.transcript.store import Store

if TYPE_CHECKING:
    from workbench.engine.transcript.models import Session

ENGINE_FORMAT = "engine"


def is_empty_run(session: Session, messages: int) -> bool:
    """A session of the workbench's own agent that never stored a message (a run that failed or was killed
    before its first one, or a demo quit before it began)."""
    return messages == 0 and session.source_format == ENGINE_FORMAT


def listed_sessions(store: Store, keep: str | None = None) -> list[tuple[Session, int]]:
    """Stored sessions with their message counts, most recently used first, without empty runs (except
    ``keep``, the session open now, even if nothing is in it yet)."""
    return [(s, n) for s, n in store.list_sessions() if s.id == keep or not is_empty_run(s, n)]


def latest_session(store: Store) -> str | None:
    """The most recently used session that holds something, or None when there is none."""
    for session, count in store.list_sessions():  # most recently used first
        if count > 0:
            return session.id
    return None


@dataclass(frozen=True)
class Deleted:
    """What :func:`delete_session` removed."""

    session: Session
    messages: int
    subagents: tuple[str, ...]
    """Ids of the sub-agent sessions removed with it (and theirs)."""
    warnings: list[str] = field(default_factory=list)
    """Files that could not be removed (the session itself is gone)."""

    def describe(self) -> str:
        title = " ".join(redact(self.session.title or "(untitled)").split())  # shown like a listing: redacted
        text = f"{self.session.id} ({title}): {self.messages:,} message{'s' if self.messages != 1 else ''}"
        if self.subagents:
            count = len(self.subagents)
            text += f" and {count} sub-agent session{'s' if count != 1 else ''}"
        return text


def _descendants(store: Store, session_id: str) -> list[str]:
    children: dict[str, list[str]] = {}
    for session, _ in store.list_sessions():
        parent = session.metadata.get("parent_session")
        if isinstance(parent, str):
            children.setdefault(parent, []).append(session.id)
    found: list[str] = []
    todo = list(children.get(session_id, []))
    while todo:
        child = todo.pop()
        if child not in found and child != session_id:
            found.append(child)
            todo.extend(children.get(child, []))
    return found


def delete_session(store: Store, session_id: str, outputs: Path | None = None, *, keep: str | None = None) -> Deleted:
    """Remove ``session_id``, its sub-agent sessions and everything they own, in one transaction; then the
    sub-agent output files it kept under ``outputs`` (see :func:`workbench.engine.agent.subagents.outputs_root`).
    ``keep``: a session that must not go (the one open in the app); nothing is removed if it would.

    Raises :class:`~workbench.engine.errors.SessionNotFound` when there is no such session."""
    with store.transaction():
        session = store.get_session(session_id)
        subagents = _descendants(store, session_id)
        if keep is not None and keep in (session_id, *subagents):
            what = "it is" if keep == session_id else "one of its sub-agent sessions is"
            raise WorkbenchError(f"{session_id} was not deleted: {what} open; open another session first")
        messages = sum(store.message_count(sid) for sid in (session_id, *subagents))
        for sid in (*subagents, session_id):
            store.connection.execute("DELETE FROM sessions WHERE id = ?", [sid])
    deleted = Deleted(session, messages, tuple(subagents))
    if outputs is not None:
        for folder in (outputs / sid for sid in (session_id, *subagents)):
            try:
                if folder.is_dir():
                    shutil.rmtree(folder)
            except OSError as exc:
                deleted.warnings.append(f"could not remove {folder} ({exc.strerror or type(exc).__name__})")
    return deleted
