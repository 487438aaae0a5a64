"""What a proxied agent was sent, entry by entry: what makes up each fixed part of its budget.

The budget says "Tool definitions 14,654"; this says which tools (built-in and MCP apart), which system
prompt blocks, which memory files (Claude Code sends CLAUDE.md in a ``<system-reminder>``), which system
reminders, each with its tokens and its text. Read from a stored request, so only a proxied session (whose
requests the proxy stores) has one. Each entry goes in the budget component the projection counts its text
in (``view.section_component``, ``view.text_component``), so a component's entries add up to about its
figure in the budget (before the calibration scales the estimates).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from workbench.engine.context.attribution import MCP_PREFIX, definition_json, sections, system_blocks
from workbench.engine.context.view import REMINDER, section_component, text_component
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.request_blocks import content_blocks
from workbench.engine.transcript.request_store import SentMessage, request_messages, request_prompt
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

Drilled = Literal["system", "memory", "skills", "tools", "tools_mcp", "reminders"]
DRILLED: tuple[Drilled, ...] = get_args(Drilled)
"""The components a breakdown lists, in the budget legend's order."""
NAME_WIDTH = 72
_FILE = re.compile(r"(?m)^Contents of (?P<path>\S[^\n]*?)(?: \([^()\n]*\))?:[ \t]*$")
"""Claude Code's header before each memory file it sends."""
_KEY = re.compile(r"(?m)^# [a-z][A-Za-z0-9]*[ \t]*$")
"""Claude Code's headings between the parts of its context reminder (``# claudeMd``, ``# currentDate``)."""
NO_REQUESTS = "session {session} has no stored requests: only a session recorded by `workbench proxy` or " \
              "`workbench wrap` keeps what the agent was sent"


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing the agent sent: a system block, a memory file, a tool definition, a system reminder."""

    component: Drilled
    name: str
    where: str
    """Where in the request: ``system block 2``, ``tool 14``, ``message #1``."""
    tokens: int
    """Estimated (tiktoken), as the budget counts before calibrating."""
    text: str


@dataclass(frozen=True)
class Breakdown:
    """The entries of one stored request, in the request's order."""

    session_id: str
    seq: int
    model: str | None
    entries: tuple[Entry, ...]

    def of(self, component: str) -> tuple[Entry, ...]:
        return tuple(entry for entry in self.entries if entry.component == component)

    def totals(self) -> dict[str, int]:
        """Tokens by component, every drilled component listed (0 when the request had none)."""
        totals: dict[str, int] = dict.fromkeys(DRILLED, 0)
        for entry in self.entries:
            totals[entry.component] += entry.tokens
        return totals

    def find(self, component: str, name: str) -> Entry:
        """An entry of ``component`` by its name (or a unique start of it), or by its number (1-based). An MCP
        tool is found under ``tools`` by its name too: both are tool definitions."""
        entries = self.of(component)
        if name.isdigit() and 0 < int(name) <= len(entries):
            return entries[int(name) - 1]
        named = [*entries, *self.of("tools_mcp")] if component == "tools" else entries
        exact = [entry for entry in named if entry.name == name]
        found = exact or [entry for entry in named if entry.name.startswith(name)]
        if len(found) != 1:
            what = "no" if not found else f"{len(found)}"
            raise WorkbenchError(f"{what} {component} entries named {name!r} in request {self.seq}: "
                                 f"give a number from 1 to {len(entries)} or a name `workbench components` lists")
        return found[0]


def breakdown(store: Store, session_id: str, seq: int | None = None,
              counter: TokenCounter | None = None) -> Breakdown:
    """The entries of request ``seq`` of a proxied session (default: its latest)."""
    seq = latest_seq(store, session_id) if seq is None else seq
    try:
        system, tools = request_prompt(store, session_id, seq)
        messages = request_messages(store, session_id, seq)
    except KeyError as exc:
        raise WorkbenchError(str(exc.args[0])) from None
    row = store.connection.execute("SELECT model FROM requests WHERE session_id = ? AND seq = ?",
                                   [session_id, seq]).fetchone()
    counter = counter or TokenCounter()
    entries = [*system_entries(counter, system), *tool_entries(counter, tools), *message_entries(counter, messages)]
    return Breakdown(session_id=session_id, seq=seq, model=row[0] if row else None, entries=tuple(entries))


