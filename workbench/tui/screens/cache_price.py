"""Before an edit reaches a proxied agent: what it does to the agent's prompt cache, and when to apply it.

Changing a message breaks the agent's cached prefix from the latest cache entry its marks still reach, so
the next request costs more and every later one less. The modal says so with the numbers and what they
assume (a cache still warm from the agent's last request), and offers to apply the edit now, once the cache
has gone cold (no request for its lifetime), or not at all; each button names its key.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

When = Literal["now", "cold"]


def _sentence(text: str) -> str:
    return f"{text[:1].upper()}{text[1:]}." if text else ""


class CachePriceScreen(ModalScreen[When | None]):
    """Dismissed with "now", "cold" (queue until the cache is cold) or None (cancel)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,y", "answer('now')", "Apply now", id="cache.now"),
        Binding("w", "answer('cold')", "When the cache is cold", id="cache.cold"),
        Binding("escape,n", "answer(None)", "Cancel", id="cache.cancel"),
    ]

    DEFAULT_CSS = """
    CachePriceScreen {
        align: center middle;
        & > #cache-box {
            width: 88;
            max-width: 95%;
            height: auto;
            border: round $accent;
            border-title-color: $accent;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #cache-text { height: auto; }
        & #cache-assumption { height: auto; color: $text-muted; margin-bottom: 1; }
        & #cache-buttons { height: 3; align-horizontal: right; }
        & Button { margin-left: 1; }
    }
    """

    def __init__(self, what: str, price: str, assumption: str = "", *, can_wait: bool = True) -> None:
        """``can_wait``: the change may be queued until the cache is cold (not a compaction, whose summary is of
        the conversation as it is now)."""
        super().__init__()
        self.what = what
        self.price = price
        self.assumption = assumption
        self.can_wait = can_wait

    def compose(self) -> ComposeResult:
        with Vertical(id="cache-box") as box:
            box.border_title = f"{self.what} · the agent's prompt cache"
            yield Static(_sentence(self.price), id="cache-text")
            yield Static(_sentence(self.assumption), id="cache-assumption")
            with Horizontal(id="cache-buttons"):
                # Content, not markup: "[enter]" would be read as a style and vanish.
                yield Button(Content("Apply now [enter]"), id="now", variant="primary")
                if self.can_wait:
                    yield Button(Content("When the cache is cold [w]"), id="cold")
                yield Button(Content("Cancel [esc]"), id="cancel")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.can_wait or action != "answer" or parameters != ("cold",)

    def action_answer(self, when: When | None) -> None:
        self.dismiss(when)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        answers: dict[str, When] = {"now": "now", "cold": "cold"}
        self.dismiss(answers.get(event.button.id or ""))
