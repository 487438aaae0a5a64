"""Approve or refuse one tool call (shell, file writes) before the agent runs it.

The agent thread waits on a ``concurrent.futures.Future``; the app completes it
with this modal's answer. In the played demo the modal approves by itself after
a short countdown, so the demo runs without a key.
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Button, Static

from workbench.engine.transcript.models import ToolUsePart
from workbench.tui.widgets.detail_render import tool_input


class ApprovalScreen(ModalScreen[bool]):
    """Dismissed with True (run the tool) or False (the agent is told the user refused)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Approve", id="approval.approve"),
        Binding("n,escape", "answer(False)", "Refuse", id="approval.refuse"),
    ]

    DEFAULT_CSS = """
    ApprovalScreen {
        align: center middle;
        & > #approval-box {
            width: 90;
            max-width: 95%;
            height: auto;
            max-height: 80%;
            border: round $warning;
            border-title-color: $warning;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #approval-input { height: auto; max-height: 20; }
        & #approval-countdown { color: $text-muted; height: 1; }
        & #approval-buttons { height: 3; align-horizontal: right; }
        & Button { margin-left: 1; }
    }
    """

    def __init__(self, call: ToolUsePart, countdown: float | None = None) -> None:
        super().__init__()
        self.call = call
        self.remaining = countdown
        self._timer: Timer | None = None
        self._answered = False

    def compose(self) -> ComposeResult:
        with Vertical(id="approval-box") as box:
            box.border_title = f"Run {self.call.name}?"
            intro = Text.assemble(("The agent wants to run ", ""), (self.call.name, "bold"),
                                  (" with this input:", ""))
            yield Static(intro)
            with VerticalScroll(id="approval-input"):
                yield Static(id="approval-call")
            yield Static("", id="approval-countdown")
            with Horizontal(id="approval-buttons"):
                yield Button("Approve  y", variant="success", id="approval-yes")
                yield Button("Refuse  n", variant="error", id="approval-no")

    def on_mount(self) -> None:
        box = self.query_one("#approval-box")
        self.query_one("#approval-call", Static).update(Group(*tool_input(self.call, box.styles.background.hex)))
        if self.remaining is not None:
            self._tick()
            self._timer = self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        assert self.remaining is not None
        if self.remaining <= 0:
            self.action_answer(True)
            return
        self.query_one("#approval-countdown", Static).update(
            f"Demo: approving by itself in {self.remaining:.0f} s (y / n to answer now)")
        self.remaining -= 1

    def action_answer(self, approved: bool) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self._answered:
            return
        self._answered = True
        self.dismiss(approved)

    @on(Button.Pressed, "#approval-yes")
    def _yes(self) -> None:
        self.action_answer(True)

    @on(Button.Pressed, "#approval-no")
    def _no(self) -> None:
        self.action_answer(False)
