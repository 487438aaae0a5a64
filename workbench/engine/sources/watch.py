"""Following a JSONL transcript another agent is still writing (Claude Code, Codex).

:class:`TranscriptFollower` keeps the importer's reader and the byte offset of
the last complete line: :meth:`~TranscriptFollower.poll` reads only what was
appended since, feeds complete lines to the same reader the importer uses, and
returns the messages that are new or changed. It never blocks and never raises
for bad content (bad lines are listed in ``skipped``; only a file that is not a
Claude Code or Codex transcript raises :class:`ImportFailed`, on the first poll
that reads a line), so a Textual worker can call it on a timer:

    follower = TranscriptFollower(path)
    update = follower.poll()          # FollowUpdate: new, changed, events, notices

A half-written last line is left for the next poll. A file that shrank or was
replaced (another inode) is read again from the start, with a notice and
``reset=True``. :class:`LiveSession` adds a :class:`SessionContext` on top, so
each poll also gives the budget.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workbench.engine.context.budget import Budget
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ImportFailed
from workbench.engine.settings.config import Config
from workbench.engine.transcript.importers import claude_code, detect_format
from workbench.engine.transcript.importers.codex import CodexReader
from workbench.engine.transcript.importers.reading import MAX_LINE_BYTES, ParsedTranscript, SkippedLine, load_json
from workbench.engine.transcript.models import Message, Session
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.tokens import TokenCounter

CHUNK_BYTES = MAX_LINE_BYTES + 1
"""At most this much is read per poll; ``FollowUpdate.more`` says when there is more waiting."""


class LineReader(Protocol):
    def feed(self, number: int, text: str) -> None: ...

    def result(self) -> ParsedTranscript: ...


class _ClaudeLines:
    """The Claude Code importer's reader, fed one line at a time (as its ``read`` does)."""

    def __init__(self, path: Path) -> None:
        self._reader = claude_code.Reader(path)

    def feed(self, number: int, text: str) -> None:
        self._reader.feed(number, text)

    def result(self) -> ParsedTranscript:
        return self._reader.result()


def _line_format(text: str) -> str | None:
    """The format of one complete line, when it says so by itself."""
    record, problem = load_json(text)
    if problem is not None:
        return None
    if isinstance(record, dict) and {"timestamp", "type", "payload"} <= record.keys():
        return "codex"
    return "claude-code" if claude_code.looks_like(record) else None


def line_reader(path: Path, format_name: str) -> LineReader:
    if format_name == "claude-code":
        return _ClaudeLines(path)
    if format_name == "codex":
        return CodexReader(path)
    raise ImportFailed(
        f"{path}: only JSONL transcripts (Claude Code, Codex) can be followed; "
        f"this {format_name} file is one JSON document: import it again to refresh it"
    )


@dataclass
class FollowUpdate:
    """What one poll found. ``reset`` means: forget what you had, these are all the messages."""

    new: list[Message] = field(default_factory=list)
    changed: list[Message] = field(default_factory=list)
    """Messages seen before whose content grew (Claude Code writes one response over several lines)."""
    events: list[OverlayEvent] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    reset: bool = False
    more: bool = False
    """More bytes are waiting than one poll reads: poll again straight away."""
    session: Session | None = None

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.events or self.skipped or self.notices or self.reset)


