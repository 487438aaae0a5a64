"""The session screen: header, budget and timeline on top, the transcript list and the selected message
(or the compaction pane) below, the live agent and its input at the bottom.

It starts in a loading state (spinner) and becomes either the session view or
an error message. It shows what the app hands it (screen states made on the engine
thread); the steering keys here ask the app to run them on the engine thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message
from textual.widget import AwaitMount
from textual.widgets import LoadingIndicator, Static

from workbench.engine.context.budget import Budget
from workbench.tui.messages import LiveState
from workbench.tui.screen_state import ScreenState
from workbench.tui.screens.main_keys import FOOTER_ORDER, MainKeys
from workbench.tui.widgets.agent_input import AgentInput, compact_command
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.filter_bar import FilterBar
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.live_stream import LiveStream, idle_text
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.row_filter import RowQuery, apply_query
from workbench.tui.widgets.rows import MessageRows, Row
from workbench.tui.widgets.timeline import Timeline

if TYPE_CHECKING:
    from workbench.tui.widgets.compaction_pane import CompactionPane


@dataclass(eq=False, repr=False)
class Filtered(Message):
    """The filter worker's result."""

    rows: MessageRows
    order: list[int] | None
    query: RowQuery
    keep: str | None


def breakpoint_class(cells: int, breakpoints: Sequence[tuple[int, str]]) -> str:
    """The class of the largest breakpoint at or below ``cells``: Textual's rule for ``*_BREAKPOINTS``, so the
    first resize finds the class already there (each list here starts at 0, so one always applies)."""
    return max((at, name) for at, name in breakpoints if cells >= at)[1]


UNSTYLED = frozenset({"-loading", "-loaded", "-live"})
"""The screen's classes no rule depends on (for tests and readers): changing them restyles nothing."""
SHORT_BELOW = 30
NARROW_BELOW = 110
SCRIPTED_LABEL = "Agent · scripted demo: recorded answers, offline; its tools run in a temporary copy of the project"


