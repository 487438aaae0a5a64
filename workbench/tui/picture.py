"""The picture of a long session: what the main screen shows of it, stored to show again before it loads.

Opening a stored 50,000-message session takes seconds of Python work on the engine thread (reading,
then replaying every message through the projection). What the screen shows first is small: the
title, the budget, the timeline and a screenful of list rows. So after a long session is loaded the
engine thread stores a picture of it (:func:`save`): the budget and the timeline as JSON, and per message
its id, role, tokens in context, badges, why it is out of context and a one-line preview. The next
time, the screen draws the picture at once (:func:`load`) while the session loads behind it; the
loaded screen_state then takes its place.

Per-message columns are kept compact, since a picture is held while the session itself loads:
numbers as arrays, ids and previews as zlib-compressed chunks of :data:`CHUNK_ROWS` rows, unpacked
only when the list paints them. A picture is current while the session's revision has not moved
(:mod:`workbench.engine.transcript.pictures`) and its key matches: the settings the budget depends on, this
format's version, and the session's own fields.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import orjson
from pydantic import ValidationError

from workbench.engine.context.budget import Budget
from workbench.engine.context.effective import effective_parts, preview_text
from workbench.engine.context.session import SessionContext
from workbench.engine.context.view import ContextItem
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Session
from workbench.engine.transcript.overlay import fold
from workbench.engine.transcript.pictures import StoredPicture, load_picture, save_picture, session_revision
from workbench.engine.transcript.store import Store
from workbench.engine.version import program_version
from workbench.tui.screen_state import ScreenState, find_subagents
from workbench.tui.timeline_series import Drop, TimelineData
from workbench.tui.widgets.row_lookups import CallRef
from workbench.tui.widgets.rows import Row, RowMarks

PICTURE_VERSION = 1
CHUNK_ROWS = 512
PREVIEW_CHARS = 200
"""Wider than the list's preview column on a terminal up to about 430 columns."""
PICTURE_MIN_MESSAGES = 2_000
"""Shorter sessions load in a fraction of a second: a picture would not be seen."""
NOT_IN_CONTEXT = -1
CALL_LOOKBACK = 8
"""How many messages before a tool result the detail pane looks for its call while the session loads (the
loaded session knows every call; the call is almost always the message just before)."""
_HEAD = struct.Struct("<I")
_CACHED_CHUNKS = 8


class PictureDamaged(ValueError):
    """A stored picture that cannot be read (another version's, or a damaged row)."""


