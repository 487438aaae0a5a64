"""A line chart in braille dots, drawn straight into Rich text (the timeline's context size per request).

A braille cell holds 2×4 dots, so the timeline's 46×7-cell plot has 92×28 points to draw on. The chart was
plotext's before: importing it (it writes its own documentation as it loads) cost 40-90 ms of every open before
the first full frame, and each draw ~10 ms, for lines, marks, rules and tick labels that take this page.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

from rich.color import Color
from rich.style import Style
from rich.text import Text

Colour = tuple[int, int, int]

_DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""The bit of each dot of a braille cell, by row (top first) and column (U+2800 plus the bits is the cell)."""
_AXIS = Style(dim=True)
# The chart's parts are named tuples, not frozen dataclasses: making one of those compiles six methods, about
# a millisecond a class (9 ms for these three, measured), of every start before the first frame.


class Line(NamedTuple):
    """A series of values, one per point, joined up; a later line draws over an earlier one."""

    values: Sequence[int]
    colour: Colour


class Mark(NamedTuple):
    """A vertical mark at a point's place (0-based, fractional: between two points)."""

    at: float
    colour: Colour


class Rule(NamedTuple):
    """A horizontal line at a value."""

    value: int
    colour: Colour


def draw(width: int, height: int, lines: Sequence[Line], *, top: float, ticks: Sequence[tuple[int, str]] = (),
         marks: Sequence[Mark] = (), rules: Sequence[Rule] = ()) -> Text:
    """The chart in ``width`` × ``height`` cells: tick labels and an axis on the left, then the plot, whose
    values run from 0 (bottom) to ``top``. Lines draw over marks, marks over rules."""
    label_width = max((len(label) for _, label in ticks), default=0)
    plot_width = width - label_width - 1
    count = max((len(line.values) for line in lines), default=0)
    if plot_width < 1 or height < 1 or count == 0 or top <= 0:
        return Text()
    rows = 4 * height

    def row_of(value: float) -> int:
        """The dot row (from the top) of a value."""
        return rows - 1 - min(rows - 1, max(0, round(value / top * (rows - 1))))

    def column_of(at: float) -> int:
        """The dot column of a point's place, each point in the middle of its share of the width."""
        return min(2 * plot_width - 1, max(0, int((at + 0.5) * 2 * plot_width / count)))

    bits = [[0] * plot_width for _ in range(height)]
    ink: list[list[Colour | None]] = [[None] * plot_width for _ in range(height)]
    for line in lines:
        points = [(column_of(i), row_of(value)) for i, value in enumerate(line.values)]
        if not points:
            continue
        for (x0, y0), (x1, y1) in list(pairwise(points)) or [(points[0], points[0])]:
            for x, y in _segment(x0, y0, x1, y1):
                bits[y // 4][x // 2] |= _DOTS[y % 4][x % 2]
                ink[y // 4][x // 2] = line.colour
    under: list[list[tuple[str, Colour] | None]] = [[None] * plot_width for _ in range(height)]
    for rule in rules:
        if 0 <= rule.value <= top:
            under[row_of(rule.value) // 4] = [("─", rule.colour)] * plot_width
    for mark in marks:
        column = column_of(mark.at) // 2
        for row in under:
            row[column] = ("│", mark.colour)
    labels = {row_of(value) // 4: label for value, label in ticks if 0 <= value <= top}

    text = Text(no_wrap=True, overflow="crop")
    for y in range(height):
        if y:
            text.append("\n")
        label = labels.get(y)
        text.append((label or "").rjust(label_width))
        text.append("┤" if label is not None else "│", _AXIS)
        cells: list[tuple[str, Colour | None]] = []
        for x in range(plot_width):
            colour = ink[y][x]
            if colour is not None:
                cells.append((chr(0x2800 + bits[y][x]), colour))
            else:
                cells.append(under[y][x] or (" ", None))
        _append_runs(text, cells)
    return text


def _segment(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """The dots from one point to the next, both included (Bresenham's line)."""
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    error = dx + dy
    dots = [(x0, y0)]
    while (x0, y0) != (x1, y1):
        twice = 2 * error
        if twice >= dy:
            error += dy
            x0 += sx
        if twice <= dx:
            error += dx
            y0 += sy
        dots.append((x0, y0))
    return dots


def _append_runs(text: Text, cells: list[tuple[str, Colour | None]]) -> None:
    """Cells of one colour side by side as one span (a row of ~46 cells is a few spans, not 46)."""
    start = 0
    for end in range(1, len(cells) + 1):
        if end == len(cells) or cells[end][1] != cells[start][1]:
            colour = cells[start][1]
            run = "".join(char for char, _ in cells[start:end])
            text.append(run, Style(color=Color.from_rgb(*colour)) if colour else None)
            start = end
