"""The session screen: budget on top, the transcript list and the selected message below.

It starts in a loading state (spinner) and becomes either the session view or
an error message; the app's loading worker decides which by posting a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, LoadingIndicator, Static

from workbench.engine.budget import Budget
from workbench.engine.context import SessionContext
from workbench.engine.projection import ContextView
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.rows import MessageRows

IDLE_STATUS = "idle · read-only"


@dataclass(frozen=True)
class LoadedSession:
    """Everything the screen shows, computed off the UI thread."""

    context: SessionContext
    view: ContextView
    budget: Budget
    rows: MessageRows

    @classmethod
    def compute(cls, context: SessionContext) -> LoadedSession:
        """Projection, budget and the row table: the O(messages) work, for a worker thread."""
        view = context.view()
        budget = context.budget()
        return cls(context, view, budget, MessageRows(context.messages, view, budget.used))


class MainScreen(Screen[None]):
    """One session, read-only for now."""

    AUTO_FOCUS = ""
    """Nothing to focus until the session is loaded (None would inherit the app's "*");
    :meth:`show_session` focuses the list."""

    def __init__(self) -> None:
        super().__init__(classes="-loading")
        self.loaded: LoadedSession | None = None

    def compose(self) -> ComposeResult:
        yield InfoBar(id="info")
        with Vertical(id="status"):
            yield LoadingIndicator(id="spinner")
            yield Static("Loading session…", id="status-text")
        yield BudgetPanel(id="budget")
        with Horizontal(id="body"):
            yield MessageList(id="messages")
            yield MessageDetail(id="detail")
        yield Footer()

    def show_session(self, loaded: LoadedSession) -> None:
        self.loaded = loaded
        ctx, budget = loaded.context, loaded.budget
        info = self.query_one(InfoBar)
        info.title = ctx.session.title or ctx.session.id
        info.model = budget.model
        info.window = budget.context_window
        info.known_model = budget.known_model
        info.status = IDLE_STATUS
        self.query_one(BudgetPanel).budget = budget
        messages = self.query_one(MessageList)
        messages.border_title = f"Transcript · {len(loaded.rows):,} messages · {loaded.rows.in_context:,} in context"
        messages.set_rows(loaded.rows)
        self.remove_class("-loading")
        self.add_class("-loaded")
        messages.focus()

    def show_error(self, message: str, log: Path | None = None) -> None:
        """Replace the spinner with what went wrong; the user can still quit."""
        text = message
        if log is not None:
            text += f"\n\nDetails were written to {log}"
        text += "\n\nPress q to quit."
        status = self.query_one("#status-text", Static)
        status.border_title = "Could not open the session"
        status.update(Text(text))  # plain text: a path or message may contain [brackets]
        self.set_focus(None)
        self.query_one(InfoBar).status = "error"
        self.remove_class("-loading")
        self.add_class("-failed")

    @on(MessageList.Highlighted)
    def _show_selected(self, event: MessageList.Highlighted) -> None:
        calls = self.loaded.rows.tool_calls if self.loaded is not None else {}
        self.query_one(MessageDetail).show(event.row, calls)

    @on(MessageList.DetailRequested)
    def _focus_detail(self) -> None:
        self.query_one(MessageDetail).focus()

    @on(MessageDetail.BackRequested)
    def _focus_list(self) -> None:
        self.query_one(MessageList).focus()
