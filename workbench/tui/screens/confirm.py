"""Ask before something that cannot be undone (deleting a stored session): y goes ahead, n or Esc does not."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Dismissed with True (go ahead) or False."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
        & > #confirm-box {
            width: 72;
            max-width: 95%;
            height: auto;
            border: round $error;
            border-title-color: $error;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #confirm-question { width: 100%; }
        & #confirm-buttons { height: 3; width: 100%; align-horizontal: right; }
        & Button { margin-left: 1; width: auto; }
    }
    """

    def __init__(self, title: str, question: str, yes: str) -> None:
        super().__init__()
        self.title_text = title
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = self.title_text
            yield Static(Text(self.question), id="confirm-question")  # plain text: titles may hold [brackets]
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.yes}  y", variant="error", id="confirm-yes")
                yield Button("Keep it  n", variant="default", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed, "#confirm-yes")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-no")
    def _no(self) -> None:
        self.dismiss(False)
