"""Tool-definition deferral (spec 001 §5): hold tool definitions back when they crowd the window.

When the definitions would take more than ``threshold`` of the effective window, some
are left out of the request: built-in tools never; MCP tools first, then tools that
skills registered; within a class the least recently used first. The ``tool_search``
tool finds deferred tools and promotes them for the rest of the current user turn.

The deferred set is decided without promotions, so the stable part of the tool list
(and its cache breakpoint) does not change when a tool is promoted: promoted tools
are sent after it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.agent.tools.base import Tool, ToolRegistry
from workbench.engine.settings.sections import DeferralConfig
from workbench.engine.transcript.models import Message, ToolUsePart
from workbench.engine.transcript.tokens import TokenCounter

TOOL_SEARCH = "tool_search"




def tool_origin(tool: Tool) -> str:
    """``builtin`` unless the tool says otherwise (MCP adapters say ``mcp``)."""
    origin = getattr(tool, "origin", "builtin")
    return origin if isinstance(origin, str) else "builtin"


def definition_json(definition: Mapping[str, Any]) -> str:
    return json.dumps(definition, ensure_ascii=False)


@dataclass(frozen=True)
class ToolSelection:
    stable: list[dict[str, Any]]
    """Definitions sent every request of this shape (a cache breakpoint may follow the last)."""
    promoted: list[dict[str, Any]]
    """Deferred tools that tool_search promoted for this turn, sent after the stable ones."""
    deferred: list[str]
    """Names held back from this request."""
    deferred_tokens: int

    @property
    def active(self) -> list[dict[str, Any]]:
        return [*self.stable, *self.promoted]


@dataclass
class DeferralManager:
    config: DeferralConfig = field(default_factory=DeferralConfig)
    deferred: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Deferred definitions (promoted ones included) as of the last selection, by name."""
    promoted: set[str] = field(default_factory=set)
    last_used: dict[str, int] = field(default_factory=dict)
    """Tool name → index of the latest message that called it."""
    _turn: str | None = None
    _promoted_turn: str | None = None
    _scanned: int = 0
    _tokens: dict[str, int] = field(default_factory=dict)

    # --- what the session did ---

    def observe(self, messages: Sequence[Message]) -> None:
        """Note new tool calls (for LRU) and whether a new user turn began (promotions end)."""
        if self._scanned > len(messages):
            self._scanned = 0
        for message in messages[self._scanned :]:
            if message.role == "user" and message.kind == "message":
                self._turn = message.id
            for part in message.parts:
                if isinstance(part, ToolUsePart):
                    self.last_used[part.name] = message.index
        self._scanned = len(messages)
        if self.promoted and self._promoted_turn != self._turn:
            self.promoted.clear()

    def promote(self, names: Iterable[str]) -> list[str]:
        """Make deferred tools available for the rest of this user turn."""
        done = [n for n in names if n in self.deferred]
        self.promoted.update(done)
        self._promoted_turn = self._turn
        return done

    # --- choosing ---

    def tokens(self, counter: TokenCounter, definition: Mapping[str, Any]) -> int:
        text = definition_json(definition)
        count = self._tokens.get(text)
        if count is None:
            count = self._tokens[text] = counter.count_text(text)
        return count

    def select(
        self,
        registry: ToolRegistry,
        counter: TokenCounter,
        effective_window: int,
        hidden: Collection[str] = (),
    ) -> ToolSelection:
        tools = [t for t in registry.tools.values() if t.name not in hidden and t.name != TOOL_SEARCH]
        defs = {t.name: t.definition() for t in tools}
        search = registry.get(TOOL_SEARCH)
        total = sum(self.tokens(counter, d) for d in defs.values())
        limit = self.config.threshold * effective_window
        deferred: list[str] = []
        if self.config.enabled and search is not None and total > limit:
            total += self.tokens(counter, search.definition())
            rank = {origin: i for i, origin in enumerate(self.config.order)}
            candidates = sorted(
                (t for t in tools if tool_origin(t) in rank),
                key=lambda t: (rank[tool_origin(t)], self.last_used.get(t.name, -1)),
            )
            for tool in candidates:
                if total <= limit:
                    break
                deferred.append(tool.name)
                total -= self.tokens(counter, defs[tool.name])
        held = set(deferred)
        self.deferred = {name: defs[name] for name in deferred}
        stable = [defs[t.name] for t in tools if t.name not in held]
        if held and search is not None:
            stable.append(search.definition())
        promoted = [defs[name] for name in deferred if name in self.promoted]
        waiting = [name for name in deferred if name not in self.promoted]
        return ToolSelection(
            stable=stable,
            promoted=promoted,
            deferred=waiting,
            deferred_tokens=sum(self.tokens(counter, defs[n]) for n in waiting),
        )

    # --- tool_search ---

    def search(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Deferred definitions matching the query's words (names weigh more than descriptions)."""
        terms = [t for t in re.split(r"[\s,]+", query.lower()) if t]
        if not terms:
            return []
        scored: list[tuple[int, str]] = []
        for name, definition in self.deferred.items():
            lname = name.lower()
            words = set(re.split(r"[_\-.\s]+", lname))
            description = str(definition.get("description") or "").lower()
            score = 0
            for term in terms:
                if term == lname:
                    score += 10
                elif term in words:
                    score += 4
                elif term in lname:
                    score += 2
                if term in description:
                    score += 1
            if score:
                scored.append((score, name))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [self.deferred[name] for _, name in scored[:limit]]
