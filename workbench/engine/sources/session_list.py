"""The stored sessions as a user is shown them: most recently used first, each followed by the sessions that
belong to it, with what tells sessions apart (where the agent worked, its own session id) and what each used.

Both the session picker and ``workbench sessions`` list these rows, so they agree.

What belongs under a session is decided where deleting a session finds what goes with it
(:func:`workbench.engine.transcript.sessions.parents`): its sub-agents' sessions, and the small calls a proxied
agent makes beside its conversation (a title call, marked by the proxy as :mod:`..side_calls` tells one).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.engine.transcript.sessions import Role, listed_sessions, parents
from workbench.engine.transcript.store import DAMAGED

if TYPE_CHECKING:
    from workbench.engine.transcript.models import Session
    from workbench.engine.transcript.store import Store


@dataclass(frozen=True, slots=True)
class Usage:
    """What a session's requests used, as their responses reported it."""

    context_tokens: int
    """What the latest request sent (uncached, cache written and cache read): the context's size."""
    cost_usd: float | None
    """Every request priced by the model it names; None when no request's model has a price."""


@dataclass(frozen=True, slots=True)
class ListedSession:
    """One row of the session list."""

    session: Session
    messages: int
    role: Role
    parent: str | None
    """The session this one is listed under (None at the top level)."""
    directory: str | None
    """Where the agent worked."""
    agent_session: str | None
    """The agent's own id for the session (Claude Code's session id, Codex's, OpenCode's)."""
    usage: Usage | None
    """None when no request reported usage (a transcript without it, a session that sent nothing yet)."""
    depth: int = 0
    """How many sessions it is listed under (a sub-agent's sub-agent: 2)."""

    @property
    def branch(self) -> str:
        """What a list puts before its title: ``└ `` under its session, indented by its depth."""
        return "  " * (self.depth - 1) + "└ " if self.depth else ""

    def as_json(self) -> dict[str, Any]:
        s = self.session
        used = self.usage
        moment = s.updated_at or s.created_at
        return {"session_id": s.id, "title": s.title, "format": s.source_format, "role": self.role,
                "parent": self.parent, "directory": self.directory, "agent_session": self.agent_session,
                "messages": self.messages, "context_tokens": used.context_tokens if used else None,
                "cost_usd": round(used.cost_usd, 6) if used and used.cost_usd is not None else None,
                "updated_at": moment.isoformat() if moment is not None else None,
                **({"damaged": s.metadata[DAMAGED]} if DAMAGED in s.metadata else {})}


def _nested(meta: Mapping[str, Any], key: str, field: str) -> str | None:
    inner = meta.get(key)
    value = inner.get(field) if isinstance(inner, Mapping) else None
    return value if isinstance(value, str) and value else None


def home_relative(path: str, home: Path | None = None) -> str:
    """``~/…`` for a path under the home directory, so a list shows what tells sessions apart."""
    home = home or Path(os.environ.get("HOME") or Path.home())
    try:
        return "~/" + Path(path).relative_to(home).as_posix()
    except ValueError:
        return path


def directory_of(session: Session) -> str | None:
    """Where the agent worked: Claude Code's ``cwd``, the engine's workspace, Codex's and OpenCode's
    directory, or, for a fork, its source's."""
    meta = session.metadata
    for key in ("cwd", "workspace"):
        if isinstance(meta.get(key), str) and meta[key]:
            return str(meta[key])
    return (_nested(meta, "codex", "cwd") or _nested(meta, "opencode", "directory")
            or _nested(meta, "forked_from", "directory"))


def agent_session_of(session: Session) -> str | None:
    """The agent's own session id: Claude Code's (from its transcript, or a proxied request's
    ``metadata.user_id``), Codex's, OpenCode's."""
    meta = session.metadata
    for key in ("sessionId", "agent_session"):
        if isinstance(meta.get(key), str) and meta[key]:
            return str(meta[key])
    return _nested(meta, "codex", "id") or _nested(meta, "opencode", "id")


def grouped(rows: Iterable[tuple[Session, int]], usage: Mapping[str, Usage] | None = None) -> list[ListedSession]:
    """``rows`` (most recently used first) with each session's sub-agents and side calls after it; those know
    where their agent worked and its session id from their session when they do not say."""
    rows = list(rows)
    under = parents(rows)
    used = usage or {}
    children: dict[str, list[tuple[Session, int, Role]]] = {}
    for session, count in rows:
        if session.id in under:
            parent, role = under[session.id]
            children.setdefault(parent, []).append((session, count, role))
    out: list[ListedSession] = []

    def emit(row: ListedSession) -> None:
        out.append(row)
        for child, count, role in children.pop(row.session.id, []):  # popped: a loop of parents ends
            emit(ListedSession(child, count, role, row.session.id, directory_of(child) or row.directory,
                               agent_session_of(child) or row.agent_session, used.get(child.id), row.depth + 1))

    for session, count in rows:
        if session.id not in under:
            emit(ListedSession(session, count, "session", None, directory_of(session), agent_session_of(session),
                               used.get(session.id)))
    shown = {row.session.id for row in out}
    for session, count in rows:  # parents that name each other: listed on their own rather than not at all
        if session.id not in shown:
            out.append(ListedSession(session, count, "session", None, directory_of(session),
                                     agent_session_of(session), used.get(session.id)))
    return out


def session_usage(store: Store) -> dict[str, Usage]:
    """Session id -> what its requests used, from the usage each assistant message carries (what the app's
    cost adds up)."""
    rows = store.connection.execute(
        "SELECT session_id, model, usage FROM messages WHERE usage IS NOT NULL ORDER BY session_id, idx").fetchall()
    if not rows:
        return {}
    from workbench.engine.context.pricing import prices_for, usage_cost  # deferred: the price table
    from workbench.engine.transcript.models import Usage as Reported
    from workbench.engine.transcript.models import stored_model

    context: dict[str, int] = {}
    costs: dict[str, float] = {}
    for session_id, model, text in rows:
        reported = stored_model(Reported, text)  # as the session's own load reads it
        total = reported.total_input
        if total <= 0 and reported.output_tokens <= 0:
            continue
        context[session_id] = total
        prices = prices_for(reported.model or model)
        if prices is not None:
            costs[session_id] = costs.get(session_id, 0.0) + usage_cost(reported, prices)
    return {sid: Usage(tokens, costs.get(sid)) for sid, tokens in context.items()}


def session_list(store: Store, keep: str | None = None) -> list[ListedSession]:
    """The stored sessions a user is shown (:func:`~workbench.engine.transcript.sessions.listed_sessions`),
    grouped, with what each used."""
    rows = sorted(listed_sessions(store, keep), key=_recency, reverse=True)
    return grouped(rows, session_usage(store) if rows else None)


def _recency(entry: tuple[Session, int]) -> tuple[float, str]:
    """Most recent first; the id orders sessions used at the same moment."""
    moment = entry[0].updated_at or entry[0].created_at
    return (moment.timestamp() if moment is not None else 0.0, entry[0].id)
