"""Requests a proxied agent sent, stored by new content rather than by request.

Every request repeats the whole history. Blocks (system blocks, tool definitions, message content) are
stored once under the hash of their JSON, zlib-compressed; a message is stored as its role, its
transcript id and the hashes of its blocks; a request as its parameters, a ``prompt`` entry (system +
tools hashes) and the messages it adds to the first ``keep`` messages of an earlier request
(``base_seq``). A message block the session's transcript already holds as a part, and renders back to
the same JSON, is not stored again: its hash is None and the part is read instead. ``cache_control``
marks are kept with the request that carried them, so a request comes back exactly as it was sent.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from workbench.engine.transcript.blocks import part_block
from workbench.engine.transcript.models import TextPart, Usage
from workbench.engine.transcript.overlay import PENDING
from workbench.engine.transcript.request_blocks import content_blocks, digest, part_of
from workbench.engine.transcript.store import Store

Mark = tuple[str, int, int, Any]
"""Where a ``cache_control`` mark stood: ("system" | "tools" | "messages", index, block index or -1, mark)."""
SKIP_PARAMS = frozenset({"messages", "system", "tools"})


@dataclass
class EncodedRequest:
    """A request taken apart: new blocks to store, the message hashes, and the rest."""

    blocks: dict[str, bytes] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    prompt: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    entries: dict[str, str] = field(default_factory=dict)
    """Entry hash of each message taken apart here, by transcript id (for ``encode(known=...)``)."""


@dataclass(frozen=True)
class RequestRow:
    """One stored request, as the request list shows it."""

    seq: int
    created_at: str
    model: str | None
    max_tokens: int | None
    messages: int
    status: int | None
    usage: Usage | None
    edited: bool
    warning: str | None
    api_edits: list[dict[str, Any]] = field(default_factory=list)
    """Tool uses or thinking the API cleared from this request itself (``context_management``)."""
    outcome: str | None = None
    """How the answer ended when not as the API means it to (None: as its HTTP status says)."""


def _put(out: dict[str, bytes], data: Any) -> str:
    key = digest(data)
    if key not in out:
        out[key] = zlib.compress(orjson.dumps(data, option=orjson.OPT_SORT_KEYS), 1)
    return key


def _unmarked(block: Mapping[str, Any], marks: list[Mark], where: str, index: int, position: int) -> dict[str, Any]:
    if "cache_control" not in block:
        return dict(block)
    marks.append((where, index, position, block["cache_control"]))
    return {key: value for key, value in block.items() if key != "cache_control"}


def _in_transcript(block: dict[str, Any]) -> bool:
    """The transcript's part for this block renders back to exactly this block."""
    return part_block(part_of(block)) == block


def _same(value: Any) -> Any:
    return value


