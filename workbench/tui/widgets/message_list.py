"""The transcript as a virtualised list: one painted line per visible message.

A Line API ``ScrollView``: ``render_line`` builds only the rows on screen, and
built rows are kept in an LRU cache, so 100 or 100,000 messages cost the same
to scroll. No widget is created per message.
"""

from __future__ import annotations

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

from workbench.engine.projection import preview_text
from workbench.tui.widgets import format as fmt
from workbench.tui.widgets.rows import MessageRows, Row

MOVE = Binding.Group("Move")
ROLE_WIDTH = 9
TOKENS_WIDTH = 7
SHARE_WIDTH = 6
BADGES_WIDTH = 11


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
        Binding("up", "cursor_up", "Up", key_display="↑", id="messages.cursor_up", group=MOVE),
        Binding("down", "cursor_down", "Down", key_display="↓", id="messages.cursor_down", group=MOVE),
        Binding("pageup", "page_up", "Page up", key_display="PgUp", id="messages.page_up", group=MOVE),
        Binding("pagedown", "page_down", "Page down", key_display="PgDn", id="messages.page_down", group=MOVE),
        Binding("home", "first", "First", key_display="Home", id="messages.first", group=MOVE),
        Binding("end", "last", "Last", key_display="End", id="messages.last", group=MOVE),
        Binding("enter,tab", "focus_detail", "Detail", id="messages.focus_detail"),
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
        self._strips: LRUCache[tuple[int, int, bool, bool], Strip] = LRUCache(1024)

    # --- data ---------------------------------------------------------------

    def set_rows(self, rows: MessageRows) -> None:
        """Show a new table and put the cursor on the first message."""
        self._rows = rows
        self._strips.clear()
        self.virtual_size = Size(0, len(rows) + 1)
        self.scroll_to(0, 0, animate=False)
        self.set_reactive(MessageList.cursor, 0)
        self.refresh()
        self.post_message(self.Highlighted(self.selected_row))

    @property
    def row_count(self) -> int:
        return len(self._rows) if self._rows is not None else 0

    @property
    def selected_row(self) -> Row | None:
        return self._rows.row(self.cursor) if self._rows is not None and self.row_count else None

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

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1 and self.row_count:
            self.cursor = round(self.scroll_y) + offset.y - 1

    def on_resize(self) -> None:
        self._scroll_to_cursor()

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self.refresh()

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self.refresh()

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
                return self._strip(Text("  No messages in this session.", style=style), width, base)
            return Strip.blank(width, base)
        selected = index == self.cursor
        key = (index, width, selected, selected and self.has_focus)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._row_strip(self._rows.row(index), width, selected)
            self._strips[key] = strip
        return strip

    def _strip(self, text: Text, width: int, base: Style) -> Strip:
        text.truncate(width, overflow="ellipsis", pad=True)
        return Strip(text.render(self.app.console), width).apply_style(base)

    def _header(self, width: int) -> Strip:
        cols = Columns.fit(width, self.row_count)
        style = self.get_component_rich_style("message-list--header", partial=True)
        text = Text(style=style, no_wrap=True)
        text.append(f" {'#':>{cols.position}}  {'role':<{ROLE_WIDTH}} {'tokens':>{TOKENS_WIDTH}} ")
        text.append(f"{'share':>{SHARE_WIDTH}}  {'badges':<{BADGES_WIDTH}} preview")
        return self._strip(text, width, self.rich_style)

    def _row_strip(self, row: Row, width: int, selected: bool) -> Strip:
        cols = Columns.fit(width, self.row_count)
        if selected:
            name = "message-list--cursor" if self.has_focus else "message-list--cursor-blurred"
            row_style = self.get_component_rich_style(name, partial=True)
        else:
            row_style = Style()
        excluded = row.excluded is not None
        dim = self.get_component_rich_style("message-list--excluded", partial=True) if excluded else Style()
        number = self.get_component_rich_style("message-list--number", partial=True)
        role = row.message.role
        text = Text(style=row_style, no_wrap=True)
        text.append(f" {row.position:>{cols.position}}  ", number + dim)
        text.append(f"{role:<{ROLE_WIDTH}} ", fmt.ROLE_STYLES.get(role, Style()) + dim)
        text.append(f"{fmt.tokens(row.tokens):>{TOKENS_WIDTH}} ", dim)
        text.append(f"{fmt.percent(row.share):>{SHARE_WIDTH}}  ", dim)
        badges = fmt.badge_text(row.badges, row.exclusion_label)
        badges.truncate(BADGES_WIDTH, overflow="ellipsis", pad=True)
        text.append_text(badges)
        text.append(" ")
        text.append(fmt.clean(preview_text(row.message.parts, cols.preview)) if cols.preview else "", dim)
        return self._strip(text, width, self.rich_style)
