"""Sessions to open: the stored ones, most recently used first (sub-agent sessions and an agent's title calls
under their session), then other agents' sessions found on this machine (Claude Code, Codex, OpenCode).

Each row is two lines: the title over where the agent worked and its own session id (what tells apart four
sessions that began with the same words), the last use over the workbench's id. The title gets what the
other columns leave of the terminal, so at 80 columns no id or date is cut.

Stored sessions are listed at once; looking for the others touches the disk, so
a worker does it and the rows arrive when it is done. A found file is imported
and opened (Enter) or, for Claude Code and Codex transcripts, followed while
its agent writes it (w). d deletes a stored session, once the user has said yes:
the picker asks the app (the engine thread deletes), and the rows go when it is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from workbench.engine.sources.discovery import Discovered, Discovery, discover
from workbench.engine.sources.session_list import ListedSession, home_relative
from workbench.engine.transcript.formats import FOLLOWABLE
from workbench.engine.transcript.sessions import SIDE_ROLES
from workbench.tui.screens.confirm import ConfirmScreen
from workbench.tui.widgets.format import when

BOX_MAX_WIDTH = 136
DATE_WIDTH = len("2026-11-28 16:58")
"""The last use, over the id: the right column is as wide as the longer of the two, never cut."""
COUNT_WIDTH = 8
"""The header ``messages``, wider than any count."""
CHROME = 2 + 2 + 3 * 2
"""The box's border, the table's scroll bar and each column's padding."""
AGENT_ID_WIDTH = 8
"""An agent's session id is a UUID: its first eight characters tell sessions apart (``workbench sessions``
prints it whole)."""
HEADER = Style(bold=True, color="#7aa2f7")
DIM = Style(dim=True)
LOOKING = "On this machine: looking…"
NOTHING_FOUND = "On this machine: no other agents' sessions"


