"""What an edit of a proxied agent's context costs: the prompt cache it breaks, against what it saves.

An agent's requests share a cached prefix. Changing a message changes every cache entry from that block on,
and the next request can only resume from an entry its cache marks still reach (see ``cache_rules``: at most
20 blocks back from each mark), so it writes everything after that entry again, at the cache-write price of
the TTL its marks asked for, instead of reading it. Every request after that is smaller by what the edit
removed. When no entry is alive any more (no request for longer than the TTL), the cache is gone anyway and
the edit costs nothing extra. An edit can wait for that moment: it is then queued (see ``overlay.PENDING``).

The figures are the tokens the API reported for the agent's latest request, spread over its blocks by the
workbench's own counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from workbench.engine.context.pricing import Rate, format_usd, prices_for
from workbench.engine.context.session import SessionContext
from workbench.engine.context.view import ContextView
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.plan import Plan
from workbench.engine.providers.cache_rules import Billing, bill, live_entries
from workbench.engine.transcript.overlay import PENDING
from workbench.engine.transcript.request_marks import TTLS, MarkAt, RequestMarks, Ttl, request_marks
from workbench.engine.transcript.store import Store

CACHE_LIFETIME = TTLS["5m"]
"""The default TTL: how long the cache lives without a request, unless the agent's marks ask for an hour."""
WRITE_RATE: Mapping[Ttl, Rate] = {"5m": "cache_write_5m", "1h": "cache_write_1h"}
OUTLIER = 2.0
"""A reported size this many times off the workbench's count is not believed (as the calibration does not)."""


@dataclass(frozen=True)
class Change:
    """One changed block of the context and the tokens it saves."""

    message_id: str
    part_index: int | None
    saved: int


@dataclass(frozen=True)
class EditPrice:
    rewritten: int
    """Tokens the next request writes to the cache again because of the edit."""
    saved: int
    """Tokens fewer in every later request."""
    cold: bool
    """No cache entry is alive: the cache is gone, the edit breaks nothing."""
    extra_cost: float | None
    """USD the next request costs more than it would have (None: the model has no price)."""
    saved_cost: float | None
    """USD every later request costs less."""
    ttl: Ttl = "5m"
    """The TTL the agent's last cache mark asked for: how long its cache lives, and its write price."""
    warm_read: int = 0
    """Tokens the next request reads from the cache if nothing changes: the warm cache the price assumes."""
    marked: bool = True
    """The agent's requests set cache marks: without any, nothing is cached and nothing breaks."""
    automatic: bool = False
    """The API caches prefixes by itself (OpenAI): an edit makes the rest be read uncached, at no write premium."""

    @property
    def payback(self) -> int | None:
        """Requests after the next one until the savings have paid for the re-write (0 when it costs nothing)."""
        if self.extra_cost is None or self.saved_cost is None:
            return None
        if self.extra_cost <= 0:
            return 0
        return math.ceil(self.extra_cost / self.saved_cost) if self.saved_cost > 0 else None

    def as_json(self) -> dict[str, object]:
        """For ``--json``: the figures and the line the user reads."""
        return {"rewritten": self.rewritten, "saved": self.saved, "cold": self.cold, "ttl": self.ttl,
                "extra_usd": self.extra_cost, "saved_usd_per_request": self.saved_cost, "payback": self.payback,
                "warm_read": self.warm_read, "marked": self.marked, "line": self.describe(),
                "assumption": self.assumption}

    @property
    def assumption(self) -> str:
        """What the figures take for granted, for the user to weigh them."""
        if self.automatic and not self.cold:
            return (f"assumes the API still holds the prefix of the last request it cached by itself "
                    f"({self.warm_read:,} tokens read; kept about {_lifetime(self.ttl)} after each request)")
        if not self.marked:
            return "the agent's requests set no cache marks, so nothing of them is cached"
        if self.cold:
            return f"no cache entry of the agent is alive any more (its cache lives {_lifetime(self.ttl)})"
        return (f"assumes the cache was warm at the last request: {self.warm_read:,} tokens read "
                f"(it lives {_lifetime(self.ttl)} after each request)")

    def describe(self) -> str:
        """One line for the user, before they apply the edit."""
        if not self.marked:
            return f"the agent's requests set no cache marks: this edit breaks no cache and changes every " \
                   f"request by {-self.saved:+,} tokens"
        if self.cold:
            return (f"the agent's cache has gone cold (no request for {_lifetime(self.ttl)}): "
                    f"this edit breaks nothing and changes every request by {-self.saved:+,} tokens")
        change = "smaller" if self.saved >= 0 else "larger"
        each = "" if self.saved_cost is None else f" ({format_usd(abs(self.saved_cost))} per request)"
        if self.rewritten == 0:
            return (f"this edit lies past what the agent's cache holds and breaks none of it; every later request "
                    f"is {abs(self.saved):,} tokens {change}{each}{'; pays back immediately' if self.saved > 0 else ''}")
        extra = "" if self.extra_cost is None else f" ({format_usd(self.extra_cost)} more)"
        again = (f"reads {self.rewritten:,} tokens uncached (the API caches them again itself, at no write premium)"
                 if self.automatic else
                 f"writes {self.rewritten:,} tokens to the cache again at the {self.ttl} write price")
        line = f"the next request {again}{extra}; every later request is {abs(self.saved):,} tokens {change}{each}"
        payback = self.payback
        if payback == 0:
            line += "; pays back immediately"
        elif payback is not None:
            line += f"; pays back after {payback:,} request{'s' if payback != 1 else ''}"
        return line


