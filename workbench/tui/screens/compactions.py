"""Every compaction of the session, applied or undone: when, why, who summarised, tokens before → after."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import DataTable

from workbench.tui.widgets.format import when
from workbench.tui.widgets.table_box import TableBox

if TYPE_CHECKING:
    from workbench.engine.plans.compaction_history import CompactionEntry


NOT_RECORDED = "not recorded"
"""A figure the transcript does not give (Claude Code records the tokens before a compaction, not after)."""


def _tokens(value: int | None) -> str:
    return f"{value:,}" if value is not None else NOT_RECORDED


class CompactionHistoryScreen(ModalScreen[str | None]):
    """Dismissed with the summary message id to jump to (Enter), or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "show", "Go to its summary", id="compactions.show"),
        Binding("escape", "close", "Close", id="compactions.close"),
    ]

    DEFAULT_CSS = "CompactionHistoryScreen { align: center middle; }"

    def __init__(self, entries: list[CompactionEntry], positions: dict[str, int]) -> None:
        super().__init__()
        self.entries = entries
        self.positions = positions

    def compose(self) -> ComposeResult:
        yield TableBox("Compaction history",
                       "Enter goes to the summary · Esc closes · u on the main screen undoes the latest",
                       table_id="compactions-table", box_id="compactions-box", width=120)

    def on_mount(self) -> None:
        table: DataTable[str] = self.query_one("#compactions-table", DataTable)
        table.add_columns("when", "trigger", "summariser", "before", "after", "summarised", "summary", "state")
        for entry in self.entries:
            where = self.positions.get(entry.summary_id or "")
            table.add_row(
                when(entry.created_at) if entry.created_at else NOT_RECORDED, entry.trigger, entry.summarizer, _tokens(entry.before_tokens),
                _tokens(entry.after_tokens), _tokens(entry.summarized), f"#{where}" if where else "—",
                "undone" if entry.undone else "applied",
            )
        if not self.entries:
            table.add_row("No compaction in this session yet (c previews one).", "", "", "", "", "", "", "")
        table.focus()

    def action_show(self) -> None:
        if not self.entries:
            self.dismiss(None)
            return
        entry = self.entries[self.query_one("#compactions-table", DataTable).cursor_row]
        self.dismiss(entry.summary_id)

    def action_close(self) -> None:
        self.dismiss(None)

    def on_data_table_row_selected(self) -> None:
        self.action_show()
