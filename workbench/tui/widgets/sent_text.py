"""The text of one thing a proxied agent was sent (a tool definition, a memory file, a replaced block)."""

from __future__ import annotations

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

HEADING = Style(bold=True, color="#7aa2f7")


class SentText(VerticalScroll):
    """A scrolling pane of plain text (never markup: what an agent sends is full of brackets); a second text,
    when given, follows under its own heading (what was there before)."""

    DEFAULT_CSS = """
    SentText {
        height: 1fr;
        border: round $primary 40%;
        border-title-color: $text;
        padding: 0 1;
        &:focus { border: round $primary; }
        & > Static { width: 1fr; }
    }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="sent-text-body")

    def show(self, title: str, text: str, before: tuple[str, str] | None = None) -> None:
        """``before``: (its heading, its text), shown under ``text``."""
        self.border_title = title
        parts: list[Text] = [Text(text or "(empty)")]
        if before is not None:
            parts += [Text(""), Text(before[0], style=HEADING), Text(before[1] or "(empty)")]
        self.query_one("#sent-text-body", Static).update(Group(*parts))
        self.scroll_home(animate=False)