def _lifetime(ttl: Ttl) -> str:
    return "an hour" if ttl == "1h" else f"{CACHE_LIFETIME.seconds // 60} minutes"


def block_tokens(view: ContextView, marks: RequestMarks) -> tuple[list[int], dict[str, int], list[float]]:
    """Tokens at each block position of the agent's latest request, the position of each message's first
    block by message id, and the scale applied at each position.

    The API reported the exact size of the prompt at the end of each request the latest repeats
    (``marks.totals``); the workbench's own counts only spread each stretch between two of those over its
    blocks. So the prefix an entry holds, at a request's end, is what was billed."""
    prompt = sum(item.tokens for item in view.items if item.kind != "message")
    share, rest = divmod(prompt, marks.prompt_blocks) if marks.prompt_blocks else (0, prompt)
    estimated = [share + (1 if n < rest else 0) for n in range(marks.prompt_blocks)]
    items = {item.message_id: item for item in view.items if item.kind == "message" and item.message_id}
    starts: dict[str, int] = {}
    for message_id, count in marks.messages:
        item = items.get(message_id) if message_id else None
        if message_id and count:
            starts[message_id] = len(estimated)
        estimated += _spread(item.tokens if item else 0, [_weight(p) for p in item.parts] if item else [], count)
    scales = [1.0] * len(estimated)
    start, done, scale = 0, 0, 1.0
    for end, total in marks.totals:
        if start <= end < len(estimated):
            counted = sum(estimated[start:end + 1])
            if counted > 0 and total > done and 1 / OUTLIER <= (total - done) / counted <= OUTLIER:
                scale = (total - done) / counted
            scales[start:end + 1] = [scale] * (end + 1 - start)
            start, done = end + 1, total
    scales[start:] = [scale] * (len(estimated) - start)
    return [round(count * at) for count, at in zip(estimated, scales, strict=True)], starts, scales


def _weight(part: object) -> int:
    stored = getattr(part, "stored_tokens", None)
    count = stored() if callable(stored) else None
    return count if isinstance(count, int) and count > 0 else 1


