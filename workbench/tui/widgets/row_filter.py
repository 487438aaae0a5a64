"""Filtering and ordering the message table: pure functions over an immutable :class:`MessageRows`.

A query is words separated by spaces: ``role:user``, ``badge:pruned`` (also
``pinned``, ``offloaded``, ``summary``, ``error``, ``excluded``, ``compacted``,
``archived``), ``tool:read_file``; every other word (or "quoted phrase") must
appear in the message's text, tool input or tool output, ignoring case. The
result is the list of transcript indices to show, in order. It runs in a
thread worker: 100,000 rows take a fraction of a second.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from workbench.engine.transcript.models import Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from workbench.tui.widgets.rows import MessageRows

BADGE_ALIASES = {"pinned": "PERSIST", "persist": "PERSIST", "pin": "PERSIST"}
EXCLUSION_BADGES = {"excluded", "compacted", "archived", "sidechain", "hidden"}
HAYSTACK_ATTR = "_search_haystack"


@dataclass(frozen=True)
class RowQuery:
    """What the filter bar asks of the message list: roles, badges, tools, words, and the order."""

    roles: frozenset[str] = frozenset()
    badges: frozenset[str] = frozenset()
    tools: frozenset[str] = frozenset()
    words: tuple[str, ...] = ()
    by_tokens: bool = False
    """Heaviest first instead of transcript order."""
    text: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str, *, by_tokens: bool = False) -> RowQuery:
        try:
            terms = shlex.split(text)
        except ValueError:  # an unbalanced quote: take the words as they are
            terms = text.split()
        roles: set[str] = set()
        badges: set[str] = set()
        tools: set[str] = set()
        words: list[str] = []
        for term in terms:
            key, sep, value = term.partition(":")
            key = key.lower()
            if sep and value and key == "role":
                roles.add(value.lower())
            elif sep and value and key in ("badge", "is"):
                badges.add(BADGE_ALIASES.get(value.lower(), value.lower()))
            elif sep and value and key == "tool":
                tools.add(value.lower())
            else:
                words.append(term.lower())
        return cls(frozenset(roles), frozenset(badges), frozenset(tools), tuple(words), by_tokens, text)

    @property
    def filters(self) -> bool:
        return bool(self.roles or self.badges or self.tools or self.words)

    @property
    def active(self) -> bool:
        return self.filters or self.by_tokens

    def describe(self) -> str:
        parts = [self.text.strip()] if self.filters else []
        if self.by_tokens:
            parts.append("heaviest first")
        return " · ".join(parts)


def searchable(message: Message) -> str:
    """The text a search looks in: every part's text, tool input and output, lower-cased."""
    chunks: list[str] = []
    for part in message.parts:
        match part:
            case TextPart(text=text) | ThinkingPart(text=text):
                chunks.append(text)
            case ToolUsePart(name=name, input=tool_input):
                chunks.append(name)
                chunks.append(json.dumps(tool_input, ensure_ascii=False, default=str))
            case ToolResultPart(text=text):
                chunks.append(text)
    return "\n".join(chunks).lower()


def _haystack(rows: MessageRows) -> list[str]:
    cached: list[str] | None = getattr(rows, HAYSTACK_ATTR, None)
    if cached is None:
        cached = [searchable(m) for m in rows.messages]
        setattr(rows, HAYSTACK_ATTR, cached)
    return cached


def _tool_names(rows: MessageRows, message: Message) -> set[str]:
    names: set[str] = set()
    for part in message.parts:
        if isinstance(part, ToolUsePart):
            names.add(part.name.lower())
        elif isinstance(part, ToolResultPart):
            call = rows.tool_calls.get(part.tool_use_id)
            if call is not None:
                names.add(call.name.lower())
    return names


def _matcher(rows: MessageRows, query: RowQuery) -> Callable[[int], bool]:
    haystack = _haystack(rows) if query.words else None
    plain_badges = {b for b in query.badges if b not in EXCLUSION_BADGES}
    exclusion = query.badges & EXCLUSION_BADGES

    def keep(index: int) -> bool:
        message = rows.messages[index]
        if query.roles and message.role not in query.roles:
            return False
        if plain_badges or exclusion:
            row = rows.row(index)
            have = {b.lower() if b != "PERSIST" else b for b in row.badges}
            if plain_badges and not plain_badges <= have:
                return False
            label = row.exclusion_label
            if exclusion and not (label is not None and ("excluded" in exclusion or label in exclusion)):
                return False
        if query.tools and not query.tools & _tool_names(rows, message):
            return False
        if haystack is not None:
            text = haystack[index]
            return all(word in text for word in query.words)
        return True

    return keep


def apply_query(rows: MessageRows, query: RowQuery) -> list[int] | None:
    """Transcript indices to show, in order; None for "all, in transcript order"."""
    if not query.active:
        return None
    order: list[int] = list(range(len(rows)))
    if query.filters:
        keep = _matcher(rows, query)
        order = [i for i in order if keep(i)]
    if query.by_tokens:
        order.sort(key=rows.tokens, reverse=True)
    return order


def heaviest(rows: MessageRows, limit: int = 1000) -> list[int]:
    """Transcript indices of the heaviest messages in context, heaviest first."""
    import heapq

    in_context = (i for i in range(len(rows)) if rows.tokens(i) >= 0)
    return heapq.nlargest(limit, in_context, key=rows.tokens)
