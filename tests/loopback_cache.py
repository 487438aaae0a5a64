"""A prompt cache that bills like the Anthropic API, for the loopback Messages API (``loopback_api``).

It keeps entries by the hash of the prompt up to a block, as the API does, and follows its documented rules:
a request writes an entry at each ``cache_control`` mark (or at its last block when the request itself asks
for caching); each mark looks for an entry at its own block, then one block further back at a time, 20
positions at most counting its own; the request reads the longest prefix found, writes what lies between it
and its last mark (split by the TTL of the mark ending each stretch), and sends the rest uncached. An entry
lives 5 minutes, or an hour for ``"ttl": "1h"``, after it was last written or read. Blocks, in the order the
API caches them: each tool definition, each system block, each content block of each message.

Tokens are counted by a tokenizer of its own (words and punctuation, plus a few for each block's framing),
not the workbench's: the workbench learns the scale from the usage it reports.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from loopback_api import Reply, text

LOOKBACK = 20
TTLS = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1)}
BLOCK_FRAMING = 5
_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens_of(value: Any) -> int:
    """The loopback API's own token count of a block."""
    plain = {key: item for key, item in value.items() if key != "cache_control"} if isinstance(value, dict) else value
    return len(_TOKEN.findall(plain if isinstance(plain, str) else json.dumps(plain, sort_keys=True))) + BLOCK_FRAMING


@dataclass(frozen=True)
class Block:
    digest: str
    """Hash of the prompt up to and including this block."""
    tokens: int
    ttl: str | None
    """The TTL its mark asks for; None when it carries no mark."""


def _ttl(mark: Any) -> str:
    return "1h" if isinstance(mark, dict) and mark.get("ttl") == "1h" else "5m"


def blocks_of(body: dict[str, Any]) -> list[Block]:
    out: list[Block] = []
    running = hashlib.sha256(str(body.get("model")).encode())

    def add(kind: str, value: Any) -> None:
        mark = value.get("cache_control") if isinstance(value, dict) else None
        plain = {k: v for k, v in value.items() if k != "cache_control"} if isinstance(value, dict) else value
        running.update(json.dumps([kind, plain], sort_keys=True).encode())
        out.append(Block(running.hexdigest(), tokens_of(value), None if mark is None else _ttl(mark)))

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    for block in ([system] if isinstance(system, str) else system or []):
        add("system", block)
    for message in body.get("messages") or []:
        content = message["content"]
        for block in [content] if isinstance(content, str) else content:
            add(message["role"], block)
    if "cache_control" in body and out:  # automatic caching: the last block is marked
        out[-1] = Block(out[-1].digest, out[-1].tokens, _ttl(body["cache_control"]))
    return out


@dataclass(frozen=True)
class Bill:
    read: int
    written_5m: int
    written_1h: int
    uncached: int

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h


@dataclass
class PromptCache:
    """``cache.answer`` is a loopback responder: it bills the request and answers with that usage."""

    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    entries: dict[str, tuple[datetime, str]] = field(default_factory=dict)
    """Expiry and TTL of each entry, by prefix hash."""
    bills: list[Bill] = field(default_factory=list)
    offset: timedelta = timedelta()
    """Added to the clock: the time that passes between requests in a test."""

    def now(self) -> datetime:
        return self.clock() + self.offset

    def _alive(self, digest: str) -> bool:
        entry = self.entries.get(digest)
        return entry is not None and entry[0] > self.now()

    def bill(self, body: dict[str, Any]) -> Bill:
        blocks = blocks_of(body)
        marks = [n for n, block in enumerate(blocks) if block.ttl is not None]
        hit = -1
        for mark in marks:
            for position in range(mark, max(mark - LOOKBACK, -1), -1):
                if self._alive(blocks[position].digest):
                    hit = max(hit, position)
                    break
        read = sum(block.tokens for block in blocks[: hit + 1])
        written = {"5m": 0, "1h": 0}
        done = hit
        for mark in marks:
            if mark > done:
                written[str(blocks[mark].ttl)] += sum(block.tokens for block in blocks[done + 1 : mark + 1])
                done = mark
        uncached = sum(block.tokens for block in blocks[max(done, hit) + 1 :])
        now = self.now()
        if hit >= 0:
            ttl = self.entries[blocks[hit].digest][1]
            self.entries[blocks[hit].digest] = (now + TTLS[ttl], ttl)
        for mark in marks:
            ttl = str(blocks[mark].ttl)
            self.entries[blocks[mark].digest] = (now + TTLS[ttl], ttl)
        result = Bill(read, written["5m"], written["1h"], uncached)
        self.bills.append(result)
        return result

    def answer(self, body: dict[str, Any], blocks: list[dict[str, Any]] | None = None) -> Reply:
        """``blocks`` (default: a short text), with the usage this request is billed."""
        billed = self.bill(body)
        return Reply(blocks or [text("done")], input_tokens=billed.uncached, cache_read_input_tokens=billed.read,
                     cache_creation_input_tokens=billed.written, cache_creation_1h_input_tokens=billed.written_1h)
