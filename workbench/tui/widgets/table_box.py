"""A bordered box holding one list with a row cursor, centred in a modal: the compaction history, the queued
edits. One place for their look, so the lists a user opens from the main screen look alike."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable


class TableBox(Vertical):
    DEFAULT_CSS = """
    TableBox {
        width: 100;
        max-width: 96%;
        height: auto;
        max-height: 70%;
        border: round $primary;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        background: $surface;
        & DataTable { height: auto; max-height: 30; }
    }
    """

    def __init__(self, title: str, subtitle: str, *, table_id: str, box_id: str, width: int = 100) -> None:
        super().__init__(id=box_id)
        self.border_title = title
        self.border_subtitle = subtitle
        self.styles.width = width
        self._table_id = table_id

    def compose(self) -> ComposeResult:
        yield DataTable(id=self._table_id, cursor_type="row", zebra_stripes=True)
