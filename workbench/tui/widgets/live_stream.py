"""The agent's current step, live: the answer streaming in, then its tool calls and their results.

Fixed height: the newest lines win. The full messages land in the message list
as soon as the engine stores them; this pane is only the part still in flight.
"""

from __future__ import annotations

from collections import deque

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.tui.messages import LiveState
from workbench.tui.widgets import format as fmt

ACTIVITY_LINES = 4
CURSOR = "▍"
IDLE = "Nothing running. Type a message below."


def idle_text(live: LiveState) -> str:
    """What the pane says while nothing is in flight: the same as the message box below it (a finished demo
    said "Type a message below" over a box saying the demo had finished)."""
    if live.working:
        return "The agent is working…"
    if not live.turns:
        return IDLE if live.can_send else live.reason
    if live.turn >= live.turns:
        return "The demo has finished: ctrl+o opens another session."
    if live.autoplay:
        return "Nothing running: the demo sends its next message by itself."
    return "Nothing running: the demo's next message waits below; Enter sends it."


class LiveStream(Widget):
    """Shows :attr:`text` (the answer so far), :attr:`thinking`, and the latest tool activity."""

    DEFAULT_CSS = """
    LiveStream {
        height: 7;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        padding: 0 1;
        background: $surface;
    }
    """

    text: reactive[str] = reactive("")
    thinking: reactive[str] = reactive("")
    streaming: reactive[bool] = reactive(False)
    idle: reactive[str] = reactive(IDLE)
    """What it says while nothing is in flight (:func:`idle_text`)."""
    narration: reactive[str] = reactive("")
    """What the played demo is doing now (its top line); empty for any other session."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._activity: deque[Text] = deque(maxlen=ACTIVITY_LINES)

    def on_mount(self) -> None:
        self.border_title = "Agent"

    def new_step(self) -> None:
        self._activity.clear()
        self.text = ""
        self.thinking = ""
        self.refresh()

    def activity(self, kind: str, name: str, detail: str, is_error: bool = False) -> None:
        line = Text(no_wrap=True, overflow="ellipsis")
        match kind:
            case "call":
                line.append("→ ", Style(color="#ff9e64", bold=True))
                line.append(name, Style(color="#ff9e64"))
                line.append(f"({fmt.clean(detail)})", Style(dim=True))
            case "result":
                colour = "#f7768e" if is_error else "#9ece6a"
                line.append("← ", Style(color=colour, bold=True))
                line.append(f"{name}: {'error' if is_error else 'ok'}", Style(color=colour))
                line.append(f" · {fmt.clean(detail)}", Style(dim=True))
            case "approval":
                line.append("? ", Style(color="#f7768e", bold=True))
                line.append(f"{name} is waiting for your approval", Style(color="#f7768e"))
            case _:
                line.append("⇢ ", Style(color="#7dcfff", bold=True))
                line.append(f"{name} {fmt.clean(detail)}", Style(color="#7dcfff"))
        self._activity.append(line)
        self.refresh()

    def render(self) -> Group:
        width = max(10, self.content_region.width)
        said = [Text(f"▸ {fmt.clean(self.narration)}", style=Style(color="#bb9af7", italic=True), no_wrap=True,
                     overflow="ellipsis")] if self.narration else []
        room = max(1, self.content_region.height - len(self._activity) - len(said))
        body = fmt.clean(self.text) if self.text else ""
        if not body and self.thinking:
            body = "thinking: " + fmt.clean(self.thinking)
        lines: list[Text] = []
        if body:
            wrapped = Text(body + (CURSOR if self.streaming else "")).wrap(self.app.console, width)
            lines = list(wrapped)[-room:]
        elif not self._activity:
            idle = "Waiting for the model…" if self.streaming else self.idle
            lines = [Text(idle, style=Style(italic=True, dim=True))]
        return Group(*said, *lines, *self._activity)
