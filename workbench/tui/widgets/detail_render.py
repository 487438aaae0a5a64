"""How one message is drawn in the detail pane: facts, then a titled section per part.

Syntax highlighting where it helps: tool input as JSON (multi-line values such
as a file's new content shown below it as code), a file read's output in the
file's language, fenced code in text. A part the overlay changed (pruned,
offloaded) is shown twice: what the model sees, then the original.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.style import Style
from rich.table import Table
from rich.text import Text

from workbench.engine.context.effective import PINNED_WHY
from workbench.engine.transcript.models import ImagePart, Part, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from workbench.tui.widgets import format as fmt
from workbench.tui.widgets.row_lookups import CallRef
from workbench.tui.widgets.rows import Row

PART_CHAR_LIMIT = 100_000
HIGHLIGHT_CHAR_LIMIT = 40_000
"""Longer code is shown plain: highlighting it would stall the UI for little gain."""
LABEL = Style(color="#737aa2")
RULE = Style(color="#3b4261")
SYNTAX_THEME = "monokai"
PATH_KEYS = ("file_path", "path", "notebook_path", "filePath")
NUMBERED_LINE = re.compile(r"^\s*(\d+)(?:\t|→)(.*)$")
FENCE = re.compile(r"^```([\w+-]*)\s*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
OFFLOAD_PREFIX = "[Tool result stored"
"""How :func:`workbench.engine.context.projection.offload_reference` starts."""
READ_TOOLS = {"read_file", "read", "view", "cat", "read_result"}


def facts(row: Row) -> Table:
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
    if row.pinned:
        grid.add_row("pinned", PINNED_WHY)
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


def render_row(
    row: Row, tool_calls: Mapping[str, CallRef], extra: RenderableType | None = None, background: str | None = None
) -> RenderableType:
    """``background``: the pane's colour, behind highlighted code."""
    message = row.message
    blocks: list[RenderableType] = [facts(row)]
    if extra is not None:
        blocks.append(extra)
    model_parts = row.item.parts if row.item is not None else ()
    for position, part in enumerate(message.parts):
        seen = model_parts[position] if position < len(model_parts) else None
        blocks.extend(_part(part, seen if seen is not None and seen != part else None, tool_calls, background))
    if not message.parts:
        blocks.append(Text("(no content)", style=LABEL))
    return Group(*blocks)


def rule(title: str, style: Style = LABEL) -> Rule:
    return Rule(Text(title, style=style), align="left", style=RULE)


def body(text: str, style: Style | None = None) -> Text:
    text = fmt.clean(text)
    if len(text) > PART_CHAR_LIMIT:
        hidden = len(text) - PART_CHAR_LIMIT
        text = text[:PART_CHAR_LIMIT] + f"\n… {hidden:,} more characters not shown (the transcript keeps them)"
    return Text(text, style=style or Style())


def code(text: str, lexer: str, start_line: int = 1, line_numbers: bool = False,
         background: str | None = None) -> RenderableType:
    text = fmt.clean(text)
    if len(text) > HIGHLIGHT_CHAR_LIMIT:
        return body(text)
    from rich.syntax import Syntax  # deferred, with Pygments: 15 ms of start-up, and many messages hold no code

    return Syntax(text, lexer, theme=SYNTAX_THEME, word_wrap=True, background_color=background,
                  line_numbers=line_numbers, start_line=start_line)


def lexer_for(path: str | None) -> str | None:
    if not path:
        return None
    from rich.syntax import Syntax

    lexer = Syntax.guess_lexer(path, "")
    return None if lexer in ("default", "text") else lexer


def _path_of(tool_input: Mapping[str, Any]) -> str | None:
    return next((v for k in PATH_KEYS if isinstance(v := tool_input.get(k), str) and v), None)


def text_with_code(text: str, style: Style | None = None, background: str | None = None) -> list[RenderableType]:
    """Plain text, with fenced code blocks highlighted in their language."""
    out: list[RenderableType] = []
    last = 0
    for match in FENCE.finditer(text):
        before = text[last:match.start()].strip("\n")
        if before:
            out.append(body(before, style))
        out.append(code(match.group(2).rstrip("\n"), match.group(1) or "text", background=background))
        last = match.end()
    rest = text[last:].strip("\n") if out else text
    if rest or not out:
        out.append(body(rest, style))
    return out