class TranscriptFollower:
    def __init__(self, path: Path, format_name: str | None = None) -> None:
        self.path = Path(path)
        self.format_name = format_name
        self._restart()

    def _restart(self) -> None:
        self._reader: LineReader | None = None
        self._offset = 0
        self._line = 0
        self._inode: int | None = None
        self._discarding = False
        self._known: dict[str, Message] = {}
        self._events_seen = 0
        self._skipped_seen = 0
        self._own_skipped: list[SkippedLine] = []
        """Lines the follower itself could not use (not UTF-8, too long); the reader lists the rest."""
        self._own_seen = 0
        self._result: ParsedTranscript | None = None

    # --- state ------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """Bytes read so far: everything before it was complete lines."""
        return self._offset

    @property
    def messages(self) -> list[Message]:
        return list(self._result.messages) if self._result else []

    @property
    def events(self) -> list[OverlayEvent]:
        return list(self._result.events) if self._result else []

    @property
    def session(self) -> Session | None:
        return self._result.session if self._result else None

    # --- polling ----------------------------------------------------------------

    def poll(self, *, final: bool = False) -> FollowUpdate:
        """Read what was appended since the last poll. ``final``: a last line without newline counts."""
        update = FollowUpdate()
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            update.notices.append(f"{self.path} does not exist (yet); waiting for it")
            return update
        except OSError as exc:
            update.notices.append(f"cannot read {self.path}: {exc.strerror or exc}")
            return update
        if self._inode is not None and (stat.st_ino != self._inode or stat.st_size < self._offset):
            what = "replaced by another file" if stat.st_ino != self._inode else "truncated"
            update.notices.append(f"{self.path} was {what}; reading it again from the start")
            self._restart()
            update.reset = True
        self._inode = stat.st_ino
        if stat.st_size > self._offset:
            try:
                self._read(update, final)
            except OSError as exc:
                update.notices.append(f"cannot read {self.path}: {exc.strerror or exc}")
                return update
        self._collect(update)
        return update

    def _read(self, update: FollowUpdate, final: bool) -> None:
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read(CHUNK_BYTES)
        update.more = len(data) == CHUNK_BYTES
        cut = data.rfind(b"\n")
        if cut < 0 and not final:
            if len(data) > MAX_LINE_BYTES:  # a runaway line: skip it, as the importer does
                self._discarding = True
                self._offset += len(data)
            return
        complete = data if (final and not update.more) else data[: cut + 1]
        self._offset += len(complete)
        lines = complete.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for raw in lines:
            if self._discarding:
                self._discarding = False
                self._line += 1
                self._skip(f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB")
                continue
            self._line += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self._skip("not valid UTF-8")
                continue
            if text.strip():
                self._feed(text)

    def _ensure_reader(self, first_line: str) -> LineReader:
        if self._reader is None:
            fmt = self.format_name or _line_format(first_line) or detect_format(self.path)
            self.format_name = fmt
            self._reader = line_reader(self.path, fmt)
        return self._reader

    def _feed(self, text: str) -> None:
        self._ensure_reader(text).feed(self._line, text)

    def _skip(self, reason: str) -> None:
        self._own_skipped.append(SkippedLine(line=self._line, reason=reason))

    def _collect(self, update: FollowUpdate) -> None:
        if self._reader is None:
            update.skipped = self._own_skipped[self._own_seen:]
            self._own_seen = len(self._own_skipped)
            return
        result = self._reader.result()
        self._result = result
        update.session = result.session
        for message in result.messages:
            known = self._known.get(message.id)
            if known is None:
                update.new.append(message)
            elif known is not message:
                update.changed.append(message)
            self._known[message.id] = message
        update.events = list(result.events[self._events_seen:])
        self._events_seen = len(result.events)
        update.skipped = sorted([*result.skipped_lines[self._skipped_seen:], *self._own_skipped[self._own_seen:]],
                                key=lambda s: s.line)
        self._skipped_seen = len(result.skipped_lines)
        self._own_seen = len(self._own_skipped)


@dataclass
class LiveUpdate:
    follow: FollowUpdate
    budget: Budget | None


class LiveSession:
    """A follower plus the session's context, kept current: each poll also gives the budget."""

    def __init__(self, path: Path, format_name: str | None = None, config: Config | None = None,
                 counter: TokenCounter | None = None) -> None:
        self.follower = TranscriptFollower(path, format_name)
        self.config = config or Config()
        self.counter = counter or TokenCounter()
        self.ctx: SessionContext | None = None

    def poll(self, *, final: bool = False) -> LiveUpdate:
        update = self.follower.poll(final=final)
        session = self.follower.session
        if session is None:
            return LiveUpdate(update, None)
        if self.ctx is None or update.reset or update.changed:
            # A message that grew changes counts already in the view: rebuild (token counts are cached).
            self.ctx = SessionContext(session, self.follower.messages, self.follower.events, self.counter, self.config)
        else:
            self.ctx.session = session
            for message in update.new:
                self.ctx.append(message)
            if update.events:
                self.ctx.apply_events(update.events)
        return LiveUpdate(update, self.ctx.budget())


def update_json(live: LiveUpdate) -> dict[str, Any]:
    """One line of ``workbench watch --json``."""
    follow = live.follow
    out: dict[str, Any] = {
        "new": [m.id for m in follow.new],
        "changed": [m.id for m in follow.changed],
        "reset": follow.reset,
        "notices": follow.notices,
        "skipped_lines": [s.model_dump() for s in follow.skipped],
    }
    if follow.session is not None:
        out["session_id"] = follow.session.id
    if live.budget is not None:
        b = live.budget
        out["budget"] = {"used": b.used, "percent": b.percent, "level": b.level, "source": b.source,
                         "steered": b.steered, "context_window": b.context_window, "free": b.free}
    return out
