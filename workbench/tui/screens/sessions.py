"""Recent stored sessions, most recently used first: pick one to open (sub-agent sessions under their parent)."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable

from workbench.engine.models import Session

TITLE_WIDTH = 54


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else "—"


def _recency(entry: tuple[Session, int]) -> tuple[float, str]:
    """Most recent first; the id orders sessions used at the same moment."""
    moment = entry[0].updated_at or entry[0].created_at
    return (moment.timestamp() if moment is not None else 0.0, entry[0].id)


class SessionPicker(ModalScreen[str | None]):
    """Dismissed with the session id to open, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open session", id="sessions.open"),
        Binding("escape", "close", "Close", id="sessions.close"),
    ]

    DEFAULT_CSS = """
    SessionPicker {
        align: center middle;
        & > #sessions-box {
            width: 124;
            max-width: 96%;
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
            box.border_subtitle = "Enter opens · Esc closes"
            yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table: DataTable[str] = self.query_one("#sessions-table", DataTable)
        table.add_columns("", "title", "format", "messages", "last used", "id")
        for session, count, depth in self.sessions:
            title = " ".join((session.title or "(untitled)").split())
            title = ("  └ " if depth else "") + title
            if len(title) > TITLE_WIDTH:
                title = title[: TITLE_WIDTH - 1] + "…"
            mark = "●" if session.id == self.current else ""
            table.add_row(mark, title, session.source_format, f"{count:,}",
                          when(session.updated_at or session.created_at), session.id, key=session.id)
        if not self.sessions:
            table.add_row("", "No stored sessions yet.", "", "", "", "")
        table.focus()

    def action_open(self) -> None:
        table = self.query_one("#sessions-table", DataTable)
        if not self.sessions:
            self.dismiss(None)
            return
        session, _, _ = self.sessions[table.cursor_row]
        self.dismiss(session.id)

    def action_close(self) -> None:
        self.dismiss(None)

    def on_data_table_row_selected(self) -> None:
        self.action_open()
