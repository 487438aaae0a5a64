"""The rows the store writes for messages, parts and usage, as plain tuples for ``executemany``.

Writing through sqlite-utils' ``insert_all`` or ``upsert`` costs a table lookup and a JSON check of every
column of every row; a 50,000-message import spent two thirds of its time there. These statements and
tuples do the same writes in one prepared statement each.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only named: opening a store and listing its sessions needs no pydantic model
    from workbench.engine.transcript.models import Message, Usage
    from workbench.engine.transcript.tokens import TokenCounter

INSERT_MESSAGE = (
    "INSERT OR REPLACE INTO messages (session_id, id, idx, role, kind, agent_visible, user_visible, sidechain, "
    "created_at, model, usage, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_PARTS = "DELETE FROM parts WHERE session_id = ? AND message_id = ?"
INSERT_PART = (
    "INSERT INTO parts (session_id, message_id, position, kind, body, content_hash, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_USAGE_COLUMNS = ("model", "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                  "synthetic", "estimated_input", "created_at")
UPSERT_USAGE = (
    f"INSERT INTO usage_records (session_id, message_id, {', '.join(_USAGE_COLUMNS)}) "
    f"VALUES (?, ?, {', '.join('?' * len(_USAGE_COLUMNS))}) ON CONFLICT (session_id, message_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _USAGE_COLUMNS)
)

MessageRow = tuple[str, str, int, str, str, int, int, int, str | None, str | None, str | None, str]
PartRow = tuple[str, str, int, str, str | bytes, str, int]
UsageRow = tuple[str, str, str | None, int, int, int, int, int, int | None, str]


def now() -> str:
    return datetime.now(UTC).isoformat()


def stored_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def body(json_text: str, compress_over: int | None) -> str | bytes:
    """A part's stored body: its JSON, zlib-compressed when longer than ``compress_over`` characters."""
    if compress_over is None or len(json_text) <= compress_over:
        return json_text
    return zlib.compress(json_text.encode(), 1)


def message_row(m: Message) -> MessageRow:
    return (
        m.session_id, m.id, m.index, m.role, m.kind, int(m.agent_visible), int(m.user_visible), int(m.sidechain),
        m.created_at.isoformat() if m.created_at else None, m.model,
        m.usage.model_dump_json() if m.usage else None, json.dumps(m.source),
    )


def part_rows(messages: Iterable[Message], counter: TokenCounter, compress_over: int | None) -> Iterator[PartRow]:
    """Each part once, counted (a part's count is made here, when it is stored, and never again)."""
    for m in messages:
        for position, part in enumerate(m.parts):
            text, key = part.json_and_key()
            yield (m.session_id, m.id, position, part.kind, body(text, compress_over), key, counter.count_part(part))


def usage_row(session_id: str, message_id: str, usage: Usage, estimated_input: int | None, created: str) -> UsageRow:
    return (
        session_id, message_id, usage.model, usage.input_tokens, usage.output_tokens,
        usage.cache_creation_input_tokens, usage.cache_read_input_tokens, int(usage.synthetic), estimated_input,
        created,
    )


def upsert(table: str, row: Mapping[str, Any], key: Sequence[str]) -> str:
    """The statement that inserts ``row`` (its values in order) or, when ``key`` matches a stored row, sets its
    other columns: the columns ``row`` does not name keep their values."""
    names = ", ".join(row)
    updates = ", ".join(f"{c} = excluded.{c}" for c in row if c not in key)
    return (f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}")