def _spread(total: int, weights: Sequence[int], count: int) -> list[int]:
    """``total`` over ``count`` blocks in proportion to ``weights`` (evenly where they do not fit)."""
    if count <= 0:
        return []
    if len(weights) != count:
        weights = [1] * count
    whole = sum(weights)
    out = [total * w // whole for w in weights]
    out[-1] += total - sum(out)
    return out


def next_marks(marks: RequestMarks) -> list[MarkAt]:
    """Where the agent's next request puts its marks: where the latest put them, except that a mark on the last
    message moves on by as many blocks as the latest request added (an agent marks the end of its prompt)."""
    last = marks.prompt_blocks + sum(count for _, count in marks.messages[:-1])
    return [MarkAt(m.position + (marks.added_blocks if m.position >= last else 0), m.ttl, m.sent_at)
            for m in marks.marks]


def edit_price(view: ContextView, changes: Iterable[Change], marks: RequestMarks | None, now: datetime) -> EditPrice:
    """The price of ``changes`` to ``view``, for an agent whose latest request ``marks`` describes."""
    changes = list(changes)
    saved = sum(change.saved for change in changes)
    prices = prices_for(view.model)
    if marks is not None and marks.prefix_cached:
        return prefix_price(view, changes, marks, now)
    if marks is None or not marks.marks:
        each = None if prices is None else saved * prices.rates(view.total).input / 1_000_000
        return EditPrice(0, saved, True, None if prices is None else 0.0, each, marked=False)
    tokens, starts, scales = block_tokens(view, marks)
    blocks = {message_id: count for message_id, count in marks.messages if message_id}
    edited = list(tokens)
    first = len(tokens)
    for change in changes:
        if change.message_id not in starts:
            continue
        within = min(max(change.part_index or 0, 0), blocks[change.message_id] - 1)  # a part the wire merged
        position = starts[change.message_id] + within
        first = min(first, position)
        edited[position] = max(0, edited[position] - round(change.saved * scales[position]))
    ahead = next_marks(marks)
    entries = live_entries([*marks.earlier, *marks.marks], now)
    before = bill(tokens, ahead, entries, len(tokens))
    after = bill(edited, ahead, entries, first)
    ttl = max(marks.marks, key=lambda m: m.position).ttl
    warm = before.read
    cold = before.hit < 0
    rewritten = 0 if cold else max(0, after.write_total - before.write_total)
    if prices is None:
        return EditPrice(rewritten, saved, cold, None, None, ttl, warm)
    rates = prices.rates(sum(tokens))
    extra = 0.0 if cold else _cost(after, rates.of) - _cost(before, rates.of)
    saved_cost = saved * (scales[first] if first < len(scales) else 1.0) * rates.cache_read / 1_000_000
    return EditPrice(rewritten, saved, cold, max(0.0, extra), saved_cost, ttl, warm)


def prefix_price(view: ContextView, changes: Sequence[Change], marks: RequestMarks, now: datetime) -> EditPrice:
    """OpenAI's rules: every prefix of a request is cached for some minutes, with no write premium. An edit
    makes the next request read everything from the first changed block on uncached (at the input price instead
    of the cached-input price); nothing when the last request is older than that."""
    saved = sum(change.saved for change in changes)
    tokens, starts, scales = block_tokens(view, marks)
    blocks = {message_id: count for message_id, count in marks.messages if message_id}
    first = min((starts[c.message_id] + min(max(c.part_index or 0, 0), blocks[c.message_id] - 1)
                 for c in changes if c.message_id in starts), default=len(tokens))
    cold = now - marks.sent_at > CACHE_LIFETIME
    rewritten = 0 if cold else sum(tokens[first:])
    warm = marks.usage.cache_read_input_tokens if marks.usage is not None else 0
    prices = prices_for(view.model)
    if prices is None:
        return EditPrice(rewritten, saved, cold, None, None, warm_read=warm, automatic=True)
    rates = prices.rates(sum(tokens))
    extra = rewritten * (rates.input - rates.cache_read) / 1_000_000
    saved_cost = saved * (scales[first] if first < len(scales) else 1.0) * rates.cache_read / 1_000_000
    return EditPrice(rewritten, saved, cold, extra, saved_cost, warm_read=warm, automatic=True)


def _cost(billing: Billing, rate: Callable[[Rate], float]) -> float:
    """USD of a request's prompt as ``billing`` bills it (``rate``: a rate's USD per million tokens by name)."""
    usd = billing.read * rate("cache_read") + billing.uncached * rate("input")
    usd += sum(tokens * rate(WRITE_RATE[ttl]) for ttl, tokens in billing.written.items())
    return float(usd) / 1_000_000


def plan_changes(plan: Plan) -> list[Change]:
    return [Change(item.message_id, item.part_index, item.tokens_saved) for item in plan.items]


def plan_price(store: Store, ctx: SessionContext, plan: Plan, changes: Sequence[Change] | None = None
               ) -> EditPrice | None:
    """For a proxied session, what applying ``plan`` now does to its agent's prompt cache (None for other
    sessions, and for a plan that changes no tokens). ``changes``: where the plan changes the context, when its
    items do not say (a compaction replaces everything from its first summarised message)."""
    if ctx.session.source_format != "proxy" or not plan.tokens_saved:
        return None
    return edit_price(ctx.view(), plan_changes(plan) if changes is None else changes,
                      request_marks(store, ctx.session.id), datetime.now(UTC))


def compaction_price(store: Store, ctx: SessionContext, plan: Plan, summarized: Sequence[str]) -> EditPrice | None:
    """What a compaction does to a proxied agent's cache: it replaces the context from its first summarised
    message on (None for other sessions, and for a compaction that summarises nothing)."""
    if not summarized:
        return None
    return plan_price(store, ctx, plan, [Change(summarized[0], None, plan.tokens_saved)])


def queue_until_cold(ctx: SessionContext, plan: Plan) -> None:
    """Mark the plan's events as waiting for the agent's cache to go cold (applied with the plan)."""
    if ctx.session.source_format != "proxy":
        raise WorkbenchError("waiting for a cold cache is for proxied sessions: other sessions have no agent "
                             "cache to keep")
    for item in plan.items:
        item.data = {**(item.data or {}), "when": PENDING}