def encode(body: Mapping[str, Any], ids: Sequence[str | None] | None = None,
           changed: AbstractSet[tuple[int, int]] = frozenset(), *, clean: Callable[[Any], Any] = _same,
           known: Mapping[str, str] | None = None,
           prompts: dict[str, tuple[str, list[Mark]]] | None = None) -> EncodedRequest:
    """Take a request body apart into content-addressed entries.

    ``ids``: the transcript id of each message, whose parts then stand for the blocks they reproduce,
    except at ``changed`` (message, block) positions, where what is sent differs from the transcript (a
    steered block). ``clean``: what is stored of a block (redaction). ``known``: entry hashes of messages
    stored with an earlier request, by id, so a history is not taken apart again with every request;
    ``prompts``: the same for system prompts and tools (filled here), by the hash of what was sent.
    """
    out = EncodedRequest()
    marks: list[Mark] = []
    system, tools = body.get("system"), body.get("tools")
    seen = digest([system, tools]) if prompts is not None else ""
    if prompts is not None and seen in prompts:
        out.prompt, prompt_marks = prompts[seen]
        marks.extend(prompt_marks)
    else:
        if isinstance(system, list):
            system_keys: Any = [_put(out.blocks, clean(_unmarked(b, marks, "system", i, -1)))
                                for i, b in enumerate(system)]
        else:
            system_keys = clean(system)
        tool_keys = [_put(out.blocks, clean(_unmarked(t, marks, "tools", i, -1))) for i, t in enumerate(tools)] \
            if isinstance(tools, list) else tools
        out.prompt = _put(out.blocks, {"system": system_keys, "tools": tool_keys})
        if prompts is not None:
            prompts[seen] = (out.prompt, list(marks))
    steered = {index for index, _ in changed}
    for index, message in enumerate(body.get("messages") or ()):
        message_id = ids[index] if ids is not None and index < len(ids) else None
        content = message.get("content")
        if known is not None and message_id is not None and message_id in known and index not in steered:
            for j, block in enumerate(content if isinstance(content, list) else ()):
                if isinstance(block, Mapping) and "cache_control" in block:
                    marks.append(("messages", index, j, block["cache_control"]))
            out.messages.append(known[message_id])
            continue
        entry: dict[str, Any] = {"role": message.get("role")}
        if message_id is not None:
            entry["id"] = message_id
        if isinstance(content, str):
            entry["content"] = None if "id" in entry and (index, 0) not in changed else clean(content)
        else:
            stored: list[str | None] = []
            for j, block in enumerate(content_blocks(message)):
                plain = clean(_unmarked(block, marks, "messages", index, j))
                derived = "id" in entry and (index, j) not in changed and _in_transcript(plain)
                stored.append(None if derived else _put(out.blocks, plain))
            entry["content"] = stored
        key = _put(out.blocks, entry)
        out.messages.append(key)
        if message_id is not None and index not in steered:
            out.entries[message_id] = key
    out.params = {key: clean(value) for key, value in body.items() if key not in SKIP_PARAMS}
    if marks:
        out.params["__marks__"] = marks
    return out


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class MissingBlocks(KeyError):
    """A request would refer to stored blocks that are not there (an earlier write was lost): store it whole."""


def next_seq(store: Store, session_id: str) -> int:
    """The number of the session's next request. Called inside the write transaction that stores it, so two
    writers on one database (two proxies) never take the same number."""
    row = store.connection.execute("SELECT max(seq) FROM requests WHERE session_id = ?", [session_id]).fetchone()
    return int(row[0] or 0) + 1


def _missing(store: Store, keys: AbstractSet[str]) -> set[str]:
    """Which of ``keys`` no stored block has."""
    wanted = sorted(keys)
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        found.update(row[0] for row in store.connection.execute(
            f"SELECT hash FROM request_blocks WHERE hash IN ({', '.join('?' * len(chunk))})", chunk))
    return set(wanted) - found


def save_request(
    store: Store,
    session_id: str,
    encoded: EncodedRequest,
    known: tuple[int, list[str]] | None,
    *,
    edited: bool,
    warning: str | None,
    seq: int | None = None,
) -> int:
    """Store one request as the session's next (or as ``seq``, taken with :func:`next_seq` in the caller's
    transaction); returns its number. ``known``: the caller's record of (seq, message hashes) of a request it
    stored, used as the base when it is still the session's latest. The base is always an earlier request
    (so a chain of bases ends), and a request whose base cannot be read is stored whole; one that refers to
    blocks no longer stored raises :class:`MissingBlocks` (nothing written), to be encoded again whole."""
    with store.transaction():
        if seq is None:
            seq = next_seq(store, session_id)
        try:
            base = last_request(store, session_id, known)
        except KeyError:
            base = None  # an earlier request's chain is broken: this one stands alone
        if base is not None and base[0] >= seq:
            base = None
        keep = common_prefix(base[1], encoded.messages) if base else 0
        referred = {encoded.prompt, *encoded.messages[keep:]} - encoded.blocks.keys()
        if referred and (missing := _missing(store, referred)):
            raise MissingBlocks(f"request blocks {', '.join(sorted(missing)[:3])} are missing")
        params = encoded.params
        row = {
            "session_id": session_id, "seq": seq, "created_at": datetime.now(UTC).isoformat(),
            "model": params.get("model") if isinstance(params.get("model"), str) else None,
            "max_tokens": params.get("max_tokens") if isinstance(params.get("max_tokens"), int) else None,
            "prompt": encoded.prompt, "params": zlib.compress(orjson.dumps(params), 1),
            "base_seq": base[0] if base else None, "keep": keep,
            "added": ",".join(encoded.messages[keep:]), "edited": int(edited), "warning": warning,
        }
        store.connection.executemany("INSERT OR IGNORE INTO request_blocks (hash, body) VALUES (?, ?)",
                                     list(encoded.blocks.items()))
        columns = ", ".join(row)
        store.connection.execute(f"INSERT INTO requests ({columns}) VALUES ({', '.join('?' * len(row))})",
                                 list(row.values()))
    return seq


