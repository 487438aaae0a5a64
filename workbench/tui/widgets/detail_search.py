"""Search inside the message the detail pane shows: every match highlighted, the current one apart.

The pane's renderable (see :mod:`detail_render`) is a group of blocks; the search styles the matches in its
text blocks, and shows a highlighted code block as its text (the same colours, without line numbers) so its
matches can be styled too. Matching ignores case. Tables (the message's facts) and rules are left as they are.
"""

from __future__ import annotations

import re

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.style import Style
from rich.text import Text

MATCH = Style(color="#1a1b26", bgcolor="#e0af68")
CURRENT = Style(color="#1a1b26", bgcolor="#ff9e64", bold=True, underline=True)


class Highlighter:
    """Styles the matches of one query, numbering them in reading order."""

    def __init__(self, query: str, current: int) -> None:
        self.pattern = re.compile(re.escape(query), re.IGNORECASE)
        self.current = current
        self.count = 0

    def block(self, block: RenderableType) -> RenderableType:
        if isinstance(block, Group):
            return Group(*map(self.block, block.renderables))
        if isinstance(block, Padding):
            return Padding(self.block(block.renderable), (block.top, block.right, block.bottom, block.left))
        text = _as_text(block)
        if text is None:
            return block
        text = text.copy()
        for found in self.pattern.finditer(text.plain):
            text.stylize(CURRENT if self.count == self.current else MATCH, found.start(), found.end())
            self.count += 1
        return text


def _as_text(block: RenderableType) -> Text | None:
    if isinstance(block, Text):
        return block
    from rich.syntax import Syntax  # loaded already when the message holds code

    if isinstance(block, Syntax):
        return block.highlight(block.code)
    return None


def highlighted(renderable: RenderableType, query: str, current: int) -> tuple[RenderableType, int]:
    """``renderable`` with every match of ``query`` styled (the ``current``-th as the current one), and how
    many matches it holds; as it is, with none, for an empty query."""
    if not query:
        return renderable, 0
    marker = Highlighter(query, current)
    shown = marker.block(renderable)
    return shown, marker.count


def current_line(console: Console, renderable: RenderableType, width: int) -> int | None:
    """The line (from the top, at ``width``) that shows the current match, if any."""
    options = console.options.update_width(max(1, width))
    for number, line in enumerate(console.render_lines(renderable, options, pad=False)):
        if any(segment.style is not None and segment.style.underline and segment.style.bgcolor == CURRENT.bgcolor
               for segment in line):
            return number
    return None
