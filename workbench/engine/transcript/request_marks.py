"""Where a proxied agent's recent requests put their prompt-cache marks, for pricing an edit of its context.

The API caches a prompt only at a ``cache_control`` mark (or at the last block, for a request that asks for
caching as a whole), and looks an entry up only a few blocks back from each mark. So what an edit re-writes
depends on where the agent's marks stood and which of the entries they wrote are still alive. This reads that
from the stored requests (see ``request_store``): the latest request's blocks, one position per content block
in the order the API caches them (tools, system, message blocks), and the marks of the requests before it
that share its messages up to the mark.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import orjson

from workbench.engine.transcript.models import Usage
from workbench.engine.transcript.request_store import message_keys, stored_block
from workbench.engine.transcript.store import Store

Ttl = Literal["5m", "1h"]
TTLS: Mapping[Ttl, timedelta] = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1)}
"""How long an entry lives after it was last written or read, by the TTL its mark asked for."""


def ttl_of(mark: Any) -> Ttl:
    """The TTL a ``cache_control`` value asks for: ``{"type": "ephemeral", "ttl": "1h"}`` is an hour, anything
    else the default five minutes."""
    return "1h" if isinstance(mark, Mapping) and mark.get("ttl") == "1h" else "5m"


@dataclass(frozen=True)
class MarkAt:
    """A cache mark of one request: its block position and TTL, and when that request was sent."""

    position: int
    ttl: Ttl
    sent_at: datetime


@dataclass(frozen=True)
class RequestMarks:
    """The latest request of a session as the prompt cache sees it."""

    sent_at: datetime
    prompt_blocks: int
    """Tool definitions and system blocks: the positions before the first message's."""
    messages: tuple[tuple[str | None, int], ...]
    """Each message's transcript id (None when it has none) and number of content blocks, in order."""
    marks: tuple[MarkAt, ...]
    """The latest request's own marks."""
    earlier: tuple[MarkAt, ...]
    """Marks of earlier requests (within the longest TTL) at positions the latest shares with them; each
    with the time of the request after it (which read it, refreshing it) or its own."""
    added_blocks: int
    """Blocks the latest request added to the one before it: how far an agent's next request moves a mark
    that stands on the last message."""
    usage: Usage | None
    totals: tuple[tuple[int, int], ...] = ()
    prefix_cached: bool = False
    """The API caches every prefix of a request by itself, without marks or a write premium (OpenAI's)."""
    """(last block position, tokens the API reported it sent) of the latest request and of each earlier one
    whose messages the latest all repeats, in position order: the exact size of the prompt up to there."""


PREFIX_CACHED_APIS = ("responses", "chat")
"""The ``api`` a proxied OpenAI request is recorded with (``openai_requests``): OpenAI caches prefixes itself."""


def _positions(params: Mapping[str, Any], tools: int, system: int, blocks: list[int], count: int
               ) -> list[tuple[int, Ttl]]:
    """(position, TTL) of each mark a request's ``params`` kept, in the messages ``blocks`` counts the blocks of
    (the request had ``count`` messages)."""
    message_start = [tools + system]
    for size in blocks:
        message_start.append(message_start[-1] + size)
    out: list[tuple[int, Ttl]] = []
    for where, index, block, mark in params.get("__marks__", ()):
        if where == "tools":
            out.append((int(index), ttl_of(mark)))
        elif where == "system":
            out.append((tools + int(index), ttl_of(mark)))
        elif int(index) < len(blocks):
            out.append((message_start[int(index)] + max(int(block), 0), ttl_of(mark)))
    if "cache_control" in params and count == len(blocks) and message_start[-1] > 0:  # automatic caching: a mark on the last block
        out.append((message_start[-1] - 1, ttl_of(params["cache_control"])))
    return out


def _counts(prompt: Mapping[str, Any]) -> tuple[int, int]:
    tools = prompt.get("tools")
    system = prompt.get("system")
    return (len(tools) if isinstance(tools, list) else 0,
            len(system) if isinstance(system, list) else (1 if system else 0))


def request_marks(store: Store, session_id: str) -> RequestMarks | None:
    """The latest request of ``session_id`` and the live-or-not marks before it (None: no stored request)."""
    sql = ("SELECT seq, created_at, prompt, params, base_seq, keep, usage FROM requests WHERE session_id = ? "
           "ORDER BY seq DESC LIMIT 1")
    row = store.connection.execute(sql, [session_id]).fetchone()
    if row is None:
        return None
    seq, created, prompt_key, params_blob, base_seq, keep, usage = row
    sent_at = datetime.fromisoformat(created)
    entries = [stored_block(store, key) for key in message_keys(store, session_id, seq)]
    messages = tuple((e.get("id"), len(e["content"]) if isinstance(e["content"], list) else 1) for e in entries)
    blocks = [count for _, count in messages]
    tools, system = _counts(stored_block(store, prompt_key))
    params = orjson.loads(zlib.decompress(params_blob))
    own = tuple(MarkAt(p, ttl, sent_at) for p, ttl in _positions(params, tools, system, blocks, len(blocks)))
    totals: list[tuple[int, int]] = []
    earlier = _earlier(store, session_id, base_seq, keep, prompt_key, sent_at, (tools, system, blocks), totals)
    added = sum(blocks[min(keep or 0, len(blocks)):]) if base_seq is not None else sum(blocks)
    reported = Usage.model_validate_json(usage) if usage else None
    if reported is not None and reported.total_input:
        totals.append((tools + system + sum(blocks) - 1, reported.total_input))
    return RequestMarks(sent_at=sent_at, prompt_blocks=tools + system, messages=messages, marks=own,
                        earlier=earlier, added_blocks=added, usage=reported, totals=tuple(sorted(totals)),
                        prefix_cached=params.get("api") in PREFIX_CACHED_APIS)


def _earlier(store: Store, session_id: str, base_seq: int | None, keep: int, prompt_key: str, after: datetime,
             layout: tuple[int, int, list[int]], totals: list[tuple[int, int]]) -> tuple[MarkAt, ...]:
    """The marks of the requests the latest one extends (its chain of bases), sent within the longest TTL,
    at positions inside the messages every request since shares with the latest; ``totals`` gets the reported
    size of each of them the latest repeats whole."""
    tools, system, blocks = layout
    shared = keep
    since = after - max(TTLS.values())
    out: list[MarkAt] = []
    sql = ("SELECT created_at, prompt, params, base_seq, keep, added, usage FROM requests "
           "WHERE session_id = ? AND seq = ?")
    current: int | None = None
    while base_seq is not None and (current is None or base_seq < current):  # a base comes before: no loop
        current = base_seq
        row = store.connection.execute(sql, [session_id, base_seq]).fetchone()
        if row is None or row[1] != prompt_key:  # other tools or system: none of its entries can match
            break
        sent = datetime.fromisoformat(row[0])
        if sent < since:
            break
        params = orjson.loads(zlib.decompress(row[2]))
        limit = tools + system + sum(blocks[:shared])
        count = int(row[4] or 0) + (len(row[5].split(",")) if row[5] else 0)
        out += [MarkAt(p, ttl, after) for p, ttl in _positions(params, tools, system, blocks[:shared], count)
                if p < limit]
        usage = Usage.model_validate_json(row[6]) if row[6] else None
        if usage is not None and usage.total_input and 0 < count <= shared:
            totals.append((tools + system + sum(blocks[:count]) - 1, usage.total_input))
        base_seq, shared, after = row[3], min(shared, int(row[4] or 0)), sent
    return tuple(out)
