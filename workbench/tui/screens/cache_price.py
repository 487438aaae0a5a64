"""Before an edit reaches a proxied agent: what it does to the agent's prompt cache, and when to apply it.

Changing a message breaks the agent's cached prefix from that message on, so the next request costs
more and every later one less. The modal says so with the numbers, and offers to apply the edit now,
once the cache has gone cold (no request for five minutes), or not at all.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

When = Literal["now", "cold"]


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
            width: 84;
            max-width: 95%;
            height: auto;
            border: round $accent;
            border-title-color: $accent;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #cache-text { height: auto; margin-bottom: 1; }
        & #cache-buttons { height: 3; align-horizontal: right; }
        & Button { margin-left: 1; }
    }
    """

    def __init__(self, what: str, price: str) -> None:
        super().__init__()
        self.what = what
        self.price = price

    def compose(self) -> ComposeResult:
        with Vertical(id="cache-box") as box:
            box.border_title = f"{self.what} · the agent's prompt cache"
            yield Static(f"{self.price[0].upper()}{self.price[1:]}.", id="cache-text")
            with Horizontal(id="cache-buttons"):
                yield Button("Apply now [enter]", id="now", variant="primary")
                yield Button("When the cache is cold [w]", id="cold")
                yield Button("Cancel [esc]", id="cancel")

    def action_answer(self, when: When | None) -> None:
        self.dismiss(when)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        answers: dict[str, When] = {"now": "now", "cold": "cold"}
        self.dismiss(answers.get(event.button.id or ""))
