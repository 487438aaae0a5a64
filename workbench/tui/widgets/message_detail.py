"""The selected message in full, read-only: text, thinking, tool input and tool output.

Only one message is ever rendered here, so its full text can be shown without
virtualisation; a single part longer than ``PART_CHAR_LIMIT`` is cut on screen
(never in the transcript) to keep one runaway tool output from stalling the UI.
How each part is drawn lives in :mod:`detail_render`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from workbench.tui.widgets import format as fmt
from workbench.tui.widgets.detail_render import LABEL, render_row
from workbench.tui.widgets.row_lookups import CallRef
from workbench.tui.widgets.rows import Row


class MessageDetail(VerticalScroll, can_focus=True):
    """Scrollable view of one message; the list owns the selection and tells this pane."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,shift+tab", "back", "Back to list", id="detail.back", tooltip="Back to the message list"),
    ]

    DEFAULT_CSS = """
    MessageDetail {
        background: $surface;
        padding: 0 1;
        & > #detail-body { width: 1fr; }
    }
    """

    class BackRequested(Message):
        """The user wants the message list again."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
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
            body.update(render_row(row, {} if tool_calls is None else tool_calls, extra, self.styles.background.hex))
        self.scroll_home(animate=False)

    def show_note(self, title: str, note: str) -> None:
        """A line in place of a message that cannot be shown yet (while a session loads)."""
        self._shown = None
        self.border_title = title
        self.query_one("#detail-body", Static).update(Text(note, style="italic"))
        self.scroll_home(animate=False)

    def action_back(self) -> None:
        self.post_message(self.BackRequested())