def finish_request(store: Store, session_id: str, seq: int, status: int, usage: Usage | None,
                   api_edits: Sequence[Mapping[str, Any]] = (), outcome: str | None = None) -> None:
    """Record how the request ended: the HTTP status, the usage the API reported, the context edits the
    API itself applied (``context_management``), and ``outcome`` when the answer did not end as its status says."""
    with store.transaction():
        store.connection.execute(
            "UPDATE requests SET status = ?, usage = ?, api_edits = ?, outcome = ? WHERE session_id = ? AND seq = ?",
            [status, usage.model_dump_json() if usage else None, orjson.dumps(list(api_edits)).decode() if api_edits
             else None, outcome, session_id, seq])


def _block(store: Store, key: str) -> Any:
    row = store.connection.execute("SELECT body FROM request_blocks WHERE hash = ?", [key]).fetchone()
    if row is None:
        raise KeyError(f"request block {key} is missing")
    return orjson.loads(zlib.decompress(row[0]))


def stored_block(store: Store, key: str) -> Any:
    """One stored block (a system block, a tool definition, a message entry, a prompt) by its hash."""
    return _block(store, key)


def message_keys(store: Store, session_id: str, seq: int) -> list[str]:
    """The message hashes of one request, rebuilt from its chain of earlier requests."""
    chain: list[tuple[int, list[str]]] = []
    current: int | None = seq
    while current is not None:
        row = store.connection.execute("SELECT base_seq, keep, added FROM requests WHERE session_id = ? AND seq = ?",
                                    [session_id, current]).fetchone()
        if row is None:
            raise KeyError(f"request {current} of session {session_id} is missing")
        chain.append((int(row[1]), row[2].split(",") if row[2] else []))
        if row[0] is not None and row[0] >= current:  # written by an older workbench: a base must come before
            raise KeyError(f"request {current} of session {session_id} is based on request {row[0]}, not an "
                           "earlier one")
        current = row[0]
    keys: list[str] = []
    for keep, added in reversed(chain):
        keys = keys[:keep] + added
    return keys


def _marked(block: Any, marks: dict[tuple[str, int, int], Any], where: str, index: int, position: int) -> Any:
    mark = marks.get((where, index, position))
    return block if mark is None else {**block, "cache_control": mark}


@dataclass(frozen=True)
class SentMessage:
    """One message of a stored request: as it was forwarded, and what the agent itself had sent."""

    role: str
    content: str | list[Any]
    """As forwarded, ``cache_control`` marks included."""
    message_id: str | None
    """The transcript message it stands for (None: stored whole, without one)."""
    original: tuple[Any, ...] = ()
    """The agent's own blocks, from the transcript (empty when ``message_id`` is None)."""
    replaced: tuple[int, ...] = ()
    """Positions of blocks the workbench's steering replaced: what was forwarded is not what the agent sent."""


def _steered(block: Any, part: Any) -> bool:
    """A block stored apart from a transcript part whose content it does not carry: a steered block (a
    block stored only because the transcript's part does not render back to it reads as that same part)."""
    plain = {key: value for key, value in block.items() if key != "cache_control"} if isinstance(block, Mapping) \
        else block
    return not isinstance(plain, Mapping) or part_of(plain) != part


