"""A past session replayed request by request, as it was and as a policy would have changed it.

Each request is billed under the prompt cache's rules twice, by two caches kept apart: once as the agent sent
it, once with every edit the policy had made by then. The policy plans on the session as it stood at that
request (the messages the request held) and decides by its rule (see ``policy``), pricing an edit with the
replay's own cache. (The proxy plans off the request's path, on what its store holds, so a live edit can reach
the agent one request later than the replay's.) The replay takes for granted that the agent would have done the
same after an edit: the same messages, at the same times.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from workbench.engine.context.pricing import prices_for
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.replay.cache import PromptCache, cost, prefixes
from workbench.engine.plans.replay.policy import planned_edits
from workbench.engine.plans.replay.timeline import Request, Timeline
from workbench.engine.providers.cache_rules import Billing
from workbench.engine.settings.config import Config
from workbench.engine.settings.policies import Policy
from workbench.engine.transcript.request_marks import TTLS

ASSUMPTION = "assumes the agent would have acted the same after each edit: the same messages, at the same times"


@dataclass(frozen=True)
class Billed:
    """One request's prompt as the cache billed it, and what it cost."""

    uncached: int
    cache_read: int
    cache_write: int
    cost: float

    @property
    def input(self) -> int:
        """The whole prompt: read, written and uncached."""
        return self.uncached + self.cache_read + self.cache_write

    @classmethod
    def of(cls, billing: Billing, usd: float) -> Billed:
        return cls(billing.uncached, billing.read, billing.write_total, usd)

    def as_json(self) -> dict[str, object]:
        return {"input_tokens": self.input, "uncached_tokens": self.uncached, "cache_read_tokens": self.cache_read,
                "cache_write_tokens": self.cache_write, "cost": round(self.cost, 6)}


@dataclass(frozen=True)
class Step:
    """One request of the replay."""

    number: int
    sent_at: datetime
    gap: float | None
    """Seconds since the request before (None for the first)."""
    without: Billed
    with_policy: Billed
    edits: int
    """Parts the policy changed before this request was sent (0: it sent what the one before had)."""
    edited: int
    """Parts changed in this request, by every edit so far."""
    waiting: int = 0
    """Parts the policy planned to change at this request but left as they were: sending them did not pay."""

    def as_json(self) -> dict[str, object]:
        return {"request": self.number, "sent_at": self.sent_at.isoformat(), "gap_seconds": self.gap,
                "edits": self.edits, "edited_parts": self.edited, "waiting": self.waiting, "without_policy": self.without.as_json(),
                "with_policy": self.with_policy.as_json()}


@dataclass
class Replay:
    policy: Policy
    source: str
    steps: list[Step] = field(default_factory=list)
    compact_at: int | None = None
    """Tokens of a request at which the session compacts (the budget's threshold)."""

    def compaction_at(self, with_policy: bool) -> int | None:
        """The first request at the compaction threshold (None: never)."""
        for step in self.steps:
            billed = step.with_policy if with_policy else step.without
            if self.compact_at is not None and billed.input >= self.compact_at:
                return step.number
        return None

    def totals(self) -> dict[str, object]:
        out: dict[str, object] = {"requests": len(self.steps), "edits": sum(s.edits for s in self.steps),
                                  "plannings_that_did_not_pay": sum(1 for s in self.steps if s.waiting),
                                  "compaction_threshold": self.compact_at}
        for suffix in ("without_policy", "with_policy"):
            billed = [step.with_policy if suffix == "with_policy" else step.without for step in self.steps]
            out[f"cost_{suffix}"] = round(sum(b.cost for b in billed), 6)
            out[f"input_tokens_{suffix}"] = sum(b.input for b in billed)
            out[f"cache_read_tokens_{suffix}"] = sum(b.cache_read for b in billed)
            out[f"cache_write_tokens_{suffix}"] = sum(b.cache_write for b in billed)
            out[f"uncached_tokens_{suffix}"] = sum(b.uncached for b in billed)
            out[f"compaction_at_{suffix}"] = self.compaction_at(suffix == "with_policy")
        return out

    def as_json(self) -> dict[str, object]:
        return {"policy": self.policy.name, "source": self.source, "assumption": ASSUMPTION,
                "requests": [step.as_json() for step in self.steps], "totals": self.totals()}


def edited(request: Request, edits: Mapping[Hashable, int]) -> tuple[list[Hashable], list[int]]:
    """The blocks' keys and tokens of ``request`` with ``edits`` (tokens saved by part, in the workbench's count)
    made: an edited block is another block, smaller by its share of what the edit saves."""
    if not edits:
        return [block.key for block in request.blocks], list(request.tokens)
    keys: list[Hashable] = []
    tokens: list[int] = []
    for block, count in zip(request.blocks, request.tokens, strict=True):
        saved = edits.get(block.key)
        if saved is None:
            keys.append(block.key)
            tokens.append(count)
        else:
            keys.append(("edited", block.key))
            share = min(saved, block.estimate) / block.estimate if block.estimate else 0.0
            tokens.append(max(0, round(count * (1 - share))))
    return keys, tokens


