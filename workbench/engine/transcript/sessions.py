"""Which stored sessions a user is shown, and removing a session with everything it owns.

A session the workbench's own agent started holds nothing until its first message is stored; one whose run
failed or was killed before that stays empty. Such a session has nothing to show, so the listings leave it
out (:func:`listed_sessions`), the bare ``workbench`` never opens it (:func:`latest_session`), and the app
removes the one it started itself if it is still empty when it closes it.

:func:`delete_session` removes a session in one transaction; the schema's foreign keys (``ON DELETE
CASCADE``) take its messages, parts, overlay events, offloaded results, usage records, stored view states and
proxied requests with it. Sub-agent sessions it started (``metadata.parent_session``) go too: they are
part of its work and would be orphans without it, and so do their output files; so do the side calls listed
under it (:func:`parents`). Request content shared by hash between sessions stays.

Which session another is listed under (:func:`parents`): a sub-agent's names its parent; a proxied agent's
small call beside its conversation (a title call the proxy marked ``metadata.side_call``, or, recorded before
it did, a request of one or two messages without tools) goes under the conversation of the same agent session
id that was used last.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import orjson

from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.redaction import redact
from workbench.engine.transcript.store import Store

if TYPE_CHECKING:
    from workbench.engine.transcript.models import Session

ENGINE_FORMAT = "engine"


Role = Literal["session", "sub-agent", "title call", "side call"]
SIDE_ROLES: tuple[Role, ...] = ("title call", "side call")
NO_TOOLS = hashlib.blake2b(orjson.dumps([]), digest_size=12).hexdigest()
"""The proxy's ``tools_signature`` of a request without tools (``proxy.threads.tools_signature``)."""
SIDE_CALL_MESSAGES = 3
"""A side call's session holds its one or two request messages and the answer."""


def role_of(session: Session, messages: int) -> Role:
    """What a session is to the one it is listed under (``"session"``: listed on its own)."""
    meta = session.metadata
    if meta.get("side_call") == "title":
        return "title call"
    if isinstance(meta.get("parent_session"), str):
        return "sub-agent"
    if (session.source_format == "proxy" and meta.get("agent_session") and meta.get("tools_signature") == NO_TOOLS
            and messages <= SIDE_CALL_MESSAGES):
        return "side call"
    return "session"


def parents(rows: Iterable[tuple[Session, int]]) -> dict[str, tuple[str, Role]]:
    """Session id -> (the session it is listed under, what it is to it), for the sessions that belong to
    another of ``rows`` (given most recently used first)."""
    listed = [(s, role_of(s, n)) for s, n in rows]
    ids = {s.id for s, _ in listed}
    main: dict[str, str] = {}
    """Agent session id -> its conversation used last."""
    for session, role in listed:
        agent = session.metadata.get("agent_session")
        if role == "session" and isinstance(agent, str):
            main.setdefault(agent, session.id)
    found: dict[str, tuple[str, Role]] = {}
    for session, role in listed:
        meta = session.metadata
        parent = meta.get("parent_session") if role == "sub-agent" else (
            main.get(meta["agent_session"]) if role in SIDE_ROLES and isinstance(meta.get("agent_session"), str)
            else None)
        if isinstance(parent, str) and parent in ids and parent != session.id:
            found[session.id] = (parent, role)
    return found


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
    side_calls: tuple[str, ...] = ()
    """Ids of the side calls (a proxied agent's title calls) listed under it, removed with it."""

    def describe(self) -> str:
        title = " ".join(redact(self.session.title or "(untitled)").split())  # shown like a listing: redacted
        text = f"{self.session.id} ({title}): {self.messages:,} message{'s' if self.messages != 1 else ''}"
        if self.subagents:
            count = len(self.subagents)
            text += f" and {count} sub-agent session{'s' if count != 1 else ''}"
        if self.side_calls:
            count = len(self.side_calls)
            text += f" and {count} title or side call{'s' if count != 1 else ''}"
        return text


def _under(store: Store, session_id: str) -> tuple[list[str], list[str]]:
    """The sub-agent sessions under ``session_id`` (and theirs), and the side calls under any of them."""
    children: dict[str, list[tuple[str, Role]]] = {}
    for child, (parent, role) in parents(store.list_sessions()).items():
        children.setdefault(parent, []).append((child, role))
    subagents: list[str] = []
    side: list[str] = []
    todo = list(children.get(session_id, []))
    while todo:
        child, role = todo.pop()
        if child in subagents or child in side or child == session_id:
            continue
        (side if role in SIDE_ROLES else subagents).append(child)
        todo.extend(children.get(child, []))
    return subagents, side


def delete_session(store: Store, session_id: str, outputs: Path | None = None, *, keep: str | None = None) -> Deleted:
    """Remove ``session_id``, its sub-agent sessions and everything they own, in one transaction; then the
    sub-agent output files it kept under ``outputs`` (see :func:`workbench.engine.agent.subagents.outputs_root`).
    ``keep``: a session that must not go (the one open in the app); nothing is removed if it would.

    Raises :class:`~workbench.engine.errors.SessionNotFound` when there is no such session."""
    with store.transaction():
        session = store.get_session(session_id)
        subagents, side = _under(store, session_id)
        if keep is not None and keep in (session_id, *subagents, *side):
            what = "it is" if keep == session_id else "a session listed under it is"
            raise WorkbenchError(f"{session_id} was not deleted: {what} open; open another session first")
        messages = sum(store.message_count(sid) for sid in (session_id, *subagents, *side))
        for sid in (*side, *subagents, session_id):
            store.connection.execute("DELETE FROM sessions WHERE id = ?", [sid])
    deleted = Deleted(session, messages, tuple(subagents), side_calls=tuple(side))
    if outputs is not None:
        for folder in (outputs / sid for sid in (session_id, *subagents)):
            try:
                if folder.is_dir():
                    shutil.rmtree(folder)
            except OSError as exc:
                deleted.warnings.append(f"could not remove {folder} ({exc.strerror or type(exc).__name__})")
    return deleted
