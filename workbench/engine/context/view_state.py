"""A view builder's state as stored data: a stored session resumes from it instead of replaying its messages.

What a replay of a session's messages leaves in a :class:`ViewBuilder` (each message's item without its
parts, the running totals, compactions, exclusions, the estimator with its requests and calibration)
depends only on the messages, the overlay, the fixed items and the program's version. :func:`capture`
writes it down; :func:`resume` rebuilds the builder from it and the loaded messages (an item's parts are
its message's, as the overlay shows them), exactly as a replay would have left it. The projector and the
estimator each say what their state is (``state()`` / ``restore()``); this module only stores it.
:mod:`transcript.view_states` keeps it current with the session's revision; :func:`state_key` covers the rest.

The per-message part is columns of integers (messages by position, names by number; each column in the
smallest type that holds it) and a few of 64-bit floats (figures), after a JSON header (which also holds the
messages' ids, with their stored order as a column: a resumed open reads no message row,
:meth:`MessageLog.known`): reading it back makes no object per row beyond what the builder and the message
log keep, so resuming a long session does not raise its peak memory above a replay's.
"""

from __future__ import annotations

import hashlib
import sqlite3
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, get_args

import orjson

from workbench.engine.context.item_log import ItemLog, StoredItems
from workbench.engine.context.projection import ContextItem, ViewBuilder
from workbench.engine.context.request_log import Anchorless, RequestEstimate, RequestLog
from workbench.engine.transcript.message_log import MessageLog
from workbench.engine.transcript.models import Message, Session
from workbench.engine.version import program_version

FORMAT = 7
"""Moves on whenever what :func:`capture` writes changes meaning."""

KEEP_FROM = 2_000
"""Sessions of at least this many messages keep their state when a load replays them: below it a replay
is quicker than reading a stored state back."""

NONE = -1
"""A column's None (token counts and names' numbers are never negative)."""

ANCHORLESS: tuple[Anchorless, ...] = get_args(Anchorless)
ANCHORLESS_OR_NONE: tuple[Anchorless | None, ...] = (*ANCHORLESS, None)
"""By a column's number: ``NONE`` (-1) is the last, None."""
KEPT = "kept."
"""The columns kept for the caller (see :func:`capture`) are named ``kept.OWNER.NAME``."""
ITEM_SIZES = {"b": 1, "h": 2, "i": 4, "q": 8, "d": 8}
"""The columns' types, by their typecodes: integers of 1 to 8 bytes, and floats."""
NARROWER = (("b", 1 << 7), ("h", 1 << 15), ("i", 1 << 31))
"""The integer types narrower than 64 bits, smallest first, each with the bound of its values' magnitude."""
ITEM_COLUMNS = ("at", "shape", "tokens", "raw")
REQUEST_COLUMNS = ("at", "model", "reported", "estimated", "anchor", "read", "created", "why")
REQUEST_FIELDS = tuple(field.name for field in fields(RequestEstimate))
"""The request columns hold these fields, in this order."""


class _Names:
    """Strings (or tuples of them) numbered in order of first use."""

    def __init__(self) -> None:
        self.numbers: dict[Any, int] = {}

    def __call__(self, value: Any) -> int:
        return self.numbers.setdefault(value, len(self.numbers))

    def table(self) -> list[Any]:
        return list(self.numbers)


def state_key(session: Session, fixed_items: Sequence[ContextItem]) -> str:
    """A digest of what a builder's state depends on besides the session's messages and overlay."""
    fixed = [[i.kind, i.tokens, dict(i.components), i.raw_tokens, i.deferred_tokens] for i in fixed_items]
    text = orjson.dumps([FORMAT, program_version(), session.model, session.source_format, fixed])
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def positions(ids: Sequence[str]) -> dict[str, int]:
    """Each message's position by its id (``ids``: :func:`message_ids`)."""
    return dict(zip(ids, range(len(ids))))


Columns = Mapping[str, Mapping[str, "array[Any]"]]
"""Columns kept beside a state by their owner, then name: arrays of 8-byte items (``q`` or ``d``)."""


