"""The selected message in full, read-only: text, thinking, tool input and tool output.

Only one message is ever rendered here, so its full text can be shown without
virtualisation; a single part longer than ``PART_CHAR_LIMIT`` is cut on screen
(never in the transcript) to keep one runaway tool output from stalling the UI.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from workbench.engine.models import ImagePart, Part, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from workbench.tui.widgets import format as fmt
from workbench.tui.widgets.rows import Row

PART_CHAR_LIMIT = 100_000
LABEL = Style(color="#737aa2")
RULE = Style(color="#3b4261")


class MessageDetail(VerticalScroll, can_focus=True):
    """Scrollable view of one message; the list owns the selection and tells this pane."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,shift+tab", "back", "Back to list", id="detail.back"),
    ]

    DEFAULT_CSS = """
    MessageDetail {
        background: $surface;
        padding: 0 1;
        & > #detail-body { width: 1fr; }
    }
    """

    class BackRequested(Message):
        """The user wants the message list again."""

    def compose(self) -> ComposeResult:
        yield Static(Text("No message selected.", style="italic"), id="detail-body")

    def show(self, row: Row | None, tool_calls: Mapping[str, tuple[str, int]] | None = None) -> None:
        """Render ``row`` (or a placeholder) and scroll back to the top."""
        body = self.query_one("#detail-body", Static)
        if row is None:
            self.border_title = "Message"
            body.update(Text("No message selected.", style="italic"))
        else:
            self.border_title = f"Message #{row.position}"
            body.update(render_row(row, tool_calls or {}))
        self.scroll_home(animate=False)

    def action_back(self) -> None:
        self.post_message(self.BackRequested())


def _facts(row: Row) -> Table:
    message = row.message
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style=LABEL, no_wrap=True)
    grid.add_column()
    kind = "" if message.kind == "message" else " · " + message.kind.replace("_", " ")
    grid.add_row("role", Text(message.role, fmt.ROLE_STYLES.get(message.role, Style()) + Style(bold=True)) + Text(kind))
    if row.tokens is not None:
        grid.add_row("in context", f"{fmt.tokens(row.tokens)} tokens · {fmt.percent(row.share)} of the context")
    else:
        grid.add_row("in context", Text(f"no ({row.exclusion_label})", fmt.EXCLUDED_STYLE))
    badges = fmt.badge_text(row.badges, None)
    if badges:
        grid.add_row("badges", badges)
    if message.created_at is not None:
        grid.add_row("time", message.created_at.strftime("%Y-%m-%d %H:%M:%S %Z").strip())
    grid.add_row("id", message.id)
    if message.usage is not None:
        usage = message.usage
        request = f"{usage.total_input:,} input tokens"
        if usage.cache_hit_rate is not None:
            request += f" ({usage.cache_hit_rate:.0%} cached)"
        request += f" · {usage.output_tokens:,} output"
        grid.add_row("request", request)
        if usage.model:
            grid.add_row("model", usage.model)
    return grid


def render_row(row: Row, tool_calls: Mapping[str, tuple[str, int]]) -> RenderableType:
    message = row.message
    blocks: list[RenderableType] = [_facts(row)]
    model_parts = row.item.parts if row.item is not None else ()
    for position, part in enumerate(message.parts):
        seen = model_parts[position] if position < len(model_parts) else None
        blocks.extend(_part(part, seen if seen is not None and seen != part else None, tool_calls))
    if not message.parts:
        blocks.append(Text("(no content)", style=LABEL))
    return Group(*blocks)


def _rule(title: str, style: Style = LABEL) -> Rule:
    return Rule(Text(title, style=style), align="left", style=RULE)


def _body(text: str, style: Style | None = None) -> Text:
    text = fmt.clean(text)
    if len(text) > PART_CHAR_LIMIT:
        hidden = len(text) - PART_CHAR_LIMIT
        text = text[:PART_CHAR_LIMIT] + f"\n… {hidden:,} more characters not shown (the transcript keeps them)"
    return Text(text, style=style or Style())


def _part(part: Part, model_sees: Part | None, tool_calls: Mapping[str, tuple[str, int]]) -> list[RenderableType]:
    """A titled section per part; ``model_sees`` is set when the overlay changed what the model gets."""
    match part:
        case TextPart(text=text):
            out: list[RenderableType] = [_rule("text"), _body(text)]
        case ThinkingPart(redacted=True):
            out = [_rule("thinking (redacted)"), Text("The provider returned this reasoning encrypted.", style=LABEL)]
        case ThinkingPart(text=text):
            out = [_rule("thinking"), _body(text, Style(italic=True, color="#a9b1d6"))]
        case ToolUsePart(name=name, id=tool_id, input=tool_input):
            rendered = json.dumps(tool_input, indent=2, ensure_ascii=False, default=str)
            out = [_rule(f"tool call · {name}", Style(color="#ff9e64")), Text(tool_id, style=LABEL), _body(rendered)]
        case ToolResultPart(text=text, is_error=is_error, tool_use_id=tool_id, images=images):
            name, caller = tool_calls.get(tool_id, ("unknown tool", 0))
            title = f"tool result · {name}" + (f" (call in #{caller})" if caller else "") + (" · error" if is_error else "")
            style = fmt.BADGE_STYLES["error"] if is_error else Style(color="#9ece6a")
            out = [_rule(title, style), _body(text) if text else Text("(empty output)", style=LABEL)]
            out.extend(Text(f"[image {i.media_type}, {i.byte_size:,} bytes]", style=LABEL) for i in images)
        case ImagePart(media_type=media, byte_size=size, name=name):
            out = [_rule("image"), Text(f"{name or 'image'} · {media} · {size:,} bytes", style=LABEL)]
        case _:
            out = [_rule(part.kind), Text(repr(part))]
    if model_sees is not None and isinstance(model_sees, ToolResultPart):
        out.append(Text("The model sees instead: " + fmt.clean(model_sees.text), style=fmt.BADGE_STYLES["pruned"]))
    return out
