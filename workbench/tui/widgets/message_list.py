"""The transcript as a virtualised list: one painted line per visible message.

A Line API ``ScrollView``: ``render_line`` builds only the rows on screen, and
built rows are kept in an LRU cache, so 100 or 100,000 messages cost the same
to scroll. No widget is created per message. A filter or sort is an ``order``
(transcript indices to show), computed elsewhere in a worker.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from workbench.tui.widgets import format as fmt
from workbench.tui.widgets.rows import MessageRows, Row

MOVE = Binding.Group("Move")
ROLE_WIDTH = 9
TOKENS_WIDTH = 7
SHARE_WIDTH = 6
BADGES_WIDTH = 11
HEAVIEST_LIMIT = 1000
SUBAGENT_STYLE = Style(color="#bb9af7")
"""The peak context of a sub-agent, before the preview of the message that started it."""


@dataclass(frozen=True, slots=True)
class Columns:
    """Column widths for one list width; the preview takes what is left."""

    position: int
    preview: int

    @classmethod
    def fit(cls, width: int, rows: int) -> Columns:
        position = max(3, len(str(rows)))
        fixed = 1 + position + 2 + ROLE_WIDTH + 1 + TOKENS_WIDTH + 1 + SHARE_WIDTH + 2 + BADGES_WIDTH + 1
        return cls(position, max(0, width - fixed))


class MessageList(ScrollView, can_focus=True):
    """Every transcript message, with its tokens in context, share, badges and a preview."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", key_display="↑", id="messages.cursor_up", group=MOVE,
                tooltip="Select the message above"),
        Binding("down", "cursor_down", "Down", key_display="↓", id="messages.cursor_down", group=MOVE,
                tooltip="Select the message below"),
        Binding("pageup", "page_up", "Page up", key_display="PgUp", id="messages.page_up", group=MOVE),
        Binding("pagedown", "page_down", "Page down", key_display="PgDn", id="messages.page_down", group=MOVE),
        Binding("home", "first", "First", key_display="Home", id="messages.first", group=MOVE,
                tooltip="Select the first message"),
        Binding("end", "last", "Last", key_display="End", id="messages.last", group=MOVE,
                tooltip="Select the last message"),
        Binding("enter,tab", "focus_detail", "Detail", id="messages.focus_detail",
                tooltip="Read the selected message in the detail pane (scroll it there)"),
        Binding("right_square_bracket", "next_pinned", "Next pinned", key_display="]", id="messages.next_pinned",
                tooltip="Select the next pinned message"),
        Binding("left_square_bracket", "previous_pinned", "Previous pinned", key_display="[",
                id="messages.previous_pinned", show=False, tooltip="Select the previous pinned message"),
        Binding("h", "next_heaviest", "Next heaviest", id="messages.next_heaviest",
                tooltip="Select the message with the most tokens in context; again for the next heaviest"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "message-list--header",
        "message-list--cursor",
        "message-list--cursor-blurred",
        "message-list--excluded",
        "message-list--number",
        "message-list--empty",
    }

    DEFAULT_CSS = """
    MessageList {
        overflow-x: hidden;
        background: $surface;
        & > .message-list--header { background: $panel; color: $text-muted; text-style: bold; }
        & > .message-list--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
        & > .message-list--cursor-blurred { background: $block-cursor-blurred-background 60%; }
        & > .message-list--excluded { color: $text-disabled; }
        & > .message-list--number { color: $text-muted; }
        & > .message-list--empty { color: $text-muted; text-style: italic; }
    }
    """

    cursor: reactive[int] = reactive(0, init=False)

    class Highlighted(Message):
        """The cursor moved to another row."""

        def __init__(self, row: Row | None) -> None:
            super().__init__()
            self.row = row

    class DetailRequested(Message):
        """The user asked to read the selected message in the detail pane."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._rows: MessageRows | None = None
        self._order: list[int] | None = None
        self._heavy: list[int] | None = None
        self._heavy_rank = -1
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(1024)
        self._painted: list[tuple[object, ...]] = []
        """Painted rows by what they show, so a new screen_state repaints only rows whose figures changed."""

    # --- data ---------------------------------------------------------------

    def set_rows(
        self, rows: MessageRows, order: list[int] | None = None, *, keep: str | None = None, follow: bool = False
    ) -> None:
        """Show a new table (``order``: the transcript indices to show). The cursor stays on the message
        ``keep`` if it is still shown, goes to the last row when ``follow``, else to the first."""
        if not self._same_session(rows):
            self._strips.clear()
        self._rows = rows
        self._order = order
        self._heavy = None
        self._heavy_rank = -1
        self._grow(Size(0, self.row_count + 1))
        target = self.visual_index(keep) if keep is not None else None
        if follow:
            target = max(0, self.row_count - 1)
        if target is None:
            self.scroll_to(0, 0, animate=False)
            target = 0
        moved = target != self.cursor
        self.set_reactive(MessageList.cursor, target)
        self._scroll_to_cursor()
        painted = self._visible_keys()
        if moved or painted != self._painted:  # an event that changes nothing on screen costs no repaint
            self._painted = painted
            self.refresh()
        self.post_message(self.Highlighted(self.selected_row))

    def _grow(self, size: Size) -> None:
        """A new virtual size; without a new screen layout when the scrollbar stays (a live session's
        new message would otherwise re-render every widget on screen). Public API: ``set_reactive`` on the
        public ``virtual_size`` reactive and the scrollbar's public ``window_virtual_size``, which is how
        Textual's own widgets change their virtual size without a layout."""
        if size == self.virtual_size:
            return
        viewport = self.scrollable_content_region.height
        if self.show_vertical_scrollbar and min(size.height, self.virtual_size.height) > viewport:
            self.set_reactive(Widget.virtual_size, size)
            self.vertical_scrollbar.window_virtual_size = size.height
        else:
            self.virtual_size = size

    def _same_session(self, rows: MessageRows) -> bool:
        """Whether ``rows`` are a newer table of the session shown (so painted rows can be reused): loaded
        rows of one session share their message objects."""
        old = self._rows
        return old is not None and len(rows) > 0 and len(old) > 0 and rows.messages[0] is old.messages[0]

    @property
    def rows(self) -> MessageRows | None:
        return self._rows

    @property
    def row_count(self) -> int:
        if self._rows is None:
            return 0
        return len(self._order) if self._order is not None else len(self._rows)

    @property
    def at_end(self) -> bool:
        """The cursor is on the last row (a live session keeps it there as messages arrive)."""
        return self.cursor >= self.row_count - 1

    def transcript_index(self, visual: int) -> int:
        return self._order[visual] if self._order is not None else visual

    def visual_index(self, message_id: str) -> int | None:
        if self._rows is None:
            return None
        if self._shown_at(self.cursor, message_id):
            return self.cursor  # still where it was: every engine event asks this, and a new table has no index yet
        index = self._rows.index_of(message_id)
        if index is None or self._order is None:
            return index
        try:
            return self._order.index(index)
        except ValueError:
            return None

    def _shown_at(self, visual: int, message_id: str) -> bool:
        rows = self._rows
        if rows is None or not 0 <= visual < self.row_count:
            return False
        return rows.message_id(self.transcript_index(visual)) == message_id

    @property
    def selected_row(self) -> Row | None:
        if self._rows is None or not self.row_count:
            return None
        return self._rows.row(self.transcript_index(self.cursor))

    def move_to(self, message_id: str) -> bool:
        """Put the cursor on a message; False when it is not shown."""
        target = self.visual_index(message_id)
        if target is not None:
            self.cursor = target
        return target is not None

    # --- cursor -------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.row_count - 1))

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.Highlighted(self.selected_row))

    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 2)

    def _scroll_to_cursor(self) -> None:
        if not self.scrollable_content_region.height:
            return  # not on screen (covered while the engine works): the resize that shows it again scrolls
        visible = max(1, self.scrollable_content_region.height - 1)
        top = round(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_page_up(self) -> None:
        self.cursor -= self._page

    def action_page_down(self) -> None:
        self.cursor += self._page

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = self.row_count - 1

    def action_focus_detail(self) -> None:
        self.post_message(self.DetailRequested())

    def _find_pinned(self, step: int) -> None:
        rows, count = self._rows, self.row_count
        if rows is None or not count:
            return
        for offset in range(1, count + 1):
            visual = (self.cursor + step * offset) % count
            if "PERSIST" in rows.badges(self.transcript_index(visual)):
                self.cursor = visual
                return
        self.notify("No pinned message here.", severity="warning", timeout=3)

    def action_next_pinned(self) -> None:
        self._find_pinned(1)

    def action_previous_pinned(self) -> None:
        self._find_pinned(-1)

    def action_next_heaviest(self) -> None:
        """The heaviest message shown, then the next heaviest on each press (wrapping)."""
        rows = self._rows
        if rows is None or not self.row_count:
            return
        if self._heavy is None:
            shown = range(self.row_count)
            self._heavy = heapq.nlargest(HEAVIEST_LIMIT, shown, key=lambda v: rows.tokens(self.transcript_index(v)))
            self._heavy = [v for v in self._heavy if rows.tokens(self.transcript_index(v)) >= 0]
        if not self._heavy:
            self.notify("No message here is in context.", severity="warning", timeout=3)
            return
        self._heavy_rank = (self._heavy_rank + 1) % len(self._heavy)
        self.cursor = self._heavy[self._heavy_rank]

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1 and self.row_count:
            self.cursor = round(self.scroll_y) + offset.y - 1

    def on_resize(self) -> None:
        self._scroll_to_cursor()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    # --- painting -----------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            return self._header(width)
        index = round(self.scroll_y) + y - 1
        if self._rows is None or index >= self.row_count:
            if index == 0 and self._rows is not None:
                style = self.get_component_rich_style("message-list--empty", partial=True)
                empty = "No message matches the filter." if self._order is not None else "No messages in this session."
                return self._strip(Text(f"  {empty}", style=style), width, base)
            return Strip.blank(width, base)
        row = self._rows.row(self.transcript_index(index))
        key = self._key(row, index, width)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._row_strip(row, width, index == self.cursor)
            self._strips[key] = strip
        return strip

    def _key(self, row: Row, index: int, width: int) -> tuple[object, ...]:
        """Everything a painted row depends on."""
        selected = index == self.cursor
        digits = len(str(len(self._rows))) if self._rows is not None else 0
        return (row.message_id, row.position, digits, width, selected, selected and self.has_focus, row.tokens,
                fmt.percent(row.share), row.badges, row.excluded, row.subagent_peak)

    def _visible_keys(self) -> list[tuple[object, ...]]:
        if self._rows is None:
            return []
        top = round(self.scroll_y)
        width = self.scrollable_content_region.width
        shown = range(top, min(self.row_count, top + self.scrollable_content_region.height))
        return [(index, self._key(self._rows.row(self.transcript_index(index)), index, width)) for index in shown]

    def _strip(self, text: Text, width: int, base: Style) -> Strip:
        text.truncate(width, overflow="ellipsis", pad=True)
        return Strip(text.render(self.app.console), width).apply_style(base)

    def _header(self, width: int) -> Strip:
        cols = Columns.fit(width, len(self._rows) if self._rows is not None else 0)
        style = self.get_component_rich_style("message-list--header", partial=True)
        text = Text(style=style, no_wrap=True)
        text.append(f" {'#':>{cols.position}}  {'role':<{ROLE_WIDTH}} {'tokens':>{TOKENS_WIDTH}} ")
        text.append(f"{'share':>{SHARE_WIDTH}}  {'badges':<{BADGES_WIDTH}} preview")
        return self._strip(text, width, self.rich_style)

    def _row_strip(self, row: Row, width: int, selected: bool) -> Strip:
        cols = Columns.fit(width, len(self._rows) if self._rows is not None else 0)
        if selected:
            name = "message-list--cursor" if self.has_focus else "message-list--cursor-blurred"
            row_style = self.get_component_rich_style(name, partial=True)
        else:
            row_style = Style()
        excluded = row.excluded is not None
        dim = self.get_component_rich_style("message-list--excluded", partial=True) if excluded else Style()
        number = self.get_component_rich_style("message-list--number", partial=True)
        role = row.role
        text = Text(style=row_style, no_wrap=True)
        text.append(f" {row.position:>{cols.position}}  ", number + dim)
        text.append(f"{role:<{ROLE_WIDTH}} ", fmt.ROLE_STYLES.get(role, Style()) + dim)
        text.append(f"{fmt.tokens(row.tokens):>{TOKENS_WIDTH}} ", dim)
        text.append(f"{fmt.percent(row.share):>{SHARE_WIDTH}}  ", dim)
        badges = fmt.badge_text(row.badges, row.exclusion_label)
        badges.truncate(BADGES_WIDTH, overflow="ellipsis", pad=True)
        text.append_text(badges)
        text.append(" ")
        if row.subagent_peak and cols.preview:
            text.append(f"⤷ sub-agent peak {fmt.tokens(row.subagent_peak)} ", SUBAGENT_STYLE + dim)
        text.append(fmt.clean(row.preview(cols.preview)) if cols.preview else "", dim)
        return self._strip(text, width, self.rich_style)
