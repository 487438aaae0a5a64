"""A policy run for a proxied agent: its strategies planned every few requests, their edits queued together.

The plan is measured and priced as any edit of a proxied agent's context is (``edit_price``). It is queued as an
edit waiting for the agent's cache to go cold (``overlay.PENDING``): the proxy sends it from the first request
after a pause longer than the cache lives. When it pays already (what it saves over the policy's ``payback``
requests exceeds what re-writing the cache costs) it is marked :data:`READY`, and the proxy sends it with the
agent's next request. Either way it is one plan, in ``history`` with origin ``policy`` and the request it reached,
undone and redone as any other. A policy's earlier plan still waiting is taken back first: the new one holds its
edits too, so one request breaks the cache once for all of them.
"""

from __future__ import annotations

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.edit_price import plan_price, queue_until_cold
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.plans.strategies.registry import STRATEGIES, strategy_name
from workbench.engine.settings.config import Config
from workbench.engine.settings.policies import Policy
from workbench.engine.transcript.overlay import is_pending
from workbench.engine.transcript.request_store import cancel_pending
from workbench.engine.transcript.store import Store

READY = "policy_ready"
"""``data`` key of a queued policy edit that pays already: the proxy sends it with the next request."""


def policy_plan(ctx: SessionContext, policy: Policy, config: Config) -> Plan:
    """The policy's strategies planned on ``ctx`` as one plan (each part once: the first strategy that takes it)."""
    settings = policy.settings(config.strategies)
    items: dict[tuple[str, int | None], PlanItem] = {}
    for name in policy.strategies:
        for item in STRATEGIES[strategy_name(name)](ctx, settings).items:
            items.setdefault((item.message_id, item.part_index), item)
    plan = Plan(session_id=ctx.session.id, strategy=f"policy {policy.name}", origin="policy",
                items=list(items.values()))
    return measure(ctx, plan) if plan.items else plan


def run_policy(store: Store, session_id: str, policy: Policy, config: Config) -> Plan | None:
    """Plan the policy on the proxied session as stored and queue what it found (None: nothing to change)."""
    ctx = SessionContext.load(store, session_id, config)
    queued = {e.plan_id for e in ctx.events if e.origin == "policy" and is_pending(e) and not e.undone}
    if any(e.data.get(READY) for e in ctx.events if e.plan_id in queued):
        return None  # one goes with the next request already; what is found now is planned after it
    for plan_id in queued:
        cancel_pending(store, session_id, plan_id)
    if queued:
        ctx = SessionContext.load(store, session_id, config)
    plan = policy_plan(ctx, policy, config)
    if not plan.items or plan.tokens_saved <= 0:
        return None
    price = plan_price(store, ctx, plan)
    ready = price is None or price.cold or (price.payback is not None and price.payback <= policy.payback)
    queue_until_cold(ctx, plan)
    if ready:
        for item in plan.items:
            item.data = {**(item.data or {}), READY: True}
    apply(store, ctx, plan)
    return plan
