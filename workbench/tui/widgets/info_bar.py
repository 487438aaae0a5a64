"""One line at the top: which session, which model, how big the window, what the workbench is doing."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.tui.widgets import format as fmt

APP_NAME = "Context Workbench"
SEPARATOR = " │ "
STATUS_COLOURS = {
    "idle": "#9ece6a",
    "watching": "#9ece6a",
    "streaming": "#7dcfff",
    "running tool": "#ff9e64",
    "compacting": "#e0af68",
    "waiting for approval": "#f7768e",
    "error": "#f7768e",
}


class InfoBar(Widget):
    """Session title, model, context window, cost so far, what kind of session (live, imported, read-only, demo) and the live status."""

    DEFAULT_CSS = """
    InfoBar {
        height: 1;
        background: $panel;
        color: $text;
    }
    """

    title: reactive[str | None] = reactive(None)
    model: reactive[str | None] = reactive(None)
    window: reactive[int | None] = reactive(None)
    known_model: reactive[bool] = reactive(True)
    cost: reactive[str] = reactive("")
    """What the session's requests cost so far (``$1.23``, ``≈$0.12 est.``), or empty when not known."""
    status: reactive[str] = reactive("loading…")
    detail: reactive[str] = reactive("")
    """What the status is about (the tool running, the compaction trigger)."""
    mode: reactive[str] = reactive("")
    """``live``, ``imported``, ``read-only``, ``demo 1/3``…"""
    following: reactive[str] = reactive("")
    """The name of the transcript being followed (``workbench watch``), or empty."""

    def render(self) -> Text:
        dim = Style(dim=True)
        right = Text(no_wrap=True)
        if self.window is not None:
            right.append(self.model or "unknown model", Style() if self.known_model else Style(color="#e0af68"))
            right.append(SEPARATOR, dim)
            right.append(f"window {self.window:,}")
            right.append(SEPARATOR, dim)
        if self.cost:
            right.append(self.cost)
            right.append(SEPARATOR, dim)
        if self.following:
            right.append(f"following {fmt.clean(self.following)[:40]}", Style(color="#7dcfff"))
            right.append(SEPARATOR, dim)
        if self.mode:
            right.append(self.mode, Style(dim=True))
            right.append(SEPARATOR, dim)
        colour = STATUS_COLOURS.get(self.status, "#e0af68")
        right.append("● ", Style(color=colour))
        right.append(self.status, Style(color=colour, bold=self.status not in ("idle", "watching")))
        if self.detail:
            right.append(f" · {fmt.clean(self.detail)[:30]}", Style(color=colour))
        right.append(" ")
        left = Text(no_wrap=True)
        left.append(f" {APP_NAME}", Style(bold=True, color="#7aa2f7"))
        if self.title:
            left.append(SEPARATOR, dim)
            left.append(fmt.clean(" ".join(self.title.split())), Style(bold=True))
        room = self.size.width - right.cell_len - 2
        if left.cell_len > room:
            left.truncate(max(0, room), overflow="ellipsis")
        left.append(" " * max(1, self.size.width - left.cell_len - right.cell_len))
        return left + right