def capture(builder: ViewBuilder, messages: Sequence[Message], kept: Mapping[str, Any] | None = None,
            kept_columns: Columns | None = None) -> bytes | None:
    """The builder's state after a replay of ``messages``; None when it holds what they do not explain (an item
    of another kind, an id of no message: a builder seeded from a compaction checkpoint). ``kept``: what the
    session's context worked out of the same messages besides the builder (JSON-ready), and ``kept_columns``
    its per-message part (columns read back in place: a long session's figures parse slowly from JSON), for
    :func:`resume`."""
    chunks = capture_chunks(builder, messages, kept, kept_columns)
    return None if chunks is None else b"".join(chunks)


def capture_chunks(builder: ViewBuilder, messages: Sequence[Message], kept: Mapping[str, Any] | None = None,
                   kept_columns: Columns | None = None) -> list[bytes | array[Any]] | None:
    """:func:`capture`'s body as the pieces it is joined from, for a caller that writes them one by one.

    It runs when a long session has just loaded whole, at the peak of its memory, so it holds as little
    beside it as it can: one position map, dropped before the header is made, and no copy of a column."""
    ids = message_ids(messages)
    position = positions(ids)
    shapes, models, reasons = _Names(), _Names(), _Names()
    columns: dict[str, array[Any]] = {name: array("q") for name in
                                      ("order", *(f"item_{c}" for c in ITEM_COLUMNS), "values", "excluded_at",
                                       "excluded_why", *(f"request_{c}" for c in REQUEST_COLUMNS))}
    for owner, owned in (kept_columns or {}).items():
        for name, column in owned.items():
            if column.itemsize != 8:
                raise ValueError(f"a kept column holds 8-byte items, not {column.typecode!r} ({owner}.{name})")
            columns[f"{KEPT}{owner}.{name}"] = column
    columns["order"].extend(messages.order() if isinstance(messages, MessageLog) else (m.index for m in messages))
    for item in builder.items:
        at = position.get(item.message_id or "")
        if item.kind != "message" or at is None:
            return None
        names = tuple(item.components)
        row = (at, shapes((names, item.badges)), item.tokens, item.raw_tokens)
        for name, value in zip(ITEM_COLUMNS, row, strict=True):
            columns[f"item_{name}"].append(value)
        columns["values"].extend(item.components.values())
    for message_id, reason in builder.excluded.items():
        at = position.get(message_id)
        if at is None:
            return None
        columns["excluded_at"].append(at)
        columns["excluded_why"].append(reasons(reason))
    for request in builder.estimator.requests:
        at = position.get(request.message_id)
        if at is None:
            return None
        line = (at, models(request.model), request.reported_input_tokens, request.estimated_input_tokens,
               NONE if request.anchor_input_tokens is None else request.anchor_input_tokens,
               request.cache_read_input_tokens, request.cache_creation_input_tokens,
               NONE if request.anchorless is None else ANCHORLESS.index(request.anchorless))
        for name, value in zip(REQUEST_COLUMNS, line, strict=True):
            columns[f"request_{name}"].append(value)
    header = {
        "ids": list(ids),
        "shapes": [[list(names), list(badges)] for names, badges in shapes.table()],
        "models": models.table(),
        "reasons": reasons.table(),
        "builder": builder.state(),
        "kept": kept or {},
    }
    del position
    for name, column in columns.items():
        columns[name] = narrowed(column)  # in place: each wide column is let go as its narrow copy is made
    header["columns"] = {name: len(column) for name, column in columns.items()}
    header["types"] = {name: column.typecode for name, column in columns.items() if column.typecode != "q"}
    head = orjson.dumps(header)
    return [len(head).to_bytes(4, "little"), head, *columns.values()]


def narrowed(column: array[Any]) -> array[Any]:
    """An integer column in the smallest type that holds its values (floats as they are): most of a state's
    numbers are small (names by number, token counts), and a long session's state is then a third of the size,
    read back from the database in a third of the time."""
    if column.typecode != "q" or not column:
        return column
    low, high = min(column), max(column)
    for code, bound in NARROWER:
        if -bound <= low and high < bound:
            return array(code, column)
    return column


