"""The list's filter: ``role:user badge:pruned tool:read_file`` and any words to find (``/`` opens it)."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

PLACEHOLDER = "search text · role:user · badge:pinned|pruned|offloaded|summary|error|compacted · tool:NAME"


class FilterBar(Input):
    """Typing filters the list as you go; Enter goes back to the list, Esc clears the filter."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter", id="filter.clear",
                tooltip="Clear the filter: every message is shown again"),
        Binding("down", "done", "To the list", show=False, id="filter.done",
                tooltip="Back to the list, keeping the filter"),
    ]

    DEFAULT_CSS = """
    FilterBar {
        height: 1;
        border: none;
        padding: 0 1;
        background: $boost;
        &:focus { border: none; background: $primary 20%; }
    }
    """

    class Closed(Message):
        """Leave the filter bar; ``cleared`` when the filter was dropped."""

        def __init__(self, cleared: bool) -> None:
            super().__init__()
            self.cleared = cleared

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder=PLACEHOLDER, id=id)

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Closed(True))

    def action_done(self) -> None:
        self.post_message(self.Closed(False))
