"""Stored messages rebuilt from their rows: the whole session, some of its messages, or a run of positions.

Rows are the store's own writes (validated when saved), so they are rebuilt without validating again: a
50,000-message session is over 100,000 models. Repeated strings (roles, kinds, models, tool ids and argument
names) are shared. Two plain queries, not one join: the join repeats each message's columns per part and
sorts, a quarter slower.
"""

from __future__ import annotations

import sqlite3
import zlib
from typing import Any

from workbench.engine.transcript.models import (
    Message,
    Part,
    TextPart,
    Usage,
    parse_stored,
    stored_model,
    stored_part,
    trusted,
)
from workbench.engine.transcript.store_rows import stored_time

DAMAGED_PART = "[damaged: this part of the message could not be read from the database]"


def readable_part(body: str | bytes, tokens: int, shared: dict[str, str] | None = None) -> Part:
    """The stored part, or (bytes of it changed on disk) a text part saying it is damaged: one bad row costs
    that part, not every command that reads the session."""
    try:
        return stored_part(body, tokens, shared)
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error):  # not JSON, not a part, not zlib
        return TextPart(text=DAMAGED_PART).with_tokens(tokens)


MESSAGE_COLUMNS = ("id, idx, role, kind, agent_visible, user_visible, sidechain, created_at, model, usage, source")


def read_messages(conn: sqlite3.Connection, session_id: str, where: str = "", params: tuple[Any, ...] = ()
                  ) -> list[Message]:
    """The session's messages in order, each part with its stored token count; ``where`` (``AND ...`` over the
    messages table's columns, with ``params``) picks some of them."""
    parts: dict[str, list[Any]] = {}
    shared: dict[str, str] = {}
    only = f" AND message_id IN (SELECT id FROM messages WHERE session_id = ?{where})" if where else ""
    for message_id, body, tokens in conn.execute(
        f"SELECT message_id, body, tokens FROM parts WHERE session_id = ?{only} ORDER BY message_id, position",
        (session_id, session_id, *params) if where else (session_id,),
    ):
        found = parts.get(message_id)
        if found is None:
            parts[message_id] = found = []
        found.append(readable_part(body, tokens, shared))
    out: list[Message] = []
    cursor = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ?{where} ORDER BY idx", (session_id, *params))
    for mid, idx, role, kind, av, uv, side, created, model, usage, source in cursor:
        out.append(trusted(Message, {
            "id": mid,
            "session_id": session_id,
            "index": idx,
            "role": shared.setdefault(role, role),
            "parts": parts.pop(mid, []),
            "kind": shared.setdefault(kind, kind),
            "agent_visible": bool(av),
            "user_visible": bool(uv),
            "sidechain": bool(side),
            "created_at": stored_time(created),
            "model": shared.setdefault(model, model) if model else model,
            "usage": stored_model(Usage, usage) if usage else None,
            "source": parse_stored(source) if source and source != "{}" else {},
        }))
    return out