class Stored:
    """A stored state read back: its header parsed, its columns read in place (no copy)."""

    def __init__(self, body: bytes) -> None:
        size = int.from_bytes(body[:4], "little")
        self.header: dict[str, Any] = orjson.loads(body[4:4 + size])
        self.columns: dict[str, memoryview[Any]] = {}
        view, start = memoryview(body), 4 + size
        types: dict[str, Any] = self.header["types"]
        for name, length in self.header["columns"].items():
            code = types.get(name, "q")
            end = start + ITEM_SIZES[code] * length
            self.columns[name] = view[start:end].cast(code)
            start = end

    def messages(self, conn: sqlite3.Connection, path: Path, session_id: str) -> MessageLog | None:
        """The session's messages as the state knows them (ids and order), read from the file at ``path`` when
        asked for; None when the store holds other messages than those the state was captured from."""
        ids: list[str] = self.header["ids"]
        return MessageLog.known(conn, path, session_id, ids, self.columns["order"])


def resume(builder: ViewBuilder, state: Stored, messages: Sequence[Message]) -> dict[str, Any] | None:
    """Bring a fresh builder (same session, overlay and fixed items as the captured one) to the captured
    ``state``, and give what :func:`capture` kept beside it; None, leaving it to a replay, when ``messages`` are
    not the ones it was captured from. The items and the requests are made when first read (:class:`ItemLog`,
    :class:`RequestLog`): resuming reads no message."""
    header, columns = state.header, state.columns
    ids = message_ids(messages)
    if ids is not header["ids"] and list(ids) != header["ids"]:  # a log the state made holds the state's ids
        return None
    shapes = [(tuple(names), tuple(badges)) for names, badges in header["shapes"]]
    projector = builder.projector
    stored = StoredItems(messages, ids, columns["item_at"], columns["item_shape"], columns["item_tokens"],
                         columns["item_raw"], columns["values"], shapes, projector.sent_parts, projector.shared)
    reasons = header["reasons"]
    excluded = dict(zip(map(ids.__getitem__, columns["excluded_at"]), map(reasons.__getitem__, columns["excluded_why"]),
                        strict=True))
    requests = RequestLog(stored=_StoredRequests(columns, ids, header["models"]))
    builder.restore(header["builder"], ItemLog(stored), excluded, requests)
    kept_columns: dict[str, dict[str, memoryview[Any]]] = {}
    for name, column in columns.items():
        if name.startswith(KEPT):
            owner, _, field_name = name.removeprefix(KEPT).partition(".")
            kept_columns.setdefault(owner, {})[field_name] = column
    kept: dict[str, Any] = {**header["kept"], "columns": kept_columns}
    return kept


class _StoredRequests:
    """A stored state's requests: their columns, each row made into a :class:`RequestEstimate` when read."""

    def __init__(self, columns: Mapping[str, memoryview], ids: Sequence[str], models: Sequence[str | None]) -> None:
        self._columns = [columns[f"request_{name}"] for name in REQUEST_COLUMNS]
        """In :class:`RequestEstimate`'s field order."""
        self._ids, self._models = ids, models

    def __len__(self) -> int:
        return len(self._columns[0])

    def request(self, index: int) -> RequestEstimate:
        at, model, reported, estimated, anchor, read, created, why = (column[index] for column in self._columns)
        return RequestEstimate(self._ids[at], self._models[model], reported, estimated,
                               None if anchor == NONE else anchor, read, created, ANCHORLESS_OR_NONE[why])

    def positions(self) -> list[int]:
        at: list[int] = self._columns[0].tolist()  # REQUEST_COLUMNS' first
        return at

    def field(self, name: str) -> list[Any]:
        position = REQUEST_FIELDS.index(name)
        values: list[Any] = self._columns[position].tolist()
        if name == "message_id":
            return list(map(self._ids.__getitem__, values))
        if name == "model":
            return list(map(self._models.__getitem__, values))
        if name == "anchor_input_tokens":
            return [None if value == NONE else value for value in values]
        if name == "anchorless":
            return list(map(ANCHORLESS_OR_NONE.__getitem__, values))
        return values


def message_ids(messages: Sequence[Message]) -> Sequence[str]:
    """Every message's id by position; a :class:`MessageLog` has them without reading its messages."""
    return messages.ids if isinstance(messages, MessageLog) else [message.id for message in messages]