def title_width(terminal_width: int, longest_id: int = 0) -> int:
    """What the title column can have once the others have theirs, in a box 96% of the terminal wide."""
    box = min(BOX_MAX_WIDTH, terminal_width * 96 // 100)
    return max(16, box - CHROME - COUNT_WIDTH - max(DATE_WIDTH, longest_id))


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


Entry = ListedSession | Discovered | None
"""What one table row is: a stored session, a found file, or a heading."""


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
            & > #sessions-table { height: 1fr; }
            & > #sessions-found { height: auto; padding: 0 1; color: $text-muted; }
            height: 80%;
            border: round $primary;
            border-title-style: bold;
            border-subtitle-color: $text-muted;
            background: $surface;
        }
    }
    """

    def __init__(self, sessions: list[ListedSession], current: str | None) -> None:
        super().__init__()
        self.sessions = sessions
        """In the order listed: each session followed by those that belong to it."""
        self.current = current
        self.entries: list[Entry] = []
        """One per table row, in order."""
        self.discovered: Discovery | None = None
        """Set once the discovery worker has reported."""
        self._keys: list[str] = []
        """The table's row keys, one per entry."""
        self._added = 0
        self._width = title_width(BOX_MAX_WIDTH)
        """The title column's width, set for the terminal as the picker mounts."""

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-box") as box:
            box.border_title = "Sessions"
            box.border_subtitle = "Enter opens · w watches a found file · d deletes · Esc closes"  # fits 80 columns
            yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
            yield Static(LOOKING, id="sessions-found", markup=False)

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#sessions-table", DataTable)

    def on_mount(self) -> None:
        self._width = title_width(self.app.size.width, max((len(row.session.id) for row in self.sessions), default=0))
        self.table.add_columns("session", Text("messages", justify="right"), "last used · id")
        for entry in self.sessions:
            self._add(entry, *self._stored_cells(entry))
        if not self.sessions:
            self._add(None, "No stored sessions yet.", "", "", height=1)
        self.table.focus()
        self._discover()

    def _stored_cells(self, entry: ListedSession) -> tuple[Text, Text, Text]:
        session = entry.session
        title = entry.role if entry.role in SIDE_ROLES else " ".join((session.title or "(untitled)").split())
        lead = "● " if session.id == self.current else "  "
        first = _clip(lead + entry.branch + title, self._width)
        agent = entry.agent_session[:AGENT_ID_WIDTH] if entry.agent_session else None
        where = home_relative(entry.directory) if entry.directory else None
        facts = [f for f in (session.source_format, agent) if f]
        second = " · ".join(facts)
        if where:
            room = self._width - 2 - len(second) - 3
            second = _clip_middle(where, max(8, room)) + (" · " + second if second else "")
        cells = Text(first, end="")
        cells.append("\n" + _clip("  " + second, self._width), DIM)
        moment = when(session.updated_at or session.created_at)
        return cells, Text(f"{entry.messages:,}", justify="right", end=""), Text(f"{moment}\n{session.id}", end="")

    def _add(self, entry: Entry, *cells: str | Text, height: int = 2) -> None:
        self.entries.append(entry)
        self._added += 1
        self._keys.append(str(self._added))
        self.table.add_row(*cells, key=self._keys[-1], height=height)

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
        note = self.query_one("#sessions-found", Static)
        note.update(f"On this machine: {len(found):,} other agents' session{'s' if len(found) != 1 else ''} "
                    "(below the stored ones)" if found else NOTHING_FOUND)
        if found:
            self._add(None, _heading("On this machine"), _heading("size"), _heading("modified"), height=1)
        for item in found:
            title = _clip("  " + " ".join((item.title or "(untitled)").split()), self._width)
            kind = item.format if item.openable else f"{item.format} · export first"
            room = self._width - 2 - len(kind) - 3
            where = f"  {kind} · {_clip_middle(home_relative(item.path), max(8, room))}"
            size = size_text(item.size) if item.openable else "—"
            cell = Text(title, end="")  # plain text: titles may hold [brackets]
            cell.append("\n" + where, DIM)
            self._add(item, cell, Text(size, justify="right", end=""), Text(when(item.modified), end=""))
        for notice in event.discovery.notices[:3]:
            self.notify(notice, severity="warning", timeout=6)

    def _selected(self) -> Entry:
        row = self.table.cursor_row
        return self.entries[row] if 0 <= row < len(self.entries) else None

    def action_open(self) -> None:
        entry = self._selected()
        if isinstance(entry, ListedSession):
            self.dismiss(Pick(entry.session.id))
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
        if not isinstance(entry, ListedSession):
            self.notify("d deletes a stored session (the list's first part).", severity="warning", timeout=5)
            return
        session, count = entry.session, entry.messages
        if session.id == self.current:
            self.notify("This session is open: open another one before deleting it.", severity="warning", timeout=5)
            return
        children = [row for row in self.sessions if row.parent == session.id and row.role == "sub-agent"]
        side = [row for row in self.sessions if row.parent == session.id and row.role in SIDE_ROLES]
        title = " ".join((session.title or "(untitled)").split())
        question = f"{title}\n{session.id} · {session.source_format} · {count:,} message{'s' if count != 1 else ''}"
        if children:
            question += f" · {len(children)} sub-agent session{'s' if len(children) != 1 else ''}"
        if side:
            question += f" · {len(side)} title or side call{'s' if len(side) != 1 else ''}"
        question += ("\n\nIts messages and steering go with it, and the sessions listed under it. "
                     "This cannot be undone; a transcript file it was imported from stays where it is.")

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(DeleteRequested(session.id))

        self.app.push_screen(ConfirmScreen("Delete this session?", question, "Delete"), answered)

    def forget(self, ids: tuple[str, ...]) -> None:
        """Rows of deleted sessions go (the engine has removed them)."""
        gone = set(ids)
        for index in reversed(range(len(self.entries))):
            entry = self.entries[index]
            if isinstance(entry, ListedSession) and entry.session.id in gone:
                self.table.remove_row(self._keys[index])
                del self.entries[index], self._keys[index]
        self.sessions = [entry for entry in self.sessions if entry.session.id not in gone]

    def action_close(self) -> None:
        self.dismiss(None)

    def on_data_table_row_selected(self) -> None:
        self.action_open()