def request_messages(store: Store, session_id: str, seq: int) -> list[SentMessage]:
    """The messages of one stored request, each as forwarded and as the agent sent it."""
    row = store.connection.execute("SELECT params FROM requests WHERE session_id = ? AND seq = ?",
                                   [session_id, seq]).fetchone()
    if row is None:
        raise KeyError(f"no request {seq} in session {session_id}")
    params: dict[str, Any] = orjson.loads(zlib.decompress(row[0]))
    marks = {(m[0], int(m[1]), int(m[2])): m[3] for m in params.get("__marks__", [])}
    entries = [_block(store, key) for key in message_keys(store, session_id, seq)]
    wanted = [e["id"] for e in entries if "id" in e]
    transcript = {m.id: m for m in store.load_messages(session_id, wanted)} if wanted else {}
    out = []
    for index, entry in enumerate(entries):
        content = entry["content"]
        message_id = entry.get("id")
        parts = transcript[message_id].parts if message_id in transcript else []
        original = tuple(part_block(part) for part in parts)
        replaced: list[int] = []
        if content is None:
            content = parts[0].text if parts and isinstance(parts[0], TextPart) else ""
        elif isinstance(content, list):
            blocks = [_block(store, k) if k is not None else part_block(parts[j]) for j, k in enumerate(content)]
            replaced = [j for j, k in enumerate(content) if k is not None and j < len(parts)
                        and _steered(blocks[j], parts[j])]
            content = [_marked(block, marks, "messages", index, j) for j, block in enumerate(blocks)]
        elif message_id is not None:
            replaced = [0]
        out.append(SentMessage(role=entry["role"], content=content, message_id=message_id, original=original,
                               replaced=tuple(replaced)))
    return out


def request_body(store: Store, session_id: str, seq: int) -> dict[str, Any]:
    """One stored request, exactly as it was forwarded."""
    row = store.connection.execute("SELECT prompt, params FROM requests WHERE session_id = ? AND seq = ?",
                                [session_id, seq]).fetchone()
    if row is None:
        raise KeyError(f"no request {seq} in session {session_id}")
    params: dict[str, Any] = orjson.loads(zlib.decompress(row[1]))
    marks = {(m[0], int(m[1]), int(m[2])): m[3] for m in params.pop("__marks__", [])}
    prompt = _block(store, row[0])
    body: dict[str, Any] = {}
    for key, value in params.items():
        body[key] = value
    if isinstance(prompt["system"], list):
        body["system"] = [_marked(_block(store, k), marks, "system", i, -1) for i, k in enumerate(prompt["system"])]
    elif prompt["system"] is not None:
        body["system"] = prompt["system"]
    if isinstance(prompt["tools"], list):
        body["tools"] = [_marked(_block(store, k), marks, "tools", i, -1) for i, k in enumerate(prompt["tools"])]
    body["messages"] = [{"role": m.role, "content": m.content} for m in request_messages(store, session_id, seq)]
    return body


def latest_prompt(store: Store, session_id: str) -> tuple[Any, Any, int | None] | None:
    """(system, tools, max_tokens) of the session's latest request, or None if it has none."""
    row = store.connection.execute(
        "SELECT prompt, max_tokens FROM requests WHERE session_id = ? ORDER BY seq DESC LIMIT 1", [session_id]
    ).fetchone()
    if row is None:
        return None
    prompt = _block(store, row[0])
    system = prompt["system"]
    if isinstance(system, list):
        system = [_block(store, k) for k in system]
    tools = [_block(store, k) for k in prompt["tools"]] if isinstance(prompt["tools"], list) else None
    return system, tools, row[1]


def request_prompt(store: Store, session_id: str, seq: int) -> tuple[Any, list[Any]]:
    """(system, tools) of one stored request, without their ``cache_control`` marks."""
    row = store.connection.execute("SELECT prompt FROM requests WHERE session_id = ? AND seq = ?",
                                   [session_id, seq]).fetchone()
    if row is None:
        raise KeyError(f"no request {seq} in session {session_id}")
    prompt = _block(store, row[0])
    system = prompt["system"]
    if isinstance(system, list):
        system = [_block(store, k) for k in system]
    tools = [_block(store, k) for k in prompt["tools"]] if isinstance(prompt["tools"], list) else []
    return system, tools


