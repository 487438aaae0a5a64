"""What an edit of a proxied agent's context costs: the prompt cache it breaks, against what it saves.

An agent's requests share a cached prefix. Changing a message breaks the cache from that message on:
the next request writes everything after it to the cache again (at the cache-write price instead of the
cache-read price), and every request after that is smaller by what the edit removed. When no request
came for longer than the cache lives (five minutes), the cache is gone anyway and the edit costs
nothing extra. An edit can wait for that moment: it is then queued (see ``overlay.PENDING``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from workbench.engine.context.pricing import format_usd, prices_for, token_cost
from workbench.engine.context.session import SessionContext
from workbench.engine.context.view import ContextView
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.plan import Plan
from workbench.engine.transcript.overlay import PENDING
from workbench.engine.transcript.request_store import last_request_at
from workbench.engine.transcript.store import Store

CACHE_LIFETIME = timedelta(minutes=5)


@dataclass(frozen=True)
class EditPrice:
    rewritten: int
    """Tokens the next request writes to the cache again (from the first changed message on)."""
    saved: int
    """Tokens fewer in every later request."""
    cold: bool
    """No request within the cache's lifetime: the cache is gone, the edit breaks nothing."""
    extra_cost: float | None
    """USD the next request costs more than it would have (None: the model has no price)."""
    saved_cost: float | None
    """USD every later request costs less."""

    @property
    def payback(self) -> int | None:
        """Requests after the next one until the savings have paid for the re-write (0 when it costs nothing)."""
        if self.extra_cost is None or self.saved_cost is None:
            return None
        if self.extra_cost <= 0:
            return 0
        return math.ceil(self.extra_cost / self.saved_cost) if self.saved_cost > 0 else None

    def describe(self) -> str:
        """One line for the user, before they apply the edit."""
        if self.cold:
            return (f"the agent's cache has gone cold (no request for {CACHE_LIFETIME.seconds // 60} minutes): "
                    f"this edit breaks nothing and changes every request by {-self.saved:+,} tokens")
        change = "smaller" if self.saved >= 0 else "larger"
        line = (f"the next request writes {self.rewritten:,} tokens to the cache again"
                f"{'' if self.extra_cost is None else f' (+{format_usd(self.extra_cost)})'}; "
                f"every later request is {abs(self.saved):,} tokens {change}"
                f"{'' if self.saved_cost is None else f' ({format_usd(abs(self.saved_cost))} per request)'}")
        payback = self.payback
        if payback is not None:
            line += f"; pays back after {payback:,} request{'s' if payback != 1 else ''}"
        return line


def edit_price(view: ContextView, changed: Iterable[str], saved: int, last_request: datetime | None,
               now: datetime) -> EditPrice:
    """The price of changing the messages ``changed`` (saving ``saved`` tokens) in ``view``."""
    wanted = set(changed)
    tokens = [(item.message_id, item.tokens) for item in view.items if item.kind == "message"]
    first = next((n for n, (message_id, _) in enumerate(tokens) if message_id in wanted), len(tokens))
    tail = sum(count for _, count in tokens[first:])
    rewritten = max(0, tail - saved)
    cold = last_request is None or now - last_request > CACHE_LIFETIME
    model = view.model
    if prices_for(model) is None:
        return EditPrice(rewritten, saved, cold, None, None)
    saved_cost = token_cost(saved, model, "cache_read")
    extra = 0.0 if cold else token_cost(rewritten, model, "cache_write_5m") - token_cost(tail, model, "cache_read")
    return EditPrice(rewritten, saved, cold, max(0.0, extra), saved_cost)


def plan_price(store: Store, ctx: SessionContext, plan: Plan) -> EditPrice | None:
    """For a proxied session, what applying ``plan`` now does to its agent's prompt cache (None for other
    sessions, and for a plan that changes no tokens)."""
    if ctx.session.source_format != "proxy" or not plan.tokens_saved:
        return None
    return edit_price(ctx.view(), {item.message_id for item in plan.items}, plan.tokens_saved,
                      last_request_at(store, ctx.session.id), datetime.now(UTC))


def queue_until_cold(ctx: SessionContext, plan: Plan) -> None:
    """Mark the plan's events as waiting for the agent's cache to go cold (applied with the plan)."""
    if ctx.session.source_format != "proxy":
        raise WorkbenchError("waiting for a cold cache is for proxied sessions: other sessions have no agent "
                             "cache to keep")
    for item in plan.items:
        item.data = {**(item.data or {}), "when": PENDING}
