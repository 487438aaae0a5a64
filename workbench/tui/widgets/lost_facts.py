"""The facts a compaction's summary would lose, under its figure in the compaction pane: each with its kind and
the message it came from; ``a`` adds the highlighted one to the summary, ``p`` pins its message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from workbench.engine.plans.facts import Fact

KIND_STYLE = Style(color="#ff9e64")
WHERE_STYLE = Style(color="#737aa2")


def fact_line(fact: Fact, position: int | None) -> Text:
    """``#12   file        read src/app.py``: where first, as a long fact is cut at the right."""
    line = Text()
    line.append(f"#{position:<5}" if position is not None else " " * 6, WHERE_STYLE)
    line.append(f"{fact.kind:<11} ", KIND_STYLE)
    line.append(fact.text)
    return line


class LostFacts(OptionList):
    """One row per lost fact; the pane owns the list and refills it when the check changes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "add", "Add to the summary", id="facts.add",
                tooltip="Add the highlighted lost fact to the summary, as a line at its end"),
        Binding("p", "pin", "Pin its message", id="facts.pin",
                tooltip="Pin the message the fact came from (kept verbatim) and preview again"),
    ]

    DEFAULT_CSS = """
    LostFacts {
        height: auto;
        max-height: 8;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    class Add(Message):
        def __init__(self, fact: Fact) -> None:
            super().__init__()
            self.fact = fact

    class Pin(Message):
        def __init__(self, fact: Fact) -> None:
            super().__init__()
            self.fact = fact

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.facts: list[Fact] = []

    def show(self, lost: Sequence[Fact], positions: Mapping[str, int]) -> None:
        """Fill the list with ``lost``, keeping the highlight where it was when it can."""
        self.display = bool(lost)
        if list(lost) == self.facts:
            return
        at = self.highlighted
        self.facts = list(lost)
        self.set_options([Option(fact_line(f, positions.get(f.message_id))) for f in self.facts])
        if self.facts:
            self.highlighted = min(at or 0, len(self.facts) - 1)

    def _current(self) -> Fact | None:
        at = self.highlighted
        return self.facts[at] if at is not None and 0 <= at < len(self.facts) else None

    def action_add(self) -> None:
        if (fact := self._current()) is not None:
            self.post_message(self.Add(fact))

    def action_pin(self) -> None:
        if (fact := self._current()) is not None:
            self.post_message(self.Pin(fact))
