"""Context size per request over the session: the sawtooth, drawn in braille (:mod:`.braille_chart`).

Two series, what the API reported and what the engine estimated just before
each request, then the live estimate of the next request; compactions and
prunes (offloads, archives) are vertical marks where the context dropped, and
the warn / compact thresholds are horizontal lines.
"""

from __future__ import annotations

import math

from rich.style import Style
from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from workbench.tui.timeline_series import TimelineData
from workbench.tui.widgets.braille_chart import Line, Mark, Rule, draw

REPORTED = (122, 162, 247)
ESTIMATED = (224, 175, 104)
DROP_COLOURS = {
    "compaction": (247, 118, 142),
    "prune": (255, 158, 100),
    "offload": (125, 207, 255),
    "archive": (192, 153, 255),
}
SHORT_KINDS = {"compaction": "compact", "prune": "prune", "offload": "offload", "archive": "archive"}
WARN_LINE = (110, 90, 60)
COMPACT_LINE = (120, 70, 60)


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def nice_ticks(top: int, count: int = 4) -> list[int]:
    """Round tick values from 0 up to about ``top``."""
    if top <= 0:
        return [0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [int(step * i) for i in range(1, count + 1) if step * i <= top * 1.05] or [int(step)]


def short(value: int) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return str(value)


class Timeline(Widget):
    """The chart; set :attr:`data` and it redraws only when the series change (the live estimate of the
    next request is in the subtitle, so a budget change does not redraw the chart)."""

    DEFAULT_CSS = """
    Timeline {
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        border-subtitle-color: $text-muted;
    }
    """

    data: reactive[TimelineData | None] = reactive(None, always_update=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._cache: tuple[tuple[object, ...], int, int, Text] | None = None

    def on_mount(self) -> None:
        self._label()

    def watch_data(self, old: TimelineData | None, new: TimelineData | None) -> None:
        self._label()
        if old is not None and new is not None and old.key == new.key:
            return  # only the next request's estimate moved: it is in the title, the chart stays
        self._cache = None
        self.refresh()

    def _label(self) -> None:
        """The title carries the next request's estimate (to 100 tokens) and the session's cost so far; the
        subtitle is the legend and what the latest request cost."""
        data = self.data
        title = "Context per request"
        if data is not None and data.next_estimate is not None and data.reported:
            title += f" · next ≈{data.next_estimate / 1000:.1f}k"
        if data is not None and data.cost:
            title += f" · {data.cost}"
        said = "scripted" if data is not None and data.scripted else "reported"  # the demo's sizes: no API's
        marks = [f"[{hex_colour(REPORTED)}]━[/]{said}", f"[{hex_colour(ESTIMATED)}]━[/]est."]
        kinds = {d.kind for d in data.drops} if data is not None else set()
        marks += [f"[{hex_colour(DROP_COLOURS[k])}]│[/]{SHORT_KINDS[k]}" for k in DROP_COLOURS if k in kinds]
        if data is not None and data.last_cost:
            marks.append(f"· last {data.last_cost}")
        subtitle = " ".join(marks)
        if title != self.border_title:
            self.border_title = title
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle

    def render(self) -> RenderResult:
        data = self.data
        if data is None or not data.reported:
            message = "No model requests yet." if data is not None else ""
            return Text(message, style=Style(italic=True, dim=True))
        key = (data.key, self.content_size.width, self.content_size.height)
        if self._cache is not None and self._cache[:3] == key:
            return self._cache[3]
        rendered = chart(data, self.content_size.width, self.content_size.height)
        self._cache = (*key, rendered)
        return rendered


def chart(data: TimelineData, width: int, height: int) -> Text:
    """The estimate under what the API reported (the truth on top), the drops as marks, the warn and compact
    thresholds as rules when they are near the requests' sizes."""
    top = max([*data.reported, *data.estimated, 1])
    ticks = nice_ticks(top)
    rules = [Rule(at, colour) for at, colour in ((data.warn_at, WARN_LINE), (data.compact_at, COMPACT_LINE))
             if at and at <= top * 1.1]
    marks = [Mark(drop.at, DROP_COLOURS.get(drop.kind, DROP_COLOURS["prune"])) for drop in data.drops]
    lines = [Line(data.estimated, ESTIMATED), Line(data.reported, REPORTED)]
    return draw(width, height, lines, top=max(top, ticks[-1]) * 1.05, ticks=[(t, short(t)) for t in ticks],
                marks=marks, rules=rules)