def last_request(store: Store, session_id: str,
                 known: tuple[int, list[str]] | None = None) -> tuple[int, list[str]] | None:
    """(seq, message hashes) of the session's latest request: the base of its next one. ``known``: the
    caller's own record of a request, taken when it is still the latest; rebuilding the hashes walks the
    chain of every earlier request, a query each, which grew with every request of a session."""
    row = store.connection.execute("SELECT max(seq) FROM requests WHERE session_id = ?", [session_id]).fetchone()
    if row is None or row[0] is None:
        return None
    if known is not None and known[0] == row[0]:
        return known
    return int(row[0]), message_keys(store, session_id, int(row[0]))


def list_requests(store: Store, session_id: str) -> Iterator[RequestRow]:
    sql = ("SELECT seq, created_at, model, max_tokens, base_seq, keep, added, status, usage, edited, warning, "
           "api_edits, outcome FROM requests WHERE session_id = ? ORDER BY seq")
    for row in store.connection.execute(sql, [session_id]):
        added = len(row[6].split(",")) if row[6] else 0
        yield RequestRow(seq=row[0], created_at=row[1], model=row[2], max_tokens=row[3], messages=row[5] + added,
                         status=row[7], usage=Usage.model_validate_json(row[8]) if row[8] else None,
                         edited=bool(row[9]), warning=row[10], api_edits=orjson.loads(row[11]) if row[11] else [],
                         outcome=row[12])


def proxied_sessions(store: Store) -> list[tuple[str, str | None]]:
    """(id, title) of every proxied session, the newest first."""
    rows = store.connection.execute(
        "SELECT id, title FROM sessions WHERE source_format = 'proxy' ORDER BY created_at DESC, rowid DESC")
    return [(row[0], row[1]) for row in rows]


def last_request_at(store: Store, session_id: str) -> datetime | None:
    """When the session's agent sent its latest request (None: never)."""
    row = store.connection.execute("SELECT max(created_at) FROM requests WHERE session_id = ?", [session_id]).fetchone()
    return datetime.fromisoformat(row[0]) if row and row[0] else None


def activate_pending(store: Store, session_id: str, event_ids: Sequence[str], at: datetime, seq: int) -> None:
    """Queued edits take effect: the proxy found the agent's cache cold at ``at``, for its request ``seq``."""
    with store.transaction():
        store.connection.executemany(
            "UPDATE overlay_events SET data = json_set(data, '$.activated_at', ?, '$.activated_seq', ?) "
            "WHERE id = ? AND session_id = ? AND json_extract(data, '$.activated_at') IS NULL",
            [(at.isoformat(), seq, event_id, session_id) for event_id in event_ids])


def cancel_pending(store: Store, session_id: str, plan_id: str) -> int:
    """Take back a queued edit the proxy has not applied yet (how many of its events were still waiting)."""
    with store.transaction():
        cursor = store.connection.execute(
            "UPDATE overlay_events SET undone = 1 WHERE session_id = ? AND plan_id = ? AND undone = 0 "
            "AND json_extract(data, '$.when') = ? AND json_extract(data, '$.activated_at') IS NULL",
            [session_id, plan_id, PENDING])
        return cursor.rowcount


def same_prompt(store: Store, session_id: str, seq: int) -> bool:
    """Whether request ``seq`` sent the same system prompt and tools as the session's latest request."""
    rows = store.connection.execute(
        "SELECT (SELECT prompt FROM requests WHERE session_id = ? AND seq = ?), "
        "(SELECT prompt FROM requests WHERE session_id = ? ORDER BY seq DESC LIMIT 1)",
        [session_id, seq, session_id]).fetchone()
    return rows is not None and rows[0] is not None and rows[0] == rows[1]


def overlay_mark(store: Store, session_id: str) -> tuple[int, int, int]:
    """What the session's overlay events are now, cheaply: how many, how many undone, the newest."""
    row = store.connection.execute(
        "SELECT count(*), coalesce(sum(undone), 0), coalesce(max(seq), 0) FROM overlay_events WHERE session_id = ?",
        [session_id]).fetchone()
    return int(row[0]), int(row[1]), int(row[2])
