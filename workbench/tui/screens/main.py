"""The session screen: header, budget and timeline on top, the transcript list and the selected message
(or the compaction pane) below, the live agent and its input at the bottom.

It starts in a loading state (spinner) and becomes either the session view or
an error message. It shows what the app hands it (snapshots made on the engine
thread); the steering keys here ask the app to run them on the engine thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.lazy import Lazy
from textual.message import Message
from textual.widgets import Footer, LoadingIndicator, Static

from workbench.tui.messages import LiveState
from workbench.tui.screens.main_keys import MainKeys
from workbench.tui.snapshot import SessionSnapshot
from workbench.tui.widgets.agent_input import AgentInput
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.filter_bar import FilterBar
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.live_stream import LiveStream
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.row_filter import RowQuery, apply_query
from workbench.tui.widgets.rows import MessageRows
from workbench.tui.widgets.timeline import Timeline


@dataclass
class Filtered(Message):
    """The filter worker's result."""

    rows: MessageRows
    order: list[int] | None
    query: RowQuery
    keep: str | None


class MainScreen(MainKeys):
    """One session; the app feeds it snapshots."""

    AUTO_FOCUS = ""
    """Nothing to focus until the session is loaded; :meth:`show_session` focuses the list."""

    def __init__(self) -> None:
        super().__init__(classes="-loading")
        self.snapshot: SessionSnapshot | None = None
        self.live = LiveState()
        self.query_state = RowQuery()

    def compose(self) -> ComposeResult:
        yield InfoBar(id="info")
        with Vertical(id="status"):
            yield LoadingIndicator(id="spinner")
            yield Static("Loading session…", id="status-text")
        with Horizontal(id="top"):
            yield BudgetPanel(id="budget")
            yield Lazy(Timeline(id="timeline"))
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield FilterBar(id="filter")
                yield MessageList(id="messages")
            yield MessageDetail(id="detail")
            yield Lazy(CompactionPane(id="compaction"))
        yield LiveStream(id="live")
        yield AgentInput(id="input")
        yield Footer()

    def on_mount(self) -> None:
        self.workbench.screen_ready()

    # --- what the app hands over ---------------------------------------------------

    def show_session(self, snapshot: SessionSnapshot, live: LiveState) -> None:
        self.remove_class("-compacting")
        self.query_state = RowQuery()
        self.query_one(FilterBar).value = ""
        self.remove_class("-filtering")
        self.show_live(live)
        self.update(snapshot, follow=live.can_send)
        self.remove_class("-loading", "-failed")
        self.add_class("-loaded")
        if live.can_send and live.prefill and not live.autoplay:
            self.query_one(AgentInput).focus()
        else:
            self.query_one(MessageList).focus()

    def show_live(self, live: LiveState) -> None:
        self.live = live
        self.set_class(live.can_send, "-live")
        self.query_one(AgentInput).apply(live)
        info = self.query_one(InfoBar)
        if live.turns:
            info.mode = f"demo {live.turn}/{live.turns}" + (" · autoplay" if live.autoplay else "")
        else:
            info.mode = "live" if live.can_send else "read-only"

    def on_timeline_ready(self, event: Timeline.Ready) -> None:
        """A session that opened before the timeline was mounted must still reach it."""
        if self.snapshot is not None:
            for timeline in self.query(Timeline):
                timeline.data = self.snapshot.timeline

    def update(self, snapshot: SessionSnapshot, *, follow: bool = False, keep: str | None = None) -> None:
        """Show a newer snapshot of the session: the cursor stays on its message (or at the end)."""
        messages = self.query_one(MessageList)
        selected = messages.selected_row
        at_end = follow and (self.snapshot is None or messages.at_end)
        keep = keep or (selected.message.id if selected is not None else None)
        self.snapshot = snapshot
        info = self.query_one(InfoBar)
        info.title = snapshot.title
        info.model = snapshot.budget.model
        info.window = snapshot.budget.context_window
        info.known_model = snapshot.budget.known_model
        self.query_one(BudgetPanel).budget = snapshot.budget
        for timeline in self.query(Timeline):
            timeline.data = snapshot.timeline
        self._title_list()
        if self.query_state.active:
            messages.set_rows(snapshot.rows, [], keep=keep)  # shown once the worker has filtered
            self._filter(snapshot.rows, self.query_state, keep)
        else:
            messages.set_rows(snapshot.rows, None, keep=None if at_end else keep, follow=at_end)

    def _title_list(self) -> None:
        if self.snapshot is None:
            return
        rows = self.snapshot.rows
        title = f"Transcript · {len(rows):,} messages · {rows.in_context:,} in context"
        if self.query_state.active:
            title += f" · {self.query_one(MessageList).row_count:,} shown ({self.query_state.describe()})"
        messages = self.query_one(MessageList)
        if messages.border_title != title:
            messages.border_title = title

    def set_status(self, status: str, detail: str = "") -> None:
        info = self.query_one(InfoBar)
        info.status, info.detail = status, detail
        stream = self.query_one(LiveStream)
        stream.streaming = status == "streaming"
        if status == "waiting for approval":
            stream.activity("approval", detail, "")

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
        self.remove_class("-loading", "-loaded")
        self.add_class("-failed")

    def set_busy(self, busy: bool, pane: str = "list") -> None:
        """Progress in the affected pane (the app calls this after half a second of work)."""
        if pane in ("session", "compaction"):
            return  # the loading screen and the compaction pane show their own progress
        self.query_one("#body").loading = busy

    # --- the compaction pane ----------------------------------------------------------

    def compaction_pane(self) -> CompactionPane:
        """The pane (mounted lazily, after the first frame), shown instead of the detail."""
        self.add_class("-compacting")
        return self.query_one("#compaction", CompactionPane)

    def close_compaction(self) -> None:
        self.remove_class("-compacting")
        self.query_one(MessageList).focus()

    # --- list, filter, selection ------------------------------------------------------------

    @work(thread=True, exclusive=True, group="filter", exit_on_error=False)
    def _filter(self, rows: MessageRows, query: RowQuery, keep: str | None) -> None:
        """Filter / sort off the UI thread (the rows are immutable); the result comes back as a message."""
        self.post_message(Filtered(rows, apply_query(rows, query), query, keep))

    @on(Filtered)
    def _filtered(self, event: Filtered) -> None:
        if self.snapshot is None or event.rows is not self.snapshot.rows or event.query != self.query_state:
            return  # an older snapshot or query: a newer result is coming
        self.query_one(MessageList).set_rows(event.rows, event.order, keep=event.keep)
        self._title_list()

    def _requery(self, query: RowQuery) -> None:
        self.query_state = query
        messages = self.query_one(MessageList)
        selected = messages.selected_row
        if self.snapshot is not None:
            self._filter(self.snapshot.rows, query, selected.message.id if selected is not None else None)

    @on(FilterBar.Changed, "#filter")
    def _typed(self, event: FilterBar.Changed) -> None:
        self._requery(RowQuery.parse(event.value, by_tokens=self.query_state.by_tokens))

    @on(FilterBar.Submitted, "#filter")
    @on(FilterBar.Closed)
    def _leave_filter(self, event: Message) -> None:
        if isinstance(event, FilterBar.Closed) and event.cleared:
            self.remove_class("-filtering")
        self.query_one(MessageList).focus()

    @on(MessageList.Highlighted)
    def _show_selected(self, event: MessageList.Highlighted) -> None:
        snapshot = self.snapshot
        calls = snapshot.rows.tool_calls if snapshot is not None else {}
        subagents = snapshot.subagents.get(event.row.message.id, ()) if snapshot and event.row else ()
        self.query_one(MessageDetail).show(event.row, calls, subagents)

    @on(MessageList.DetailRequested)
    def _focus_detail(self) -> None:
        self.query_one(MessageDetail).focus()

    @on(MessageDetail.BackRequested)
    @on(AgentInput.Leave)
    def _focus_list(self) -> None:
        self.query_one(MessageList).focus()

    @on(AgentInput.Submitted, "#input")
    def _send(self, event: AgentInput.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        self.query_one(AgentInput).sent()
        self.query_one(LiveStream).new_step()
        self.workbench.send(text)
