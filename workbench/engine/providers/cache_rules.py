"""The API's prompt-cache rules, applied to one request: what it reads from the cache, writes to it, and sends
uncached.

As the Anthropic prompt caching documentation states them: a request writes a cache entry only at each of
its cache marks (``cache_control``), keyed by everything up to and including the marked block (tools, system,
messages, in that order). To read, each mark looks for an entry at its own position and, failing that, one
block further back at a time, checking at most 20 positions counting its own; the request reads the longest
prefix any of its marks found. So an entry further back than 20 blocks from every mark is not found even
when the prefix is unchanged, and everything after the entry that was found is written again. An entry lives
for its TTL (5 minutes, or 1 hour when the mark asks for ``"ttl": "1h"``) after it was last written or read;
a 1-hour write costs 2x the base input price, a 5-minute one 1.25x, a read the model's own cache-read price.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from workbench.engine.transcript.request_marks import TTLS, MarkAt, Ttl

LOOKBACK = 20
"""Positions a mark checks for an entry, its own included."""


@dataclass(frozen=True)
class Billing:
    """What one request's prompt costs in the cache's terms, in tokens."""

    read: int
    """Read from the cache: everything up to the entry found."""
    written: Mapping[Ttl, int] = field(default_factory=dict)
    """Written to the cache again, by the TTL of the mark that ends each stretch."""
    uncached: int = 0
    """After the last mark: sent at the base input price."""
    hit: int = -1
    """The position of the entry read (-1: none)."""

    @property
    def write_total(self) -> int:
        return sum(self.written.values())


def live_entries(marks: Sequence[MarkAt], now: datetime) -> dict[int, Ttl]:
    """The positions whose entries are still alive at ``now`` (each mark's entry lives its TTL from ``sent_at``:
    when it was last written or read), with their TTL."""
    alive: dict[int, Ttl] = {}
    for mark in marks:
        if now - mark.sent_at <= TTLS[mark.ttl]:
            alive[mark.position] = mark.ttl
    return alive


def found_entry(marks: Sequence[int], entries: Mapping[int, object], first_changed: int) -> int:
    """The latest entry position a mark's lookback reaches whose prefix is unchanged (before ``first_changed``);
    -1 when none is."""
    best = -1
    for mark in marks:
        for position in range(mark, max(mark - LOOKBACK, -1), -1):
            if position < first_changed and position in entries:
                best = max(best, position)
                break
    return best


def bill(tokens: Sequence[int], marks: Sequence[MarkAt], entries: Mapping[int, object],
         first_changed: int) -> Billing:
    """What a request whose blocks hold ``tokens`` (positions past the end hold none), marked at ``marks``,
    reads, writes and sends uncached when the cache holds ``entries`` and its blocks from ``first_changed``
    on differ from what wrote them."""
    starts = [0]
    for count in tokens:
        starts.append(starts[-1] + count)

    def upto(position: int) -> int:
        """Tokens of the blocks up to and including ``position``."""
        return starts[min(max(position + 1, 0), len(tokens))]

    positions = sorted({mark.position: mark.ttl for mark in marks}.items())
    hit = found_entry([p for p, _ in positions], entries, first_changed)
    written: dict[Ttl, int] = {}
    done = hit
    for position, ttl in positions:
        if position > done:
            written[ttl] = written.get(ttl, 0) + upto(position) - upto(done)
            done = position
    last = positions[-1][0] if positions else -1
    return Billing(read=upto(hit), written=written, uncached=starts[-1] - upto(max(last, hit)), hit=hit)
