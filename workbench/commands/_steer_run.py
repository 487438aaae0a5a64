"""The steering commands' work (see ``steer``): loaded only when one of them runs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from workbench.commands._common import EXIT_OK, Environment, Handler, resolve
from workbench.commands._price import print_price
from workbench.engine.context.effective import PINNED_WHY
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import StaleSession
from workbench.engine.plans.edit_price import EditPrice, plan_price, queue_until_cold
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import HistoryEntry, Plan, history, redo, undo
from workbench.engine.plans.strategies.manual import MANUAL_ACTIONS, find_message, plan_action
from workbench.engine.plans.strategies.registry import enabled_plans, is_enabled, plan_strategy, strategy_name
from workbench.engine.transcript.models import Message
from workbench.engine.transcript.store import Store


def _load(env: Environment, store: Store, args: argparse.Namespace) -> SessionContext:
    session_id, _ = resolve(store, args.session, args.format)
    return SessionContext.load(store, session_id, env.config)


def plan_json(plan: Plan, price: EditPrice | None = None) -> dict[str, Any]:
    cache = {} if price is None else {"cache": price.as_json()}
    return {**cache,
        "strategy": plan.strategy,
        "tokens_before": plan.tokens_before,
        "tokens_after": plan.tokens_after,
        "items": [
            {"message_id": i.message_id, "action": i.action, "reason": i.reason, "tokens_saved": i.tokens_saved}
            for i in plan.items
        ],
        "skipped": [{"message_id": i.message_id, "reason": i.reason} for i in plan.skipped],
    }


def _print_plan(ctx: SessionContext, plan: Plan, verb: str = "") -> None:
    positions = {m.id: n for n, m in enumerate(ctx.messages, start=1)}
    head = f"{verb}{plan.strategy}"
    if not plan.items:
        print(f"{head}: nothing to do")
    else:
        print(f"{head}: {len(plan.items)} change(s), {plan.tokens_before:,} → {plan.tokens_after:,} tokens "
              f"(saves {plan.tokens_saved:,})")
    for skipped, items in ((False, plan.items), (True, plan.skipped)):
        for item in items:
            where = f"#{positions[item.message_id]}" if item.message_id in positions else "new"
            part = "" if item.part_index is None else f".{item.part_index}"
            action = "skip" if skipped else item.action
            print(f"  {where + part:>8}  {action:<8} {item.tokens_saved:>8,}  {item.reason}")


REPLANS = 5
"""How often a pin, prune… on one message is planned again when another program changed the session first."""


def _act(env: Environment, store: Store, args: argparse.Namespace) -> tuple[SessionContext, Message, Plan,
                                                                             EditPrice | None]:
    """Plan the action on the session as it is now and apply it; planned again (the same action on the same
    message) while another program changes the session in between, up to :data:`REPLANS` times."""
    for attempt in range(REPLANS):
        ctx = _load(env, store, args)
        message = find_message(ctx, args.message)
        plan = measure(ctx, plan_action(ctx, args.action, message, env.config.strategies))
        price = plan_price(store, ctx, plan)
        if args.when_cache_cold:
            queue_until_cold(ctx, plan)
        try:
            apply(store, ctx, plan)
        except StaleSession:
            if attempt == REPLANS - 1:
                raise
            continue
        return ctx, message, plan, price
    raise StaleSession


def cmd_action(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        ctx, message, plan, price = _act(env, store, args)
    if price is not None and not args.json:
        print_price(price)
    if args.when_cache_cold and plan.items and not args.json:
        print("queued: the proxy applies it to the first request after the agent's cache has gone cold")
    queued = bool(args.when_cache_cold and plan.items)
    if args.json:
        print(json.dumps({"plans": [{**plan_json(plan, price), "state": "queued" if queued else "applied"}]}))
    elif not plan.items:
        print(f"{args.action}: nothing to do for message {message.id} (#{message.index + 1})")
    else:
        _print_plan(ctx, plan, verb="queued " if queued else "applied ")
    return EXIT_OK


def cmd_plan(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        ctx = _load(env, store, args)
    strategies = env.config.strategies
    if args.strategy:
        plans = [plan_strategy(ctx, args.strategy, strategies)]
    else:
        plans = enabled_plans(ctx, strategies)
    pinned = [m for m in ctx.messages if m.id in ctx.overlay.pinned]
    if args.json:
        print(json.dumps({"plans": [plan_json(p) for p in plans],
                          "pinned": [{"message_id": m.id, "position": m.index + 1, "reason": PINNED_WHY}
                                     for m in pinned]}))
        return EXIT_OK
    for plan in plans:
        _print_plan(ctx, plan)
    if pinned:
        print(f"pinned {', '.join(f'#{m.index + 1}' for m in pinned)}: {PINNED_WHY}")
    if args.strategy and not is_enabled(strategies, strategy_name(args.strategy)):
        print(f"note: {args.strategy} is disabled in the config; `workbench apply` still applies it on request")
    return EXIT_OK


def cmd_apply(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        ctx = _load(env, store, args)
        plan = plan_strategy(ctx, args.strategy, env.config.strategies)
        price = plan_price(store, ctx, plan)
        apply(store, ctx, plan)
    if args.json:
        print(json.dumps({"plans": [plan_json(plan, price)]}))
    else:
        if price is not None:
            print_price(price)
        _print_plan(ctx, plan, verb="applied ")
    return EXIT_OK


def _entry_line(entry: HistoryEntry) -> str:
    when = entry.created_at.strftime("%Y-%m-%d %H:%M:%S") if entry.created_at else "-"
    state = entry.state + (f" from request {entry.request}" if entry.request is not None else "")
    return (f"{when}  {entry.origin:<11} {entry.strategy:<20} {','.join(entry.actions):<16} "
            f"{entry.items:>5} item(s) {entry.tokens_saved:>9,} tokens  {state}")


def cmd_undo(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        ctx = _load(env, store, args)
        before = ctx.used()
        entry = undo(store, ctx)
    print(f"undid {entry.strategy} ({entry.items} change(s)): {before:,} → {ctx.used():,} tokens")
    return EXIT_OK


def cmd_redo(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        ctx = _load(env, store, args)
        before = ctx.used()
        entry = redo(store, ctx)
    print(f"redid {entry.strategy} ({entry.items} change(s)): {before:,} → {ctx.used():,} tokens")
    return EXIT_OK


def cmd_history(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        ctx = _load(env, store, args)
    from workbench.engine.plans.policy_activity import policy_activity

    entries, policy = history(ctx), policy_activity(ctx.events)
    if args.json:
        print(json.dumps({"history": [e.model_dump(mode="json") for e in entries],
                          "policy": policy.model_dump(mode="json") if policy is not None else None}))
        return EXIT_OK
    if not entries:
        print("no changes yet")
    for entry in entries:
        print(_entry_line(entry))
    if policy is not None:
        print(policy.line())
    return EXIT_OK


def _queued_line(number: int, entry: HistoryEntry, positions: dict[str, int]) -> str:
    when = entry.created_at.strftime("%Y-%m-%d %H:%M:%S") if entry.created_at else "-"
    where = ", ".join(f"#{positions[m]}" for m in entry.message_ids if m in positions) or "new message"
    return (f"{number:>3}  {when}  {','.join(entry.actions):<10} {where:<16} saves {entry.tokens_saved:>8,} tokens  "
            f"{entry.plan_id}")


def cmd_queued(env: Environment, args: argparse.Namespace) -> int:
    from workbench.engine.plans.queued import cancel_queued, queued_edits

    with env.store() as store:
        ctx = _load(env, store, args)
        cancelled = cancel_queued(store, ctx, args.cancel) if args.cancel else None
    edits = queued_edits(ctx)
    if args.json:
        print(json.dumps({"cancelled": cancelled.model_dump(mode="json") if cancelled else None,
                          "queued": [e.model_dump(mode="json") for e in edits]}))
        return EXIT_OK
    if cancelled is not None:
        print(f"cancelled {cancelled.strategy} ({cancelled.items} change(s)): no request will carry it")
    positions = {m.id: n for n, m in enumerate(ctx.messages, start=1)}
    if not edits:
        print("no queued edits")
    for number, entry in enumerate(edits, start=1):
        print(_queued_line(number, entry, positions))
    return EXIT_OK


HANDLERS: dict[str, Handler] = {
    **dict.fromkeys(MANUAL_ACTIONS, cmd_action),
    "plan": cmd_plan, "apply": cmd_apply, "undo": cmd_undo, "redo": cmd_redo, "history": cmd_history,
    "queued": cmd_queued,
}