def tool_input(call: ToolUsePart, background: str | None = None) -> list[RenderableType]:
    """The input as highlighted JSON; multi-line strings (a file's content, an edit) below it as code."""
    long_values = {k: v for k, v in call.input.items() if isinstance(v, str) and "\n" in v}
    shown: dict[str, Any] = {k: (f"<{len(v):,} characters, below>" if k in long_values else v)
                             for k, v in call.input.items()}
    out: list[RenderableType] = [
        code(json.dumps(shown, indent=2, ensure_ascii=False, default=str), "json", background=background)]
    lexer = lexer_for(_path_of(call.input)) or "text"
    for key, value in long_values.items():
        out.append(Text(f"{key}:", style=LABEL))
        out.append(code(value, lexer, background=background))
    return out


def tool_output(text: str, call: CallRef | None, background: str | None = None) -> RenderableType:
    """A file read in the file's language (its line numbers kept), JSON as JSON, the rest as text."""
    stripped = text.strip()
    lexer = lexer_for(_path_of(call.input)) if call is not None and call.name.lower() in READ_TOOLS else None
    if lexer is not None:
        lines = text.splitlines()
        numbered = []
        for line in lines:  # the numbered file, then maybe a note the tool added after it
            match = NUMBERED_LINE.match(line)
            if match is None:
                break
            numbered.append(match)
        if numbered and len(numbered) * 2 >= len(lines):
            source = "\n".join(m.group(2) for m in numbered)
            shown = code(source, lexer, start_line=int(numbered[0].group(1)), line_numbers=True, background=background)
            rest = "\n".join(lines[len(numbered):]).strip("\n")
            return Group(shown, body(rest)) if rest else shown
        return code(text, lexer, background=background)
    if stripped[:1] in "{[" and stripped[-1:] in "}]" and len(stripped) <= HIGHLIGHT_CHAR_LIMIT:
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return body(text)
        return code(json.dumps(parsed, indent=2, ensure_ascii=False), "json", background=background)
    return body(text)


def _part(
    part: Part, model_sees: Part | None, tool_calls: Mapping[str, CallRef], bg: str | None
) -> list[RenderableType]:
    """A titled section per part; ``model_sees`` is set when the overlay changed what the model gets."""
    match part:
        case TextPart(text=text):
            out: list[RenderableType] = [rule("text"), *text_with_code(text, background=bg)]
        case ThinkingPart(redacted=True):
            out = [rule("thinking (redacted)"), Text("The provider returned this reasoning encrypted.", style=LABEL)]
        case ThinkingPart(text=text):
            out = [rule("thinking"), body(text, Style(italic=True, color="#a9b1d6"))]
        case ToolUsePart(name=name, id=tool_id):
            out = [rule(f"tool call · {name}", Style(color="#ff9e64")), Text(tool_id, style=LABEL)]
            if isinstance(model_sees, ToolUsePart):
                out += [rule("what the model sees (pruned)", fmt.BADGE_STYLES["pruned"]), *tool_input(model_sees, bg),
                        rule("original, kept in the transcript")]
            out += tool_input(part, bg)
        case ToolResultPart(text=text, is_error=is_error, tool_use_id=tool_id, images=images):
            call = tool_calls.get(tool_id)
            name = call.name if call is not None else "unknown tool"
            title = f"tool result · {name}" + (f" (call in #{call.position})" if call else "") + (" · error" if is_error else "")
            style = fmt.BADGE_STYLES["error"] if is_error else Style(color="#9ece6a")
            out = [rule(title, style)]
            if isinstance(model_sees, ToolResultPart):
                offloaded = model_sees.text.startswith(OFFLOAD_PREFIX)
                label = "offloaded: a reference" if offloaded else "pruned: a placeholder"
                badge = fmt.BADGE_STYLES["offloaded" if offloaded else "pruned"]
                out += [rule(f"what the model sees ({label})", badge), body(model_sees.text, badge),
                        rule("original, kept in the transcript" + (" and the blob table" if offloaded else ""))]
            out.append(tool_output(text, call, bg) if text else Text("(empty output)", style=LABEL))
            out.extend(Text(f"[image {i.media_type}, {i.byte_size:,} bytes]", style=LABEL) for i in images)
        case ImagePart(media_type=media, byte_size=size, name=name):
            out = [rule("image"), Text(f"{name or 'image'} · {media} · {size:,} bytes", style=LABEL)]
        case _:
            out = [rule(part.kind), Text(repr(part))]
    return out
