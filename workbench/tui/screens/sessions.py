"""Sessions to open: the stored ones, most recently used first (sub-agent sessions under their parent),
then other agents' sessions found on this machine (Claude Code, Codex, OpenCode).

Stored sessions are listed at once; looking for the others touches the disk, so
a worker does it and the rows arrive when it is done. A found file is imported
and opened (Enter) or, for Claude Code and Codex transcripts, followed while
its agent writes it (w). d deletes a stored session, once the user has said yes:
the picker asks the app (the engine thread deletes), and the rows go when it is done.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable

from workbench.engine.sources.discovery import Discovered, Discovery, discover
from workbench.engine.sources.watch import FOLLOWABLE
from workbench.engine.transcript.models import Session
from workbench.tui.screens.confirm import ConfirmScreen
from workbench.tui.widgets.format import when

TITLE_WIDTH = 46
PATH_WIDTH = 34
"""Room for where a found file is (``~/.claude/pro…ec234028f8ca.jsonl``) with every column on screen."""
HEADER = Style(bold=True, color="#7aa2f7")
LOOKING = "On this machine: looking…"
NOTHING_FOUND = "On this machine: no other agents' sessions"


def _recency(entry: tuple[Session, int]) -> tuple[float, str]:
    """Most recent first; the id orders sessions used at the same moment."""
    moment = entry[0].updated_at or entry[0].created_at
    return (moment.timestamp() if moment is not None else 0.0, entry[0].id)


def home_relative(path: str, home: Path | None = None) -> str:
    """``~/…`` for a path under the home directory, so the list shows what tells sessions apart."""
    home = home or Path(os.environ.get("HOME") or Path.home())
    try:
        return "~/" + Path(path).relative_to(home).as_posix()
    except ValueError:
        return path


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _clip_middle(text: str, width: int) -> str:
    """The start (which agent's folder) and the end (the file's name) of a long path."""
    if len(text) <= width:
        return text
    head = (width - 1) * 2 // 5
    return text[:head] + "…" + text[-(width - 1 - head):]


def _heading(text: str) -> Text:
    return Text(text, HEADER, end="")


@dataclass(frozen=True)
class Pick:
    """What the picker was dismissed with: a stored session, or a found file to import or to follow."""

    target: str
    """A stored session id, or the found file's path."""
    kind: Literal["stored", "open", "watch"] = "stored"
    fmt: str | None = None


@dataclass
class DeleteRequested(Message):
    """The user said yes to deleting a stored session: the app asks the engine thread to do it."""

    session_id: str


@dataclass
class DiscoveryDone(Message):
    """The discovery worker's result (posted from its thread)."""

    discovery: Discovery


Entry = tuple[Session, int, int] | Discovered | None
"""What one table row is: a stored session (with its message count and depth), a found file, or a heading."""


