"""A proxied session's edits queued until its agent's cache goes cold: what each changes, and cancelling one.

The list is what the store holds as the screen opens (``workbench queued SESSION`` prints the same); an edit
the proxy has applied meanwhile cannot be cancelled, and the notice says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import DataTable

from workbench.tui.widgets.format import when
from workbench.tui.widgets.table_box import TableBox

if TYPE_CHECKING:
    from workbench.engine.plans.plan import HistoryEntry


class QueuedEditsScreen(ModalScreen[str | None]):
    """Dismissed with the plan id of the edit to cancel (Delete or x), or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("x,delete", "cancel_edit", "Cancel this edit", id="queued.cancel"),
        Binding("escape", "close", "Close", id="queued.close"),
    ]

    DEFAULT_CSS = "QueuedEditsScreen { align: center middle; }"

    def __init__(self, entries: list[HistoryEntry], positions: dict[str, int]) -> None:
        super().__init__()
        self.entries = entries
        self.positions = positions

    def compose(self) -> ComposeResult:
        yield TableBox("Queued edits", "x cancels the selected edit · Esc closes", table_id="queued-table",
                       box_id="queued-box")

    def on_mount(self) -> None:
        table: DataTable[str] = self.query_one("#queued-table", DataTable)
        table.add_columns("#", "queued", "change", "messages", "saves")
        for number, entry in enumerate(self.entries, start=1):
            where = ", ".join(f"#{self.positions[m]}" for m in entry.message_ids if m in self.positions)
            table.add_row(str(number), when(entry.created_at), ", ".join(entry.actions), where or "new message",
                          f"{entry.tokens_saved:,} tokens")
        if not self.entries:
            table.add_row("", "No edit is waiting for the agent's cache to go cold.", "", "", "")
        table.focus()

    def action_cancel_edit(self) -> None:
        if not self.entries:
            self.dismiss(None)
            return
        self.dismiss(self.entries[self.query_one("#queued-table", DataTable).cursor_row].plan_id)

    def action_close(self) -> None:
        self.dismiss(None)
