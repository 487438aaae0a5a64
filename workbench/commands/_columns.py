"""Plain aligned columns for the headless commands' text output: each column as wide as its widest cell, two
spaces between, numbers to the right, the last column left as it is (no trailing spaces)."""

from __future__ import annotations

from collections.abc import Sequence

GAP = "  "


def columns(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """The lines of a table: ``header`` then ``rows``; the columns numbered in ``right`` are aligned right."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = []
    for row in table:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append(GAP.join(cells).rstrip())
    return lines