def latest_seq(store: Store, session_id: str) -> int:
    row = store.connection.execute("SELECT max(seq) FROM requests WHERE session_id = ?", [session_id]).fetchone()
    if row is None or row[0] is None:
        raise WorkbenchError(NO_REQUESTS.format(session=session_id))
    return int(row[0])


def title(text: str) -> str:
    """The first line that says something (tags and blank lines skipped), cut to fit a list."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line and not (line.startswith("<") and line.endswith(">")):
            return line if len(line) <= NAME_WIDTH else line[:NAME_WIDTH - 1] + "…"
    return "(empty)"


def system_entries(counter: TokenCounter, system: Any) -> Iterator[Entry]:
    """One entry per system block (its plain prompt sections), and one per memory or skills section in it."""
    for number, block in enumerate(system_blocks(system), start=1):
        where = f"system block {number}"
        plain: list[str] = []
        others: list[Entry] = []
        for section in sections(str(block.get("text", ""))):
            component = section_component(section)
            if component == "system":
                plain.append(section)
            else:
                kind: Drilled = "memory" if component == "memory" else "skills"
                others.extend(memory_entries(counter, section, where) if kind == "memory"
                              else [Entry(kind, title(section), where, counter.count_text(section), section)])
        if plain:
            text = "".join(plain)
            yield Entry("system", title(text), where, counter.count_text(text), text)
        yield from others


def tool_entries(counter: TokenCounter, tools: Sequence[Any]) -> Iterator[Entry]:
    """One entry per tool definition: built-in tools under ``tools``, MCP tools (``mcp__…``) under ``tools_mcp``."""
    for number, tool in enumerate(tools, start=1):
        if not isinstance(tool, Mapping):
            continue
        name = str(tool.get("name", ""))
        component: Drilled = "tools_mcp" if name.startswith(MCP_PREFIX) else "tools"
        yield Entry(component, name, f"tool {number}", counter.count_text(definition_json(tool)), tool_text(tool))


def tool_text(tool: Mapping[str, Any]) -> str:
    """A definition as a person reads it: the description as prose, then the input schema and the rest as JSON."""
    rest = {key: value for key, value in tool.items() if key not in ("name", "description", "cache_control")}
    lines = [str(tool.get("name", "")), "", str(tool.get("description", "")).strip()]
    if rest:
        lines += ["", json.dumps(rest, indent=2, ensure_ascii=False, default=str)]
    return "\n".join(lines)


def message_entries(counter: TokenCounter, messages: Sequence[SentMessage]) -> Iterator[Entry]:
    """The system reminders and memory files the agent put in its messages, and its system-role messages."""
    for position, message in enumerate(messages, start=1):
        where = f"message #{position}"
        for block in content_blocks({"content": message.content}):
            text = block.get("text")
            if block.get("type") != "text" or not isinstance(text, str):
                continue
            component = text_component(message.role, text)
            if component == "memory":
                yield from memory_entries(counter, text, where)
            elif component == "reminders":
                yield Entry("reminders", title(text.lstrip().removeprefix(REMINDER)), where, counter.count_text(text), text)
            elif component == "system":
                yield Entry("system", title(text), where, counter.count_text(text), text)


def memory_entries(counter: TokenCounter, text: str, where: str) -> list[Entry]:
    """One entry per memory file in ``text`` (named by its path), and one for what surrounds them."""
    heads = list(_FILE.finditer(text))
    if not heads:
        return [Entry("memory", title(text.replace(REMINDER, "")), where, counter.count_text(text), text)]
    keys = [match.start() for match in _KEY.finditer(text)]
    entries: list[Entry] = []
    rest: list[str] = [text[:heads[0].start()]]
    for n, head in enumerate(heads):
        end = heads[n + 1].start() if n + 1 < len(heads) else len(text)
        end = min([end, *(k for k in keys if k > head.end())])
        body = text[head.start():end]
        entries.append(Entry("memory", head.group("path"), where, counter.count_text(body), body))
        if n + 1 == len(heads) or end < heads[n + 1].start():
            rest.append(text[end:heads[n + 1].start() if n + 1 < len(heads) else len(text)])
    around = "".join(rest)
    if around.strip():
        entries.append(Entry("memory", "(around the memory files)", where, counter.count_text(around), around))
    return entries


def entry_json(entry: Entry, *, text: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"component": entry.component, "name": entry.name, "where": entry.where,
                           "tokens": entry.tokens}
    if text:
        out["text"] = entry.text
    return out
