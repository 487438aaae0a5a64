"""The prompt cache as the API would report it, for a provider that answers without the API (the scripted
replay): each request reads what earlier requests wrote at their cache marks and writes at its own, by the
rules of :mod:`cache_rules`, so a replayed session shows cache reads and writes where a real one would.

Time is not modelled: a replay runs in seconds, well inside every entry's TTL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from workbench.engine.providers.cache_rules import Billing, bill
from workbench.engine.transcript.models import Usage
from workbench.engine.transcript.request_marks import MarkAt, ttl_of
from workbench.engine.transcript.tokens import TokenCounter

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""Every mark's time: with no clock, no entry ever expires."""


def cache_blocks(body: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The request's blocks in the order the API caches them: tool definitions, system blocks, then each
    message's content blocks."""
    yield from body.get("tools") or []
    system = body.get("system")
    yield from [{"type": "text", "text": system}] if isinstance(system, str) else system or []
    for message in body.get("messages") or []:
        content = message.get("content")
        yield from [{"type": "text", "text": content}] if isinstance(content, str) else content or []


@dataclass
class PromptCache:
    """The entries earlier requests wrote, by the digest of the prompt up to their block."""

    counter: TokenCounter
    entries: set[bytes] = field(default_factory=set)
    _tokens: dict[bytes, int] = field(default_factory=dict)
    """Tokens of one block, by the block's own digest: each block is counted once per replay."""

    def bill(self, body: Mapping[str, Any]) -> Billing:
        """What ``body`` reads, writes and sends uncached; its marks' entries are then written."""
        prefix = hashlib.blake2b(str(body.get("model")).encode(), digest_size=16)
        digests: list[bytes] = []
        tokens: list[int] = []
        marks: list[MarkAt] = []
        for position, block in enumerate(cache_blocks(body)):
            plain = {key: value for key, value in block.items() if key != "cache_control"}
            encoded = orjson.dumps(plain, option=orjson.OPT_SORT_KEYS)
            prefix.update(encoded)
            digests.append(prefix.digest())
            tokens.append(self._count(encoded))
            if "cache_control" in block:
                marks.append(MarkAt(position=position, ttl=ttl_of(block["cache_control"]), sent_at=EPOCH))
        alive = {position: True for position, digest in enumerate(digests) if digest in self.entries}
        billing = bill(tokens, marks, alive, first_changed=len(tokens))
        self.entries.update(digests[mark.position] for mark in marks)
        return billing

    def _count(self, encoded: bytes) -> int:
        key = hashlib.blake2b(encoded, digest_size=16).digest()
        found = self._tokens.get(key)
        if found is None:
            found = self._tokens[key] = self.counter.count_text(encoded.decode())
        return found


def cached_usage(billing: Billing, total_input: int, output_tokens: int, model: str | None) -> Usage:
    """``total_input`` tokens reported as the API splits them: read from the cache, written to it, and the rest
    uncached, in the shares of ``billing`` (whose own counts are the provider's, not the request's)."""
    counted = billing.read + billing.write_total + billing.uncached
    share = total_input / counted if counted else 0.0
    read = round(billing.read * share)
    written = min(round(billing.write_total * share), total_input - read)
    return Usage(input_tokens=total_input - read - written, output_tokens=output_tokens, model=model,
                 cache_read_input_tokens=read, cache_creation_input_tokens=written, synthetic=True)
