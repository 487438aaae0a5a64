"""The token budget at a glance: a stacked bar of the window, threshold marks, and a legend.

The bar spans the whole context window: components in ``COMPONENTS`` order,
then free space, then the output reserve at the right end, so the warn /
compact / block marks (shares of the effective window) sit where they apply.
The row under the bar holds the marks and nothing else; what they mean, and the
window the bar spans, is the last line, so no width can put one over the other.
Given a single line (a short terminal), the panel shows the figures and a small
bar on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from workbench.engine.context.breakdown import DRILLED
from workbench.engine.context.budget import COMPONENT_LABELS, COMPONENTS, Budget
from workbench.tui.widgets import format as fmt

COMPONENT_COLOURS: Mapping[str, str] = {
    "system": "#7c6ff0",
    "project": "#db4b9a",
    "memory": "#b4a05a",
    "skills": "#73daca",
    "tools": "#3d7ad6",
    "tools_mcp": "#5a8fe0",
    "reminders": "#e0af68",
    "tokenizer_gap": "#6b7394",
    "user": "#7dcfff",
    "assistant": "#c099ff",
    "thinking": "#8c7bb8",
    "tool_calls": "#ff9e64",
    "tool_results": "#41a6b5",
    "unattributed": "#6b7394",
}
OTHER_COLOUR = "#a9b1d6"
FREE_COLOUR = "#2a2f41"
RESERVE_COLOUR = "#3b4261"
THRESHOLDS: Sequence[tuple[str, str]] = (("warn", "#e0af68"), ("compact", "#ff9e64"), ("block", "#f7768e"))
MIN_BAR = 12
"""Cells below which the one-line panel leaves its bar out."""
MARK_ON_USED = "#16161e"
POLICY_COLOUR = "#9ece6a"
DRILL_STYLES: Mapping[str, Style] = {
    name: Style(meta={"@click": f"screen.breakdown('{name}')"})
    for name in DRILLED
}
"""A click on one of these legend labels lists what makes it up (for a proxied session: the screen's ``B``)."""
"""A threshold already passed is drawn dark on the coloured segment, so it stays visible."""


def allocate(sizes: Sequence[int], total: int, width: int) -> list[int]:
    """Cells per segment: proportional, largest remainder, at least one cell for any non-empty segment."""
    if total <= 0 or width <= 0:
        return [0] * len(sizes)
    exact = [size * width / total for size in sizes]
    cells = [int(x) for x in exact]
    for i, size in enumerate(sizes):
        if size > 0 and cells[i] == 0:
            cells[i] = 1
    spare = width - sum(cells)
    order = sorted(range(len(sizes)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for i in order:
        if spare <= 0:
            break
        if sizes[i] > 0:
            cells[i] += 1
            spare -= 1
    while spare < 0:  # minimum cells overshot: take from the biggest segment
        biggest = max(range(len(cells)), key=lambda i: cells[i])
        cells[biggest] -= 1
        spare += 1
    return cells


class BudgetPanel(Widget):
    """Shows one :class:`Budget`; its border and headline change colour at each threshold."""

    DEFAULT_CSS = """
    BudgetPanel {
        height: auto;
        border: round $primary 60%;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: clip;
        &.-warn { border: round #e0af68; }
        &.-compact { border: round #ff9e64; }
        &.-block { border: round #f7768e; }
    }
    """

    LEVEL_CLASSES: ClassVar[tuple[str, ...]] = ("-ok", "-warn", "-compact", "-block")

    budget: reactive[Budget | None] = reactive(None)
    policy: reactive[str] = reactive("", layout=True)
    """What the proxy's policy last did to the session (``ScreenState.policy``), under the source; empty: nothing."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._cached: tuple[Budget, int, str, list[Text]] | None = None
        self._heights: dict[tuple[object, ...], int] = {}
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(64)

    def on_mount(self) -> None:
        if not self.border_title:
            self.border_title = "Context budget"

    def watch_budget(self, old: Budget | None, budget: Budget | None) -> None:
        level = f"-{budget.level}" if budget is not None else None
        if level is None or not self.has_class(level):
            self.remove_class(*self.LEVEL_CLASSES)
            if level is not None:
                self.add_class(level)
        # A new layout only when the height changes: most engine events just repaint.
        width = self.size.width
        before = self._height(old, width) if old is not None else -1
        self.refresh(layout=budget is None or self._height(budget, width) != before)

    def render_line(self, y: int) -> Strip:
        """Line by line, each line's strip kept while it draws the same: a live session redraws the panel on
        every budget change, and most of its lines (the legend's, the marks') are then what they were."""
        width = self.size.width
        lines = self._shown(width)
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        line = lines[y]
        key = (line.plain, tuple(line.spans), line.style, width)
        strip = self._strips.get(key)
        if strip is None:
            line = line.copy()
            line.truncate(width, overflow="crop", pad=True)
            strip = self._strips[key] = Strip(line.render(self.app.console), width).apply_style(self.rich_style)
        return strip

    def _shown(self, width: int) -> list[Text]:
        if self.budget is None:
            return [Text("No session loaded.", style="italic")]
        if self.size.height == 1:
            return [self.one_line(self.budget, width)]
        return self._lines(self.budget, width)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._height(self.budget, width) if self.budget is not None else 1

    def _height(self, budget: Budget, width: int) -> int:
        """Lines for ``width`` as if every figure had as many digits as the window: the panel does not jump
        by a line whenever a figure gains a digit and the legend wraps differently; a function of what is
        shown (which components, flags), not of the figures, so it is the same in every run."""
        shown = tuple(sorted(name for name, tokens in budget.components.items() if tokens > 0))
        key = (shown, width, budget.context_window, budget.known_model, budget.cache_hit_rate is not None,
               budget.deferred_tool_tokens > 0, budget.level, budget.source, len(budget.source_label()), len(self.policy))
        height = self._heights.get(key)
        if height is None:
            big = budget.context_window
            widest = budget.model_copy(update={
                "components": {name: big for name in shown}, "used": big, "free": big, "percent": 100.0,
                "deferred_tool_tokens": big if budget.deferred_tool_tokens else 0,
            })
            height = max(len(self._build(widest, width)), len(self._lines(budget, width)))
            self._heights[key] = height
        return max(height, len(self._lines(budget, width)))

    def _lines(self, budget: Budget, width: int) -> list[Text]:
        """The panel's lines, kept for the last budget and width (an update computes them once)."""
        cached = self._cached
        if cached is not None and cached[0] is budget and cached[1] == width and cached[2] == self.policy:
            return cached[3]
        lines = self._build(budget, width)
        self._cached = (budget, width, self.policy, lines)
        return lines

    def _build(self, budget: Budget, width: int) -> list[Text]:
        width = max(10, width)
        return [*self._headline(budget, width), self._bar(budget, width), self._ticks(budget, width),
                *self._legend(budget, width), *_flow(self._threshold_legend(budget), width, gap=2)]

    def one_line(self, b: Budget, width: int) -> Text:
        """The figures, the level and, in what room is left, the bar with its marks."""
        level = fmt.LEVEL_STYLES[b.level]
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("Context ", Style(bold=True))
        line.append(f"{b.used:,}", level)
        line.append(f" of {b.effective_window:,} · ")
        line.append(f"{b.percent:.1f}%", level)
        line.append("  ● " + fmt.LEVEL_LABELS[b.level].split(" · ")[0], level)
        room = width - line.cell_len - 2
        if room >= MIN_BAR:
            line.append("  ")
            line.append_text(self._bar(b, room))
        return line

    def _headline(self, b: Budget, width: int) -> list[Text]:
        level = fmt.LEVEL_STYLES[b.level]
        figures = Text(no_wrap=True)
        figures.append(f"{b.used:,}", level)
        figures.append(f" of {b.effective_window:,} usable tokens · ")
        figures.append(f"{b.percent:.1f}%", level)
        entries = [figures, Text("● " + fmt.LEVEL_LABELS[b.level], level, no_wrap=True)]
        source = b.source_label()
        if b.cache_hit_rate is not None and len(source) + 30 > width:  # on a line of its own if need be
            entries.append(Text(source, Style(dim=True), no_wrap=True))
            source = f"last request {b.cache_hit_rate:.1%} cached"
        elif b.cache_hit_rate is not None:
            source += f" · last request {b.cache_hit_rate:.1%} cached"
        entries.append(Text(source, Style(dim=True), no_wrap=True))
        if self.policy:
            entries.append(Text(f"⚙ {self.policy}", Style(color=POLICY_COLOUR), no_wrap=True))
        if not b.known_model:
            warning = f"⚠ unknown model: assuming a {b.context_window:,}-token window"
            entries.append(Text(warning, Style(color="#e0af68"), no_wrap=True))
        return _flow(entries, width)

    def _segments(self, b: Budget) -> tuple[list[tuple[str, int]], int]:
        used = [(name, b.components.get(name, 0)) for name in COMPONENTS]
        used += [(name, n) for name, n in b.components.items() if name not in COMPONENTS]
        reserve = max(0, b.context_window - max(b.used, b.effective_window))
        segments = [*used, ("free", b.free), ("output_reserve", reserve)]
        return segments, max(b.context_window, b.used)

    def _bar(self, b: Budget, width: int) -> Text:
        segments, scale = self._segments(b)
        cells = allocate([n for _, n in segments], scale, width)
        marks = self._mark_columns(b, scale, width)
        runs: list[tuple[str, Style]] = []  # (characters, style), one run per stretch of the same look
        column = 0
        for (name, _), count in zip(segments, cells, strict=True):
            colour = self._colour(name)
            fill, style = ("╱", Style(color="#565f89", bgcolor=colour)) if name == "output_reserve" \
                else (" ", Style(bgcolor=colour))
            for _ in range(count):
                mark = marks.get(column)
                if mark is not None:
                    on_used = name not in ("free", "output_reserve")
                    runs.append(("┃", Style(color=MARK_ON_USED if on_used else mark, bgcolor=colour, bold=True)))
                elif runs and runs[-1][1] is style:
                    runs[-1] = (runs[-1][0] + fill, style)
                else:
                    runs.append((fill, style))
                column += 1
        return Text.assemble(*runs, no_wrap=True)

    @staticmethod
    def _colour(name: str) -> str:
        if name == "free":
            return FREE_COLOUR
        if name == "output_reserve":
            return RESERVE_COLOUR
        return COMPONENT_COLOURS.get(name, OTHER_COLOUR)

    @staticmethod
    def _mark_columns(b: Budget, scale: int, width: int) -> dict[int, str]:
        at = {"warn": b.warn_at, "compact": b.compact_at, "block": b.block_at}
        return {min(width - 1, round(at[name] * width / scale)): colour for name, colour in THRESHOLDS}

    def _ticks(self, b: Budget, width: int) -> Text:
        """The marks under the bar, alone on their row."""
        _, scale = self._segments(b)
        marks = self._mark_columns(b, scale, width)
        text = Text(no_wrap=True)
        for column in range(width):
            colour = marks.get(column)
            if colour is None:
                text.append(" ")
            else:
                text.append("▲", Style(color=colour, bold=True))
        return text

    def _threshold_legend(self, b: Budget) -> list[Text]:
        """What each mark means, then the window the bar spans: entries for :func:`_flow`."""
        entries: list[Text] = []
        for name, colour in THRESHOLDS:
            at = {"warn": b.warn_at, "compact": b.compact_at, "block": b.block_at}[name]
            share = 100 * at / b.effective_window if b.effective_window else 0
            entry = Text(no_wrap=True)
            entry.append("▲ ", Style(color=colour, bold=True))
            entry.append(f"{name} {at:,} ({share:.0f}%)", Style(dim=True))
            entries.append(entry)
        entries.append(Text(f"window {b.context_window:,}", Style(dim=True), no_wrap=True))
        return entries

    def _legend(self, b: Budget, width: int) -> list[Text]:
        entries: list[Text] = []
        segments, _ = self._segments(b)
        for name, tokens in segments:
            if tokens <= 0 and name not in ("free", "output_reserve"):
                continue
            entry = Text(no_wrap=True)
            glyph = "▨" if name == "output_reserve" else "■"
            entry.append(glyph + " ", Style(color=self._colour(name) if name != "free" else "#565f89"))
            label = COMPONENT_LABELS.get(name, name.replace("_", " ").capitalize())
            entry.append(label + " ", DRILL_STYLES.get(name))
            entry.append(fmt.tokens(tokens if name != "output_reserve" else b.output_reserve), Style(bold=True))
            if name == "tools" and b.deferred_tool_tokens:
                entry.append(" active", Style(dim=True))
            entries.append(entry)
            if name == "tools" and b.deferred_tool_tokens:
                deferred = Text("◌ ", Style(color=self._colour("tools")), no_wrap=True)
                deferred.append("Tools deferred ")
                deferred.append(fmt.tokens(b.deferred_tool_tokens), Style(bold=True))
                deferred.append(" not sent", Style(dim=True))
                entries.append(deferred)
        return _flow(entries, width)


def _fit(entry: Text, width: int) -> list[Text]:
    """An entry wider than ``width`` broken at its spaces (a word wider than that is cut when drawn)."""
    if entry.cell_len <= width:
        return [entry]
    plain = entry.plain
    cuts: list[int] = []
    start = 0
    while len(plain) - start > width:
        cut = plain.rfind(" ", start, start + width + 1)
        if cut <= start:
            break
        cuts.append(cut + 1)
        start = cut + 1
    pieces = entry.divide(cuts)
    for piece in pieces:
        piece.rstrip()
        piece.no_wrap = True
    return list(pieces)


def _flow(entries: Sequence[Text], width: int, gap: int = 3) -> list[Text]:
    """Pack entries into lines no wider than ``width``, breaking inside an entry only when it is wider."""
    lines: list[Text] = []
    line = Text(no_wrap=True)
    for entry in (piece for whole in entries for piece in _fit(whole, width)):
        needed = entry.cell_len + (gap if line.cell_len else 0)
        if line.cell_len and line.cell_len + needed > width:
            lines.append(line)
            line = Text(no_wrap=True)
            needed = entry.cell_len
        if line.cell_len:
            line.append(" " * gap)
        line.append_text(entry)
    if line.cell_len:
        lines.append(line)
    return lines