class SessionPicker(ModalScreen[Pick | None]):
    """Dismissed with a :class:`Pick`, or None; asks for deletions with :class:`DeleteRequested`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open session (a found file is imported first)", id="sessions.open"),
        Binding("w", "watch", "Watch a found Claude Code / Codex file as it is written", id="sessions.watch"),
        Binding("d", "delete", "Delete a stored session (asks first)", id="sessions.delete"),
        Binding("escape", "close", "Close", id="sessions.close"),
    ]

    DEFAULT_CSS = """
    SessionPicker {
        align: center middle;
        & > #sessions-box {
            width: 96%;
            max-width: 136;
            height: 80%;
            border: round $primary;
            border-title-style: bold;
            border-subtitle-color: $text-muted;
            background: $surface;
        }
    }
    """

    def __init__(self, sessions: list[tuple[Session, int]], current: str | None) -> None:
        super().__init__()
        recent = sorted(sessions, key=_recency, reverse=True)
        self.sessions = self._nested(recent)
        self.current = current
        self.entries: list[Entry] = []
        """One per table row, in order."""
        self.discovered: Discovery | None = None
        """Set once the discovery worker has reported."""
        self._keys: list[str] = []
        """The table's row keys, one per entry."""
        self._added = 0

    @staticmethod
    def _nested(sessions: list[tuple[Session, int]]) -> list[tuple[Session, int, int]]:
        """Parents in the given order, each followed by its sub-agent sessions (depth 1)."""
        children: dict[str, list[tuple[Session, int]]] = {}
        ids = {s.id for s, _ in sessions}
        top: list[tuple[Session, int]] = []
        for session, count in sessions:
            parent = session.metadata.get("parent_session")
            if isinstance(parent, str) and parent in ids:
                children.setdefault(parent, []).append((session, count))
            else:
                top.append((session, count))
        out: list[tuple[Session, int, int]] = []
        for session, count in top:
            out.append((session, count, 0))
            out.extend((child, n, 1) for child, n in children.get(session.id, []))
        return out

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-box") as box:
            box.border_title = "Sessions"
            box.border_subtitle = "Enter opens · w watches a found Claude Code / Codex file · d deletes · Esc closes"
            yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#sessions-table", DataTable)

    def on_mount(self) -> None:
        table = self.table
        table.add_columns("", "title", "format", "messages", "last used", "id")
        for entry in self.sessions:
            session, count, depth = entry
            title = ("  └ " if depth else "") + " ".join((session.title or "(untitled)").split())
            mark = "●" if session.id == self.current else ""
            self._add(entry, mark, _clip(title, TITLE_WIDTH), session.source_format, f"{count:,}",
                      when(session.updated_at or session.created_at), session.id)
        if not self.sessions:
            self._add(None, "", "No stored sessions yet.", "", "", "", "")
        self._add(None, "", _heading(LOOKING), "", "", "", "")
        table.focus()
        self._discover()

    def _add(self, entry: Entry, *cells: str | Text) -> None:
        self.entries.append(entry)
        self._added += 1
        self._keys.append(str(self._added))
        self.table.add_row(*cells, key=self._keys[-1])

    @work(thread=True, exclusive=True, group="discovery", exit_on_error=False)
    def _discover(self) -> None:
        """Look for other agents' sessions off the UI thread (it reads the start of every file)."""
        try:
            found = discover()
        except OSError as exc:
            found = Discovery(notices=[f"could not look for sessions: {exc.strerror or exc}"])
        self.post_message(DiscoveryDone(found))

    @on(DiscoveryDone)
    def _discovered(self, event: DiscoveryDone) -> None:
        self.discovered = event.discovery
        found = event.discovery.sessions
        labels = ("On this machine", "format", "size", "modified", "file") if found else (NOTHING_FOUND,)
        heading = len(self.entries) - 1  # the "looking…" row becomes the section's heading
        for column, label in enumerate(labels, start=1):
            self.table.update_cell_at(Coordinate(heading, column), _heading(label))
        for item in found:
            title = _clip(" ".join((item.title or "(untitled)").split()), TITLE_WIDTH)
            size = size_text(item.size) if item.openable else "export first"
            cells = (title, item.format, size, when(item.modified), _clip_middle(home_relative(item.path), PATH_WIDTH))
            self._add(item, "", *(Text(cell, end="") for cell in cells))  # plain text: titles may hold [brackets]
        for notice in event.discovery.notices[:3]:
            self.notify(notice, severity="warning", timeout=6)

    def _selected(self) -> Entry:
        row = self.table.cursor_row
        return self.entries[row] if 0 <= row < len(self.entries) else None

    def action_open(self) -> None:
        entry = self._selected()
        if isinstance(entry, tuple):
            self.dismiss(Pick(entry[0].id))
        elif isinstance(entry, Discovered):
            if entry.openable:
                self.dismiss(Pick(entry.path, "open", entry.format))
            else:
                self.notify(f"This session must be exported first: {entry.hint}", severity="warning", timeout=10)
        elif not self.sessions and self.table.cursor_row == 0:
            self.dismiss(None)

    def action_watch(self) -> None:
        entry = self._selected()
        if isinstance(entry, Discovered) and entry.format in FOLLOWABLE:
            self.dismiss(Pick(entry.path, "watch", entry.format))
            return
        if isinstance(entry, Discovered) and not entry.openable:
            text = f"This session must be exported first: {entry.hint}"
        elif isinstance(entry, Discovered):
            text = f"Only Claude Code and Codex transcripts can be followed; Enter opens this {entry.format} session."
        else:
            text = "w follows a Claude Code or Codex transcript found on this machine (listed below the stored ones)."
        self.notify(text, severity="warning", timeout=6)

    def action_delete(self) -> None:
        entry = self._selected()
        if not isinstance(entry, tuple):
            self.notify("d deletes a stored session (the list's first part).", severity="warning", timeout=5)
            return
        session, count, _ = entry
        if session.id == self.current:
            self.notify("This session is open: open another one before deleting it.", severity="warning", timeout=5)
            return
        children = [s for s, _, depth in self.sessions if depth and s.metadata.get("parent_session") == session.id]
        title = " ".join((session.title or "(untitled)").split())
        question = f"{title}\n{session.id} · {session.source_format} · {count:,} message{'s' if count != 1 else ''}"
        if children:
            question += f" · {len(children)} sub-agent session{'s' if len(children) != 1 else ''}"
        question += ("\n\nIts messages and steering go with it, and the sub-agent sessions it "
                     "started. This cannot be undone; a transcript file it was imported from stays where it is.")

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(DeleteRequested(session.id))

        self.app.push_screen(ConfirmScreen("Delete this session?", question, "Delete"), answered)

    def forget(self, ids: tuple[str, ...]) -> None:
        """Rows of deleted sessions go (the engine has removed them)."""
        gone = set(ids)
        for index in reversed(range(len(self.entries))):
            entry = self.entries[index]
            if isinstance(entry, tuple) and entry[0].id in gone:
                self.table.remove_row(self._keys[index])
                del self.entries[index], self._keys[index]
        self.sessions = [entry for entry in self.sessions if entry[0].id not in gone]

    def action_close(self) -> None:
        self.dismiss(None)

    def on_data_table_row_selected(self) -> None:
        self.action_open()
