"""What a proxied agent was sent, by budget component: pick a component, then an entry, and read its text.

The budget's legend says how much each component takes; this lists what makes it up (the system prompt's
blocks, each memory file, each tool definition with built-in and MCP tools apart, each system reminder),
read from the session's latest stored request by the engine (``context.breakdown``) on a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from workbench.engine.context.breakdown import DRILLED, Breakdown, Entry, breakdown
from workbench.engine.context.budget import COMPONENT_LABELS
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.store import Store
from workbench.tui.widgets.sent_text import SentText

TOOL_COMPONENTS = ("tools", "tools_mcp")
GROUP = Style(bold=True, color="#7aa2f7")


Row = Entry | tuple[str, int]
"""A table row: an entry, or a group's heading (its label and tokens)."""


def shown_rows(found: Breakdown, component: str) -> list[Row]:
    """A component's rows: its entries; for the tool definitions, built-in tools then MCP tools, each group
    under a heading with its count and tokens."""
    if component != "tools":
        return list(found.of(component))
    rows: list[Row] = []
    for name, label in (("tools", "Built-in tools"), ("tools_mcp", "MCP tools")):
        entries = found.of(name)
        rows.append((f"{label} ({len(entries)})", sum(entry.tokens for entry in entries)))
        rows.extend(entries)
    return rows


class BreakdownScreen(ModalScreen[None]):
    """Components on the left, the chosen one's entries on the right, the highlighted entry's text below."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="breakdown.close"),
        Binding("enter", "read", "Entries / read the entry's text", id="breakdown.read", show=False),
    ]

    DEFAULT_CSS = """
    BreakdownScreen {
        align: center middle;
        & > #breakdown-box {
            width: 96%;
            height: 92%;
            border: round $primary;
            border-title-style: bold;
            border-subtitle-color: $text-muted;
            background: $surface;
        }
        & #breakdown-components { width: 34; height: 1fr; border: round $primary 40%; }
        & #breakdown-components:focus { border: round $primary; }
        & #breakdown-right { width: 1fr; }
        & #breakdown-entries { height: 1fr; }
        & #breakdown-status { color: $text-muted; padding: 0 1; height: auto; }
    }
    """

    @dataclass
    class Loaded(Message):
        found: Breakdown

    @dataclass
    class Failed(Message):
        text: str

    def __init__(self, db: Path, session_id: str, component: str = "system") -> None:
        super().__init__()
        self.db, self.session_id, self.component = db, session_id, component
        self.found: Breakdown | None = None
        self.rows: list[Row] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="breakdown-box") as box:
            box.border_title = "What the agent was sent"
            box.border_subtitle = "↑↓ choose · Tab moves between panes · Enter reads the entry · Esc closes"
            yield Static("Reading the session's latest request…", id="breakdown-status")
            with Horizontal():
                yield OptionList(id="breakdown-components")
                with Vertical(id="breakdown-right"):
                    yield DataTable(id="breakdown-entries", cursor_type="row", zebra_stripes=True)
                    yield SentText(id="breakdown-text")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="breakdown", exit_on_error=False)
    def load(self) -> None:
        try:
            with Store(self.db, checked=True) as store:
                self.post_message(self.Loaded(breakdown(store, self.session_id)))
        except WorkbenchError as exc:
            self.post_message(self.Failed(str(exc)))

    @on(Loaded)
    def loaded(self, event: Loaded) -> None:
        found = self.found = event.found
        totals = found.totals()
        self.query_one("#breakdown-box").border_title = (f"What the agent was sent · request #{found.seq} · "
                                                         f"{found.model or '?'}")
        status = self.query_one("#breakdown-status", Static)
        status.update(f"{self.session_id}: estimated tokens (tiktoken), before the budget calibrates them")
        components = self.query_one("#breakdown-components", OptionList)
        components.add_options([Option(f"{COMPONENT_LABELS[name]:<18}{totals[name]:>8,}", id=name) for name in DRILLED])
        components.highlighted = DRILLED.index(self.component) if self.component in DRILLED else 0
        components.focus()

    @on(Failed)
    def failed(self, event: Failed) -> None:
        self.query_one("#breakdown-status", Static).update(event.text)

    @on(OptionList.OptionHighlighted, "#breakdown-components")
    def component_chosen(self, event: OptionList.OptionHighlighted) -> None:
        if self.found is None or event.option.id is None:
            return
        self.component = event.option.id
        self.rows = shown_rows(self.found, self.component)
        table: DataTable[str | Text] = self.query_one("#breakdown-entries", DataTable)
        table.clear(columns=True)  # the columns fit each component's own names
        table.add_columns("#", "name", "tokens", "kind", "where")
        number = 0  # from 1 in each group, as ``workbench components SESSION tools|mcp N`` counts
        for row in self.rows:
            if isinstance(row, Entry):
                number += 1
                kind = ("MCP" if row.component == "tools_mcp" else "built-in") if row.component in TOOL_COMPONENTS \
                    else COMPONENT_LABELS[row.component]
                table.add_row(Text(str(number), justify="right"), row.name, Text(f"{row.tokens:,}", justify="right"),
                              kind, row.where)
            else:
                number = 0
                table.add_row("", Text(row[0], style=GROUP), Text(f"{row[1]:,}", style=GROUP, justify="right"), "", "")
        if not self.rows:
            label = COMPONENT_LABELS[self.component]
            self.query_one(SentText).show(label, f"Request #{self.found.seq} sent no {label.lower()}.")
        else:
            self._show(0)

    @on(OptionList.OptionSelected, "#breakdown-components")
    def component_selected(self) -> None:
        self.query_one("#breakdown-entries", DataTable).focus()

    @on(DataTable.RowHighlighted, "#breakdown-entries")
    def entry_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    @on(DataTable.RowSelected, "#breakdown-entries")
    def entry_selected(self) -> None:
        self.query_one(SentText).focus()

    def _show(self, index: int) -> None:
        if not 0 <= index < len(self.rows):
            return
        row = self.rows[index]
        if isinstance(row, Entry):
            self.query_one(SentText).show(f"{row.name} · {row.tokens:,} tokens · {row.where}", row.text)
        else:
            self.query_one(SentText).show(row[0], f"{row[0]}: {row[1]:,} tokens. Move down to read each definition.")

    def action_read(self) -> None:
        focused = self.focused
        if isinstance(focused, OptionList):
            self.query_one("#breakdown-entries", DataTable).focus()
        else:
            self.query_one(SentText).focus()

    @on(Worker.StateChanged)
    def worker_failed(self, event: Worker.StateChanged) -> None:
        """What the worker did not expect (a database error) is said here, not lost with the worker."""
        if event.state == WorkerState.ERROR:
            self.query_one("#breakdown-status", Static).update(f"Reading the requests failed: {event.worker.error}")

    def action_close(self) -> None:
        self.dismiss(None)