def picture_key(session: Session, config: Config) -> str:
    """What a picture depends on besides the session's revision."""
    parts = [
        str(PICTURE_VERSION), program_version(), sys.byteorder,
        config.budget.model_dump_json(),
        orjson.dumps({name: limits.model_dump() for name, limits in config.models.items()}).decode(),
        orjson.dumps([session.title, session.model, session.context_window, session.source_format]).decode(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class PictureRow(RowMarks):
    """One message as the list draws it: the same attributes the list reads from a loaded row."""

    position: int
    message_id: str
    role: str
    tokens: int | None
    share: float | None
    badges: tuple[str, ...]
    excluded: str | None
    preview_line: str
    subagent_peak: int | None = None

    def preview(self, width: int) -> str:
        return self.preview_line[:width]


class PictureRows:
    """The list's rows from a picture: numbers held as arrays, ids and previews unpacked per chunk."""

    def __init__(
        self,
        tokens: array[int],
        roles: array[int],
        marks: array[int],
        role_names: list[str],
        mark_table: list[tuple[tuple[str, ...], str | None]],
        chunks: tuple[bytes, ...],
        used: int,
    ) -> None:
        self._tokens = tokens
        self._roles = roles
        self._marks = marks
        self._role_names = role_names
        self._mark_table = mark_table
        self._chunks = chunks
        self._used = used
        self._unpacked: OrderedDict[int, tuple[list[str], list[str]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tokens)

    @cached_property
    def in_context(self) -> int:
        return len(self._tokens) - self._tokens.count(NOT_IN_CONTEXT)

    def _chunk(self, number: int) -> tuple[list[str], list[str]]:
        found = self._unpacked.get(number)
        if found is None:
            ids, previews = orjson.loads(zlib.decompress(self._chunks[number]))
            found = self._unpacked[number] = (ids, previews)
            if len(self._unpacked) > _CACHED_CHUNKS:
                self._unpacked.popitem(last=False)
        else:
            self._unpacked.move_to_end(number)
        return found

    def message_id(self, index: int) -> str:
        return self._chunk(index // CHUNK_ROWS)[0][index % CHUNK_ROWS]

    def tokens(self, index: int) -> int:
        """Tokens in context; -1 when the message is not in context."""
        return self._tokens[index]

    def badges(self, index: int) -> tuple[str, ...]:
        return self._mark_table[self._marks[index]][0]

    def row(self, index: int) -> PictureRow:
        ids, previews = self._chunk(index // CHUNK_ROWS)
        tokens = self._tokens[index]
        badges, excluded = self._mark_table[self._marks[index]]
        in_context = tokens != NOT_IN_CONTEXT
        share = 100.0 * tokens / self._used if in_context and self._used else None
        return PictureRow(index + 1, ids[index % CHUNK_ROWS], self._role_names[self._roles[index]],
                          tokens if in_context else None, share, badges, excluded, previews[index % CHUNK_ROWS])

    def index_of(self, message_id: str) -> int | None:
        for number in range(len(self._chunks)):
            ids = self._chunk(number)[0]
            if message_id in ids:
                return number * CHUNK_ROWS + ids.index(message_id)
        return None


@dataclass(frozen=True)
class Picture:
    """A session as it was last shown: enough for a first frame, not for changing anything."""

    session: Session
    revision: int
    budget: Budget
    timeline: TimelineData
    rows: PictureRows
    undoable: int = 0
    redoable: bool = False
    subagents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.session.title or self.session.id

    def matches(self, screen_state: ScreenState) -> bool:
        """Whether the loaded session shows what this picture showed (the figures a stale picture gets wrong)."""
        return (self.budget == screen_state.budget and len(self.rows) == len(screen_state.rows)
                and self.rows.in_context == screen_state.rows.in_context and self.undoable == screen_state.undoable)


# --- making and reading ---------------------------------------------------------------------------------


def _encode(screen_state: ScreenState) -> tuple[bytes, Iterator[bytes]]:
    rows = screen_state.rows
    count = len(rows)
    tokens = array("i", bytes(4 * count))
    roles = array("B", bytes(count))
    marks = array("I", bytes(4 * count))
    role_codes: dict[str, int] = {}
    mark_codes: dict[tuple[tuple[str, ...], str | None], int] = {}
    for index in range(count):
        row = rows.row(index)
        tokens[index] = NOT_IN_CONTEXT if row.tokens is None else row.tokens
        roles[index] = role_codes.setdefault(row.role, len(role_codes))
        marks[index] = mark_codes.setdefault((row.badges, row.excluded), len(mark_codes))
    header = orjson.dumps({
        "version": PICTURE_VERSION,
        "count": count,
        "budget": screen_state.budget.model_dump(mode="json"),
        "timeline": asdict(screen_state.timeline),
        "undoable": screen_state.undoable,
        "redoable": screen_state.redoable,
        "subagents": screen_state.subagents,
        "roles": list(role_codes),
        "marks": [[list(badges), excluded] for badges, excluded in mark_codes],
    })
    body = _HEAD.pack(len(header)) + header + tokens.tobytes() + roles.tobytes() + marks.tobytes()

    def chunks() -> Iterator[bytes]:
        for start in range(0, count, CHUNK_ROWS):
            stop = min(count, start + CHUNK_ROWS)
            messages = rows.messages[start:stop]
            ids = [m.id for m in messages]
            previews = [preview_text(m.parts, PREVIEW_CHARS) for m in messages]
            yield zlib.compress(orjson.dumps([ids, previews]), 1)

    return body, chunks()


def _decode(stored: StoredPicture, session: Session) -> Picture:
    try:
        (length,) = _HEAD.unpack_from(stored.header)
        head: dict[str, Any] = orjson.loads(stored.header[_HEAD.size:_HEAD.size + length])
        count = int(head["count"])
        columns = memoryview(stored.header)[_HEAD.size + length:]
        tokens, roles, marks = array("i"), array("B"), array("I")
        tokens.frombytes(columns[:4 * count])
        roles.frombytes(columns[4 * count:5 * count])
        marks.frombytes(columns[5 * count:9 * count])
        budget = Budget.model_validate(head["budget"])
        timeline = head["timeline"]
        data = TimelineData(
            reported=tuple(timeline["reported"]), estimated=tuple(timeline["estimated"]),
            drops=tuple(Drop(**drop) for drop in timeline["drops"]), next_estimate=timeline["next_estimate"],
            warn_at=timeline["warn_at"], compact_at=timeline["compact_at"],
            cost=str(timeline.get("cost", "")), last_cost=str(timeline.get("last_cost", "")),
        )
        mark_table = [(tuple(badges), excluded) for badges, excluded in head["marks"]]
        role_names = [str(name) for name in head["roles"]]
        complete = (head["version"] == PICTURE_VERSION and len(tokens) == len(roles) == len(marks) == count
                    and len(stored.chunks) == -(-count // CHUNK_ROWS))
        if not complete or (count and (max(marks) >= len(mark_table) or max(roles) >= len(role_names))):
            raise PictureDamaged(f"the picture of {stored.session_id} does not add up")
        rows = PictureRows(tokens, roles, marks, role_names, mark_table, stored.chunks, budget.used)
        subagents = {str(k): tuple(v) for k, v in head["subagents"].items()}
        return Picture(session, stored.revision, budget, data, rows, int(head["undoable"]),
                       bool(head["redoable"]), subagents)
    except (KeyError, TypeError, ValueError, struct.error, orjson.JSONDecodeError, ValidationError) as exc:
        raise PictureDamaged(f"the picture of {stored.session_id} cannot be read: {exc}") from exc


def load(store: Store, session: Session, config: Config) -> Picture | None:
    """The session's current picture, or None: none yet, stale, or damaged (the next save replaces it)."""
    stored = load_picture(store, session.id, picture_key(session, config))
    if stored is None:
        return None
    try:
        picture = _decode(stored, session)
        if len(picture.rows):
            picture.rows.row(0)  # unpacks the first chunk, which the first frame needs: damage shows here
    except (ValueError, zlib.error, IndexError):
        return None
    return picture


def peek(store: Store, session_id: str, row: PictureRow, ids: Sequence[str]) -> tuple[Row, dict[str, CallRef]] | None:
    """One message of a pictured session as the detail pane shows it, read from the store while the session
    loads. ``ids``: the messages from up to :data:`CALL_LOOKBACK` before it to it (``row``'s last), where a
    tool result's call is looked for. None when the message is not stored (any more)."""
    loaded = {message.id: message for message in store.load_messages(session_id, ids)}
    message = loaded.get(row.message_id)
    if message is None:
        return None
    item = None
    if row.tokens is not None:
        overlay = fold(store.load_overlay(session_id))
        item = ContextItem(kind="message", tokens=row.tokens, components={}, message_id=message.id,
                           index=message.index, role=message.role, badges=row.badges,
                           parts=tuple(effective_parts(overlay, message)))
    first = row.position - len(ids) + 1
    calls = {
        part.id: CallRef(part.name, first + offset, part.input)
        for offset, message_id in enumerate(ids)
        if (found := loaded.get(message_id)) is not None and found.role == "assistant"
        for part in found.tool_uses()
    }
    return Row(row.position, message, item, row.excluded, row.share), calls


def agrees(store: Store, ctx: SessionContext) -> bool:
    """Whether the stored session holds what ``ctx`` holds (no other program wrote to it meanwhile), as far
    as counting its messages, overlay changes and undone changes tells."""
    events = store.db.execute(
        "SELECT COUNT(*), COALESCE(SUM(undone), 0) FROM overlay_events WHERE session_id = ?", [ctx.session.id]
    ).fetchone()
    undone = sum(1 for event in ctx.events if event.undone)
    return store.message_count(ctx.session.id) == len(ctx.messages) and tuple(events) == (len(ctx.events), undone)


def save(store: Store, screen_state: ScreenState, revision: int, config: Config) -> bool:
    """Store ``screen_state``'s picture as the session's at ``revision`` (False: the session moved on since)."""
    header, chunks = _encode(screen_state)
    return save_picture(store, screen_state.session.id, revision, picture_key(screen_state.session, config), header, chunks)


def refresh(store: Store, session_id: str, config: Config) -> bool:
    """Load a stored session and store its picture as the workbench would show it read-only (``workbench
    import`` does this for a long transcript, so that even its first opening is quick)."""
    revision = session_revision(store, session_id)
    ctx = SessionContext.load(store, session_id, config)
    return save(store, ScreenState.compute(ctx, subagents=find_subagents(store, session_id)), revision, config)