class MainScreen(MainKeys):
    """One session; the app feeds it screen states."""

    AUTO_FOCUS = ""
    """Nothing to focus until the session is loaded; :meth:`show_session` focuses the list."""
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT_BELOW, "-tall")]  # noqa: RUF012 - Textual's own attribute
    """Below ``SHORT_BELOW`` rows the budget is one line and the timeline is hidden (``styles/app.tcss``)."""
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]  # noqa: RUF012 - Textual's own attribute
    ALLOW_IN_MAXIMIZED_VIEW = "InfoBar, KeyFooter"
    """What stays beside the compaction pane when it takes the screen (below ``NARROW_BELOW`` columns)."""
    ESCAPE_TO_MINIMIZE = False
    """Esc cancels the compaction (the pane's key), which gives the screen back with it."""

    def __init__(self) -> None:
        super().__init__(classes="-loading")
        self.add_class(*self._size_classes(self.app.size), update=False)
        self.screen_state: ScreenState | None = None
        self.live = LiveState()
        self.query_state = RowQuery()
        self._timeline: Timeline | None = None
        """The timeline once mounted: a query for it on every engine event walked the whole screen."""
        self._compaction: tuple[CompactionPane, AwaitMount] | None = None
        """The compaction pane and its mount, once a compaction has asked for it (:meth:`compaction_pane`)."""

    def _size_classes(self, size: Size) -> set[str]:
        """The breakpoint classes Textual gives the screen at ``size`` when the first resize arrives. Given at
        once, that resize changes no class: it restyled the whole screen (15-20 ms of every open, the loading
        screen's first frame waiting on it)."""
        width, height = size
        return {breakpoint_class(width, self.HORIZONTAL_BREAKPOINTS),
                breakpoint_class(height, self.VERTICAL_BREAKPOINTS)}

    def compose(self) -> ComposeResult:
        yield InfoBar(id="info")
        with Vertical(id="status"):
            yield LoadingIndicator(id="spinner")
            yield Static("Loading session…", id="status-text")
        with Horizontal(id="top"):
            yield BudgetPanel(id="budget")
            yield Timeline(id="timeline")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield FilterBar(id="filter")
                yield MessageList(id="messages")
            yield MessageDetail(id="detail")
        yield LiveStream(id="live")
        yield AgentInput(id="input")
        yield KeyFooter(order=FOOTER_ORDER, held=True)  # held while loading: a quick open shows the session's keys

    def on_mount(self) -> None:
        self._timeline = self.query_one(Timeline)
        self.workbench.screen_ready()

    # --- what the app hands over ---------------------------------------------------

    def show_session(self, screen_state: ScreenState, live: LiveState) -> None:
        classes = frozenset(self.classes)
        self.remove_class("-compacting", "-loading", "-failed", update=False)  # one restyle, at the end
        self._reset_query(restyle=False)
        self.add_class("-loaded", update=False)
        self._show_parts(loaded=True)
        self.show_live(live)
        self.update(screen_state, follow=live.can_send)
        # The selected message at once, not when the list's Highlighted arrives: that waited behind the footer's
        # rebuild and a frame without it (the detail shows the same message then, so it keeps the pane).
        self._show_row(self.query_one(MessageList).selected_row)
        self._restyle_since(classes)
        if live.can_send and live.prefill and not live.autoplay:
            self.query_one(AgentInput).focus()
        else:
            self.query_one(MessageList).focus()
        self.query_one(KeyFooter).release()

    def show_loading(self) -> None:
        """Back to the loading screen while another session opens."""
        self.add_class("-loading", update=False)
        self.remove_class("-loaded", update=False)
        self._show_parts(loaded=False)
        self.query_one(KeyFooter).hold()

    def _show_parts(self, *, loaded: bool) -> None:
        """The session's parts or the loading screen, shown by their own ``display``: no rule depends on the
        screen's -loading / -loaded classes, since restyling the whole screen for them took 70 ms of an open."""
        self.query_one("#status").display = not loaded
        for part in ("#top", "#body", "#input"):
            self.query_one(part).display = loaded
        self.query_one(LiveStream).display = loaded and self.live.can_send
        self._place_compaction()

    def _reset_query(self, *, restyle: bool = True) -> None:
        self.query_state = RowQuery()
        self.query_one(FilterBar).value = ""
        self.remove_class("-filtering", update=restyle)

    def _restyle_since(self, classes: frozenset[str]) -> None:
        """One restyle of the whole screen for every class changed since ``classes`` were read (a restyle per
        change was a tenth of a second of every session's open), none when no class a rule depends on changed."""
        if (frozenset(self.classes) ^ classes) - UNSTYLED:
            self.update_node_styles()

    def _show_header(self, title: str, budget: Budget) -> None:
        info = self.query_one(InfoBar)
        info.title = title
        info.model = budget.model
        info.window = budget.context_window
        info.known_model = budget.known_model
        self.query_one(BudgetPanel).budget = budget

    def show_live(self, live: LiveState) -> None:
        self.live = live
        self.set_class(live.can_send, "-live", update=False)  # (no rule of the screen depends on it)
        self.query_one(LiveStream).display = live.can_send and self.has_class("-loaded")
        self.query_one(AgentInput).apply(live)
        info = self.query_one(InfoBar)
        if live.turns:
            info.mode = f"demo {live.turn}/{live.turns}" + (" · autoplay" if live.autoplay else "")
        else:
            info.mode = live.label or ("live" if live.can_send else "read-only")
        stream = self.query_one(LiveStream)
        stream.border_title = SCRIPTED_LABEL if live.turns else "Agent"
        stream.idle = idle_text(live)
        self.refresh_bindings()  # the demo's faster key comes and goes with it

    @property
    def rows(self) -> MessageRows | None:
        """The rows shown."""
        return self.screen_state.rows if self.screen_state is not None else None

    @property
    def subagents(self) -> Mapping[str, Sequence[str]]:
        return self.screen_state.subagents if self.screen_state is not None else {}

    def update(self, screen_state: ScreenState, *, follow: bool = False, keep: str | None = None) -> None:
        """Show a newer screen_state of the session: the cursor stays on its message (or at the end)."""
        messages = self.query_one(MessageList)
        selected = messages.selected_row
        at_end = follow and (self.screen_state is None or messages.at_end)
        keep = keep or (selected.message_id if selected is not None else None)
        self.screen_state = screen_state
        self._show_header(screen_state.title, screen_state.budget)
        self.query_one(BudgetPanel).policy = screen_state.policy
        self.query_one(InfoBar).cost = screen_state.timeline.cost
        if self._timeline is not None:
            self._timeline.data = screen_state.timeline
        self._title_list()
        if self.query_state.active:
            messages.set_rows(screen_state.rows, [], keep=keep)  # shown once the worker has filtered
            self._filter(screen_state.rows, self.query_state, keep)
        else:
            messages.set_rows(screen_state.rows, None, keep=None if at_end else keep, follow=at_end)

    def _title_list(self) -> None:
        rows = self.rows
        if rows is None:
            return
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
        self.query_one("#spinner").display = False
        self.remove_class("-loading", "-loaded", update=False)
        self._show_parts(loaded=False)
        self.add_class("-failed")
        self.query_one(KeyFooter).release()

    def set_busy(self, busy: bool, pane: str = "list") -> None:
        """Progress in the affected pane (the app calls this after half a second of work; an open's spinner
        after a second), cleared wherever it is when the work is done."""
        if not busy:
            self.query_one("#spinner").display = False
            self.query_one("#body").loading = False
        elif pane == "session":
            self.query_one("#spinner").display = True
            self.query_one(KeyFooter).release()  # a slow open: its keys (quit, sessions) while the user waits
        elif pane != "compaction":  # the compaction pane shows its own progress
            self.query_one("#body").loading = True

    # --- the compaction pane ----------------------------------------------------------

    async def compaction_pane(self) -> CompactionPane:
        """The pane, shown instead of the detail; loaded and mounted the first time it is asked for (mounted as
        the app started, it competed with the first session's load: 80 ms of a 50,000-message open; its module,
        with Textual's text area and select, took 27 ms more to load)."""
        self.add_class("-compacting")
        if self._compaction is None:
            from workbench.tui.widgets.compaction_pane import CompactionPane

            pane = CompactionPane(id="compaction")
            self._compaction = pane, self.query_one("#body").mount(pane)
        pane, mounting = self._compaction
        await mounting  # (a second caller waits for the same mount)
        self._place_compaction()
        return pane

    @property
    def mounted_compaction_pane(self) -> CompactionPane | None:
        """The pane if a compaction has asked for it (what the engine reports of a compaction goes to it)."""
        return self._compaction[0] if self._compaction is not None else None

    def close_compaction(self) -> None:
        self.remove_class("-compacting")
        self._place_compaction()
        self.query_one(MessageList).focus()

    def _place_compaction(self) -> None:
        """Below ``NARROW_BELOW`` columns the open compaction pane takes the whole screen (but the header and the
        keys), where beside the list it left neither readable; it gives it back when it closes or the terminal
        widens. It takes the focus with the screen: the list it covers would take the keys otherwise."""
        pane = self.mounted_compaction_pane
        shown = pane is not None and self.has_class("-compacting") and bool(self.query_one("#body").display)
        if pane is not None and shown and self.has_class("-narrow"):
            if self.maximized is not pane:
                self.maximize(pane, container=False)
            if self.focused is None or pane not in self.focused.ancestors_with_self:
                pane.query_one("#compaction-summary").focus(scroll_visible=False)
        elif self.maximized is not None:
            self.minimize()

    def on_resize(self) -> None:
        self.call_after_refresh(self._place_compaction)  # after the breakpoint classes of the new size

    # --- list, filter, selection ------------------------------------------------------------

    @work(thread=True, exclusive=True, group="filter", exit_on_error=False)
    def _filter(self, rows: MessageRows, query: RowQuery, keep: str | None) -> None:
        """Filter / sort off the UI thread (the rows are immutable); the result comes back as a message."""
        self.post_message(Filtered(rows, apply_query(rows, query), query, keep))

    @on(Filtered)
    def _filtered(self, event: Filtered) -> None:
        if self.screen_state is None or event.rows is not self.screen_state.rows or event.query != self.query_state:
            return  # an older screen_state or query: a newer result is coming
        self.query_one(MessageList).set_rows(event.rows, event.order, keep=event.keep)
        self._title_list()

    def _requery(self, query: RowQuery) -> None:
        self.query_state = query
        messages = self.query_one(MessageList)
        selected = messages.selected_row
        if self.screen_state is not None:
            self._filter(self.screen_state.rows, query, selected.message_id if selected is not None else None)
        else:
            self._title_list()  # the filter waits for the loaded rows; the title says what comes

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
        self._show_row(event.row)

    def _show_row(self, row: Row | None) -> None:
        screen_state = self.screen_state
        calls = screen_state.rows.tool_calls if screen_state is not None else {}
        subagents = screen_state.subagents.get(row.message.id, ()) if screen_state and row else ()
        self.query_one(MessageDetail).show(row, calls, subagents)

    @on(MessageList.DetailRequested)
    def _focus_detail(self) -> None:
        self.query_one(MessageDetail).focus()

    @on(MessageDetail.BackRequested)
    @on(AgentInput.Leave)
    def _focus_list(self) -> None:
        self.query_one(MessageList).focus()

    @on(AgentInput.Submitted, "#input")
    async def _send(self, event: AgentInput.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        focus = compact_command(text)
        if focus is not None:  # what ``c`` does, with the focus typed after the command
            self.query_one(AgentInput).value = ""
            await self.workbench.preview_compaction(focus=focus)
            return
        self.query_one(AgentInput).sent()
        self.query_one(LiveStream).new_step()
        self.workbench.send(text)
