"""Exact counts for a proxied session's components, asked of the API's ``count_tokens`` (``--exact``).

The workbench counts with its own tokenizer; Claude's is not public. When the user asks, after a request
has passed the proxy asks the same upstream, with the client's own headers (its key included, held only
for these calls), how many tokens the system prompt, the tools and the messages are: four calls (a
one-word message alone, with the system prompt, with the tools, and the whole request), at most once per
session per ``every`` seconds. Never without the flag.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2

COUNTED = ("model", "messages", "system", "tools", "tool_choice", "thinking")
"""What ``count_tokens`` accepts of a request."""
PROBE = [{"role": "user", "content": "."}]
DEFAULT_EVERY = 60.0


@dataclass(frozen=True)
class ExactCounts:
    system: int
    tools: int
    messages: int
    total: int


@dataclass
class ExactCounter:
    """Rate-limited ``count_tokens`` calls, per session."""

    upstream: str
    every: float = DEFAULT_EVERY
    _last: dict[str, float] = field(default_factory=dict)

    def due(self, session_id: str) -> bool:
        """Whether this session may be counted now (and, if so, mark it counted)."""
        now = time.monotonic()
        if now - self._last.get(session_id, -self.every) < self.every:
            return False
        self._last[session_id] = now
        return True

    async def count(self, client: httpx2.AsyncClient, body: Mapping[str, Any],
                    headers: Sequence[tuple[str, str]]) -> ExactCounts:
        counted = {key: body[key] for key in COUNTED if key in body}
        base = {"model": counted.get("model"), "messages": PROBE}

        async def ask(request: dict[str, Any]) -> int:
            response = await client.post(f"{self.upstream}/v1/messages/count_tokens", json=request, headers=headers)
            response.raise_for_status()
            return int(response.json()["input_tokens"])

        alone = await ask(base)
        system = await ask({**base, "system": counted["system"]}) - alone if "system" in counted else 0
        tools = await ask({**base, "tools": counted["tools"]}) - alone if "tools" in counted else 0
        total = await ask(counted)
        return ExactCounts(system=max(0, system), tools=max(0, tools),
                           messages=max(0, total - system - tools), total=total)