class _Advance:
    """The session as each request found it: messages appended as the requests come to hold them."""

    def __init__(self, timeline: Timeline, config: Config) -> None:
        self.ctx = SessionContext(timeline.session, [], timeline.events, timeline.counter, config)
        self.messages = timeline.messages
        self.at = {message.id: n for n, message in enumerate(self.messages)}
        self.done = 0

    def to(self, request: Request) -> SessionContext:
        last = max((self.at.get(message_id, -1) for message_id in request.messages), default=-1)
        while self.done <= last:
            self.ctx.append(self.messages[self.done])
            self.done += 1
        return self.ctx


def replay(timeline: Timeline, policy: Policy, config: Config | None = None) -> Replay:
    """Replay ``timeline`` without and with ``policy``."""
    config = config or Config()
    out = Replay(policy, timeline.source)
    session = _Advance(timeline, config)
    plain, steered = PromptCache(), PromptCache()
    settings = policy.settings(config.strategies)
    applied: dict[Hashable, int] = {}
    planned_at = -policy.plan_every
    before: datetime | None = None
    for request in timeline.requests:
        ctx = session.to(request)
        now, model, marks = request.sent_at, request.model, request.marks
        output = request.reported.output_tokens if request.reported else 0
        hashes = request.hashes
        billing = plain.bill(hashes, request.tokens, marks, now)
        without = Billed.of(billing, cost(billing, model, output))
        longest = max((TTLS[ttl] for _, ttl in marks), default=TTLS["5m"])
        cold = before is None or now - before > longest
        new: dict[Hashable, int] = {}
        waiting = 0
        if cold or request.number - planned_at >= policy.plan_every:
            planned_at = request.number
            present = {block.key for block in request.blocks}
            new = {key: saved for key, saved in planned_edits(ctx, policy, settings).items()
                   if key not in applied and key in present}
            if new and not _pays(steered, request, applied, new, policy):
                new, waiting = {}, len(new)
            applied.update(new)
        keys, tokens = edited(request, applied)
        billing = steered.bill(prefixes(model, keys) if applied else hashes, tokens, marks, now)
        gap = None if before is None else (now - before) / timedelta(seconds=1)
        touched = sum(1 for block in request.blocks if block.key in applied)
        out.steps.append(Step(request.number, now, gap, without, Billed.of(billing, cost(billing, model, output)),
                              len(new), touched, waiting))
        if out.compact_at is None:
            out.compact_at = ctx.budget().compact_at
        before = now
    return out


def _pays(cache: PromptCache, request: Request, applied: Mapping[Hashable, int], new: Mapping[Hashable, int],
          policy: Policy) -> bool:
    """Whether sending ``new`` edits with this request costs no more than not sending them, over the request
    and the policy's ``payback`` requests after it (each reading the cache, smaller by what the edits save)."""
    model, marks, now = request.model, request.marks, request.sent_at
    keys, tokens = edited(request, applied)
    after_keys, after_tokens = edited(request, {**applied, **new})
    as_is = cache.bill(prefixes(model, keys) if applied else request.hashes, tokens, marks, now, keep=False)
    changed = cache.bill(prefixes(model, after_keys), after_tokens, marks, now, keep=False)
    extra = cost(changed, model) - cost(as_is, model)
    if extra <= 0:
        return True
    prices = prices_for(model)
    if prices is None:
        return False
    saved = (sum(tokens) - sum(after_tokens)) * prices.rates(sum(tokens)).cache_read / 1_000_000
    return saved * policy.payback > extra


def summary_lines(result: Replay) -> Sequence[str]:
    """The summary a person reads under the table."""
    totals = result.totals()
    lines = [(f"policy {result.policy.name!r} over {totals['requests']} requests: {totals['edits']} parts edited; "
             f"{totals['plannings_that_did_not_pay']} times it found edits that would not have paid back within "
             f"{result.policy.payback} requests, and left them")]
    for label, suffix in (("without policy", "without_policy"), ("with policy", "with_policy")):
        at = totals[f"compaction_at_{suffix}"]
        lines.append(f"  {label:<15} cost ${totals[f'cost_{suffix}']:,.4f}  input {totals[f'input_tokens_{suffix}']:,}"
                     f"  cache writes {totals[f'cache_write_tokens_{suffix}']:,}  compaction reached "
                     f"{'at request ' + str(at) if at is not None else 'never'}")
    lines.append(f"  ({ASSUMPTION})")
    return lines
