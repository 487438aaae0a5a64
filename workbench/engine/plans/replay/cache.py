"""The API's prompt cache across a sequence of requests, billed by ``cache_rules``.

``cache_rules`` prices one request against the entries that are alive; this keeps those entries from request to
request: an entry is the prefix up to a marked block (keyed by a running hash of the model and the blocks'
keys, so a changed block changes every entry after it), written when a request's mark stood on it and kept
alive for its TTL from the last request that wrote or read it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from workbench.engine.context.pricing import prices_for
from workbench.engine.plans.edit_price import WRITE_RATE
from workbench.engine.providers.cache_rules import LOOKBACK, Billing, bill, live_entries
from workbench.engine.transcript.request_marks import MarkAt, Ttl


def prefixes(model: str | None, keys: Sequence[Hashable]) -> list[int]:
    """A running hash of the prompt up to each block: equal only where everything up to there is equal."""
    running = hash(("model", model))
    out = []
    for key in keys:
        running = hash((running, key))
        out.append(running)
    return out


@dataclass
class PromptCache:
    """The entries one agent's requests left in the cache, by prefix hash: when last used, and their TTL."""

    entries: dict[int, tuple[datetime, Ttl]] = field(default_factory=dict)

    def bill(self, hashes: Sequence[int], tokens: Sequence[int], marks: Sequence[tuple[int, Ttl]],
             now: datetime, *, keep: bool = True) -> Billing:
        """What a request of these blocks and marks reads, writes and sends uncached at ``now``; the cache then
        holds what it wrote and has refreshed what it read (unless ``keep`` is false: a price asked in advance)."""
        reach = {n for p, _ in marks for n in range(max(p - LOOKBACK + 1, 0), min(p + 1, len(hashes)))}
        held = [MarkAt(n, entry[1], entry[0]) for n in reach if (entry := self.entries.get(hashes[n])) is not None]
        found = bill(tokens, [MarkAt(p, ttl, now) for p, ttl in marks], live_entries(held, now), len(tokens))
        if not keep:
            return found
        if found.hit >= 0:
            self.entries[hashes[found.hit]] = (now, self.entries[hashes[found.hit]][1])
        for position, ttl in marks:
            if 0 <= position < len(hashes):
                self.entries[hashes[position]] = (now, ttl)
        return found


def cost(billing: Billing, model: str | None, output: int = 0) -> float:
    """USD of one request billed so (0.0 for a model the price table does not know)."""
    prices = prices_for(model)
    if prices is None:
        return 0.0
    rates = prices.rates(billing.read + billing.write_total + billing.uncached)
    usd = billing.read * rates.cache_read + billing.uncached * rates.input + output * rates.output
    usd += sum(tokens * rates.of(WRITE_RATE[ttl]) for ttl, tokens in billing.written.items())
    return usd / 1_000_000
