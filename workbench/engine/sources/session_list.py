"""The stored sessions as a user is shown them: most recently used first, each followed by the sessions that
belong to it, with what tells sessions apart (where the agent worked, its own session id) and what each used.

Both the session picker and ``workbench sessions`` list these rows, so they agree.

What belongs under a session:

- a sub-agent's session, which names its parent (``metadata.parent_session``: the engine's ``task`` tool, a
  proxied Agent call, an imported Claude Code ``agent-*.jsonl``);
- the small calls a proxied agent makes beside its conversation: a *title call* (marked by the proxy,
  :mod:`workbench.engine.sources.side_calls`), or, recorded before the proxy marked them, a *side call* (one
  or two messages, no tools). They go under the conversation of the same agent session id (Claude Code's
  ``metadata.user_id``) that was used last; without one they stay on their own.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from workbench.engine.sources.side_calls import SIDE_CALL_MESSAGES
from workbench.engine.transcript.sessions import listed_sessions

if TYPE_CHECKING:
    from workbench.engine.transcript.models import Session
    from workbench.engine.transcript.store import Store

Role = Literal["session", "sub-agent", "title call", "side call"]
NO_TOOLS = hashlib.blake2b(orjson.dumps([]), digest_size=12).hexdigest()
"""The proxy's ``tools_signature`` of a request without tools (``proxy.threads.tools_signature``)."""


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

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else 1

    def as_json(self) -> dict[str, Any]:
        s = self.session
        used = self.usage
        moment = s.updated_at or s.created_at
        return {"session_id": s.id, "title": s.title, "format": s.source_format, "role": self.role,
                "parent": self.parent, "directory": self.directory, "agent_session": self.agent_session,
                "messages": self.messages, "context_tokens": used.context_tokens if used else None,
                "cost_usd": round(used.cost_usd, 6) if used and used.cost_usd is not None else None,
                "updated_at": moment.isoformat() if moment is not None else None}


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


def role_of(session: Session, messages: int) -> Role:
    meta = session.metadata
    if meta.get("side_call") == "title":
        return "title call"
    if isinstance(meta.get("parent_session"), str):
        return "sub-agent"
    if (session.source_format == "proxy" and meta.get("agent_session") and meta.get("tools_signature") == NO_TOOLS
            and messages <= SIDE_CALL_MESSAGES + 1):  # its request, and the answer
        return "side call"
    return "session"


def grouped(rows: Iterable[tuple[Session, int]], usage: Mapping[str, Usage] | None = None) -> list[ListedSession]:
    """``rows`` (most recently used first) with each session's sub-agents and side calls after it."""
    listed = [ListedSession(s, n, role_of(s, n), None, directory_of(s), agent_session_of(s), (usage or {}).get(s.id))
              for s, n in rows]
    ids = {row.session.id for row in listed}
    main: dict[str, str] = {}
    """Agent session id -> the conversation of it used last (a side call's place)."""
    for row in listed:
        if row.role == "session" and row.agent_session is not None:
            main.setdefault(row.agent_session, row.session.id)
    children: dict[str, list[ListedSession]] = {}
    top: list[ListedSession] = []
    for row in listed:
        parent = row.session.metadata.get("parent_session") if row.role == "sub-agent" else (
            main.get(row.agent_session) if row.role in ("title call", "side call") and row.agent_session else None)
        if isinstance(parent, str) and parent in ids and parent != row.session.id:
            child = ListedSession(row.session, row.messages, row.role, parent, row.directory, row.agent_session,
                                  row.usage)
            children.setdefault(parent, []).append(child)
        else:
            top.append(row)
    out: list[ListedSession] = []
    for row in top:
        out.append(row)
        out.extend(_with_defaults(children.get(row.session.id, []), row))
    return out


def _with_defaults(children: list[ListedSession], parent: ListedSession) -> list[ListedSession]:
    """A side call knows neither where its agent worked nor, sometimes, its id: its session's."""
    return [c if c.directory else ListedSession(c.session, c.messages, c.role, c.parent, parent.directory,
                                                c.agent_session or parent.agent_session, c.usage)
            for c in children]


def session_usage(store: Store) -> dict[str, Usage]:
    """Session id -> what its requests used, from the usage each assistant message carries (what the app's
    cost adds up)."""
    rows = store.connection.execute(
        "SELECT session_id, model, usage FROM messages WHERE usage IS NOT NULL ORDER BY session_id, idx").fetchall()
    if not rows:
        return {}
    from workbench.engine.context.pricing import prices_for, usage_cost  # deferred: the price table
    from workbench.engine.transcript.models import Usage as Reported

    context: dict[str, int] = {}
    costs: dict[str, float] = {}
    priced: set[str] = set()
    for session_id, model, text in rows:
        data = json.loads(text)
        if not isinstance(data, dict):
            continue
        reported = Reported.model_construct(**{k: v for k, v in data.items() if k in Reported.model_fields})
        if reported.total_input <= 0 and reported.output_tokens <= 0:
            continue
        context[session_id] = reported.total_input
        prices = prices_for(reported.model or model)
        costs[session_id] = costs.get(session_id, 0.0) + (usage_cost(reported, prices) if prices else 0.0)
        if prices is not None:
            priced.add(session_id)
    return {sid: Usage(tokens, costs[sid] if sid in priced else None) for sid, tokens in context.items()}


def session_list(store: Store, keep: str | None = None) -> list[ListedSession]:
    """The stored sessions a user is shown (:func:`~workbench.engine.transcript.sessions.listed_sessions`),
    grouped, with what each used."""
    rows = sorted(listed_sessions(store, keep), key=_recency, reverse=True)
    return grouped(rows, session_usage(store) if rows else None)


def _recency(entry: tuple[Session, int]) -> tuple[float, str]:
    """Most recent first; the id orders sessions used at the same moment."""
    moment = entry[0].updated_at or entry[0].created_at
    return (moment.timestamp() if moment is not None else 0.0, entry[0].id)
