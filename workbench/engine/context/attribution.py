"""Where the fixed part of a real request goes in the budget: its system blocks and tool definitions.

A transcript does not hold an agent's system prompt or tools, so a transcript's budget leaves them
*unattributed*. A request seen on the wire holds both: each system block is split into what it is
where that can be told (base prompt and environment, memory files such as CLAUDE.md, skills), and the
tool definitions into built-in and MCP tools (``mcp__server__tool``), each with its own count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from workbench.engine.context.view import ContextItem, section_component
from workbench.engine.transcript.models import TextPart
from workbench.engine.transcript.request_blocks import RawBlock
from workbench.engine.transcript.tokens import TokenCounter

MCP_PREFIX = "mcp__"
_HEADING = re.compile(r"(?m)^(?=#{1,2} |<(?:env|available_skills|skills)>)")


def system_blocks(system: Any) -> list[RawBlock]:
    """The request's ``system`` as blocks (a bare string is one text block)."""
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    if isinstance(system, list):
        return [block for block in system if isinstance(block, Mapping)]
    return []


def sections(text: str) -> list[str]:
    """A system block's text cut before each top heading (``#``, ``##``) or environment / skills tag: the
    pieces the budget tells apart."""
    return [section for section in _HEADING.split(text) if section]


def system_items(counter: TokenCounter, system: Any) -> list[ContextItem]:
    """One item per system block, its tokens split by component."""
    items: list[ContextItem] = []
    for block in system_blocks(system):
        text = str(block.get("text", ""))
        components: dict[str, int] = {}
        for section in sections(text):
            name = section_component(section)
            components[name] = components.get(name, 0) + counter.count_text(section)
        tokens = sum(components.values())
        if tokens:
            items.append(ContextItem(kind="system", tokens=tokens, components=components, raw_tokens=tokens,
                                     parts=(TextPart(text=text),), cacheable="cache_control" in block))
    return items


def tool_tokens(counter: TokenCounter, tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """(name, tokens) of every tool definition, in the request's order."""
    return [(str(tool.get("name", "")), counter.count_text(definition_json(tool))) for tool in tools]


def definition_json(value: Mapping[str, Any]) -> str:
    """The definition as the request carries it; plain ``json`` for what orjson refuses (an integer beyond
    64 bits in a transcript's tool schema), so one odd value does not stop the import."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def tools_item(counter: TokenCounter, tools: Any) -> ContextItem | None:
    """The tool definitions as one item: built-in tools under ``tools``, MCP tools under ``tools_mcp``."""
    definitions = [tool for tool in tools if isinstance(tool, Mapping)] if isinstance(tools, list) else []
    if not definitions:
        return None
    components: dict[str, int] = {}
    for name, tokens in tool_tokens(counter, definitions):
        component = "tools_mcp" if name.startswith(MCP_PREFIX) else "tools"
        components[component] = components.get(component, 0) + tokens
    total = sum(components.values())
    return ContextItem(kind="tools", tokens=total, components=components, raw_tokens=total,
                       tools=tuple(definitions))


def request_items(counter: TokenCounter, system: Any, tools: Any) -> list[ContextItem]:
    """The fixed items of a request: its system blocks, then its tools."""
    items = system_items(counter, system)
    tool_item = tools_item(counter, tools)
    if tool_item is not None:
        items.append(tool_item)
    return items


def exact_items(items: Sequence[ContextItem], system: int, tools: int) -> list[ContextItem]:
    """The items with their counts made what the API's count_tokens said: the system blocks together
    ``system`` tokens and the tool definitions ``tools``, split as the workbench's own counts split them."""
    out = list(items)
    for kind, target in (("system", system), ("tools", tools)):
        chosen = [n for n, item in enumerate(out) if item.kind == kind]
        counted = sum(out[n].tokens for n in chosen)
        if not chosen or counted <= 0:
            continue
        left = target
        for position, n in enumerate(chosen):
            item = out[n]
            tokens = left if position == len(chosen) - 1 else round(item.tokens * target / counted)
            left -= tokens
            parts = list(item.components.items())
            components = {name: round(value * tokens / item.tokens) for name, value in parts[:-1]}
            components[parts[-1][0]] = tokens - sum(components.values())
            out[n] = replace(item, tokens=tokens, components=components)
    return out
