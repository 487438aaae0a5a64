"""The selected message in full, read-only: text, thinking, tool input and tool output.

Only one message is ever rendered here, so its full text can be shown without
virtualisation; a single part longer than ``PART_CHAR_LIMIT`` is cut on screen
(never in the transcript) to keep one runaway tool output from stalling the UI.
How each part is drawn lives in :mod:`detail_render`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Input, Static

from workbench.tui.widgets import format as fmt
from workbench.tui.widgets.detail_render import LABEL, render_row
from workbench.tui.widgets.detail_search import current_line, highlighted
from workbench.tui.widgets.row_lookups import CallRef
from workbench.tui.widgets.rows import Row


class MessageDetail(VerticalScroll, can_focus=True):
    """Scrollable view of one message; the list owns the selection and tells this pane."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,shift+tab", "back", "Back to list", id="detail.back", tooltip="Back to the message list"),
        Binding("slash", "search", "Search in message", key_display="/", id="detail.search",
                tooltip="Find words in this message: every match highlighted; n / N go to the next / previous one"),
        Binding("n", "next_match", "Next match", id="detail.next_match", show=False,
                tooltip="The next match of the search in this message"),
        Binding("N", "next_match(-1)", "Previous match", key_display="N", id="detail.previous_match", show=False,
                tooltip="The previous match of the search in this message"),
    ]

    DEFAULT_CSS = """
    MessageDetail {
        background: $surface;
        padding: 0 1;
        & > #detail-body { width: 1fr; }
        & > #detail-search { dock: top; display: none; height: 1; border: none; padding: 0 1; }
        &.-searching > #detail-search { display: block; }
    }
    """

    class BackRequested(Message):
        """The user wants the message list again."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: tuple[object, ...] | None = None
        self._renderable: RenderableType | None = None
        """The message as drawn before any search styled it."""
        self.query_text = ""
        """What the search looks for in the message ("" : no search)."""
        self.current = 0
        self.matches = 0

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search in this message · Enter: go to it · n / N: next / previous · Esc: close",
                    id="detail-search")
        yield Static(Text("No message selected.", style="italic"), id="detail-body")

    def show(
        self,
        row: Row | None,
        tool_calls: Mapping[str, CallRef] | None = None,
        subagents: Sequence[str] = (),
    ) -> None:
        """Render ``row`` (or a placeholder) and scroll back to the top; nothing to do if it shows the same."""
        key = None if row is None else (row.message.id, row.tokens, fmt.percent(row.share), row.badges, row.excluded,
                                         tuple(subagents), tool_calls is not None, row.subagent_peak)
        if key is not None and key == self._shown:
            return  # a new screen_state that changes nothing here: keep the pane (and its scroll position)
        self._shown = key
        body = self.query_one("#detail-body", Static)
        self._renderable = None
        if row is None:
            self.border_title = "Message"
            body.update(Text("No message selected.", style="italic"))
        else:
            self.border_title = f"Message #{row.position}"
            extra = None
            if subagents:
                peak = f" · peak input {row.subagent_peak:,}" if row.subagent_peak else ""
                extra = Text(f"sub-agent session{'s' if len(subagents) > 1 else ''}: {', '.join(subagents)}"
                             f"{peak} · press g to open", style=LABEL + Style(bold=True))
            self._renderable = render_row(row, {} if tool_calls is None else tool_calls, extra,
                                          self.styles.background.hex)
            self.current = 0
            self._draw(body)
        self.scroll_home(animate=False)

    def show_note(self, title: str, note: str) -> None:
        """A line in place of a message that cannot be shown yet (while a session loads)."""
        self._shown = None
        self.border_title = title
        self.query_one("#detail-body", Static).update(Text(note, style="italic"))
        self.scroll_home(animate=False)

    def action_back(self) -> None:
        if self.has_class("-searching"):
            self.close_search()
            return
        self.post_message(self.BackRequested())

    # --- search in the message ------------------------------------------------------

    def start_search(self) -> None:
        """Show the search box (with the last query) and focus it."""
        self.add_class("-searching")
        box = self.query_one("#detail-search", Input)
        box.value = self.query_text
        box.focus()

    def action_search(self) -> None:
        self.start_search()

    def close_search(self) -> None:
        """Hide the search box and its highlights; the focus comes back here."""
        self.remove_class("-searching")
        self.search("")
        self.focus()

    def search(self, text: str) -> None:
        """Highlight every match of ``text`` in the message shown, the first as the current one."""
        self.query_text, self.current = text, 0
        self._draw(self.query_one("#detail-body", Static))
        self._scroll_to_current()

    def action_next_match(self, step: int = 1) -> None:
        if not self.matches:
            self.notify("No match in this message." if self.query_text else "Press / to search in the message.",
                        severity="warning", timeout=3)
            return
        self.current = (self.current + step) % self.matches
        self._draw(self.query_one("#detail-body", Static))
        self._scroll_to_current()

    def _draw(self, body: Static) -> None:
        if self._renderable is None:
            self.matches = 0
            return
        shown, self.matches = highlighted(self._renderable, self.query_text, self.current)
        body.update(shown)
        if self.query_text:
            where = f"{self.current + 1}/{self.matches}" if self.matches else "no match"
            self.border_subtitle = f"“{self.query_text}”: {where}"
        else:
            self.border_subtitle = ""

    def _scroll_to_current(self) -> None:
        if not self.matches or self._renderable is None:
            return
        shown, _ = highlighted(self._renderable, self.query_text, self.current)
        body = self.query_one("#detail-body", Static)
        line = current_line(self.app.console, shown, body.content_region.width or self.content_region.width)
        if line is not None:
            self.scroll_to(y=max(0, line - 2), animate=False)

    @on(Input.Changed, "#detail-search")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        self.search(event.value)

    @on(Input.Submitted, "#detail-search")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus()  # n / N from here
        if not self.matches and self.query_text:
            self.notify(f"“{self.query_text}” is not in this message.", severity="warning", timeout=3)
