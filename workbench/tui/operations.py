"""The commands the UI submits to the engine thread (see :mod:`workbench.tui.host`).

Each is a coroutine run on the engine thread: it reads and changes the
session through the engine's API and reports with messages. Long synchronous
engine work (measuring a plan projects the whole session) runs in
``asyncio.to_thread`` so the engine loop still notices a shutdown. The planners,
the measuring and the pricing of a change load with the first command that uses
them: opening a session needs none of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.settings.compaction import SummarizerChoice
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store
from workbench.tui import messages as msg
from workbench.tui.host import EngineHost
from workbench.tui.steering import NOTHING, PAST, Action, describe, plan_for_key, positions_of

if TYPE_CHECKING:
    from workbench.engine import events as ev
    from workbench.engine.plans.compaction import CompactionPreview
    from workbench.engine.plans.plan import Plan
    from workbench.engine.providers.base import Provider
    from workbench.engine.sources.session_list import ListedSession
    from workbench.engine.transcript.models import Session
    from workbench.engine.transcript.sessions import Deleted

NOT_STORED = "this session is not stored, so its context cannot be changed"
STALE = ("the session was changed by another program; it is shown again as it is now, nothing was done: "
         "press the key again")
WATCHED = ("this transcript is being followed, not stored, so its context cannot be changed: "
           "import it first (ctrl+o, then Enter on it)")


def _stored(host: EngineHost) -> tuple[Store, SessionContext]:
    if host.ctx is None:
        raise WorkbenchError("no session is open")
    if host.store is None:
        raise WorkbenchError(WATCHED if host.watching is not None else NOT_STORED)
    return host.store, host.ctx


def _applied(host: EngineHost, ctx: SessionContext, verb: str, what: str, before: int, changes: int,
             message_id: str | None = None) -> None:
    screen_state = host.screen_state()
    host.post(msg.PlanApplied(verb, what, before, screen_state.budget.used, changes, screen_state, message_id))


async def steer(host: EngineHost, action: Action, message_id: str, *, priced: bool = False,
                queue: bool = False) -> None:
    """One steering key on one message: plan, measure, apply; then a fresh screen_state and a notice. On a
    proxied session, what the change does to the agent's cache is shown first (``priced``: it was), and
    the change may wait for the cache to go cold (``queue``)."""
    from workbench.engine.plans.edit_price import plan_price, queue_until_cold  # deferred: loads on first use
    from workbench.engine.plans.measure import apply

    _stored(host)
    if await host.refresh_if_changed():
        raise WorkbenchError(STALE)
    store, ctx = _stored(host)
    host.post(msg.Busy(f"{action}: measuring the change…"))
    plan = await asyncio.to_thread(plan_for_key, ctx, action, message_id, ctx.config.strategies)
    position = positions_of(ctx, [message_id]).get(message_id, 0)
    if not plan.items:
        host.post(msg.Notice(f"#{position} {NOTHING[action]}", "warning"))
        return
    if not priced:
        price = await asyncio.to_thread(plan_price, store, ctx, plan)
        if price is not None:
            host.post(msg.EditPriced(f"{action} #{position}", price.describe(), price.assumption,
                                     msg.SteerAgain(action, message_id)))
            return
    if queue:
        queue_until_cold(ctx, plan)
    before = ctx.used()
    await asyncio.to_thread(apply, store, ctx, plan)
    where = describe(plan, positions_of(ctx, [i.message_id for i in plan.items]))
    if queue:
        host.post(msg.Notice(f"Queued: {action} {where} applies to the first request after the agent's cache has "
                             f"gone cold; Q lists queued edits and cancels one."))
        return
    _applied(host, ctx, PAST[action], where, before, len(plan.items), message_id)


async def undo(host: EngineHost) -> None:
    from workbench.engine.plans import plan as plans  # deferred, as the planners: an open makes no plan

    _stored(host)
    if await host.refresh_if_changed():
        raise WorkbenchError(STALE)
    store, ctx = _stored(host)
    before = ctx.used()
    entry = await asyncio.to_thread(plans.undo, store, ctx)
    _applied(host, ctx, "undid", entry.strategy, before, entry.items)


async def redo(host: EngineHost) -> None:
    from workbench.engine.plans import plan as plans  # deferred, as the planners: an open makes no plan

    _stored(host)
    if await host.refresh_if_changed():
        raise WorkbenchError(STALE)
    store, ctx = _stored(host)
    before = ctx.used()
    entry = await asyncio.to_thread(plans.redo, store, ctx)
    _applied(host, ctx, "redid", entry.strategy, before, entry.items)


async def strategy_plans(host: EngineHost) -> None:
    """What every enabled strategy would change now, each measured on its own (nothing is changed)."""
    if host.ctx is None:
        raise WorkbenchError("no session is open")
    ctx = host.ctx
    from workbench.engine.plans.strategies.registry import enabled_plans  # deferred: loads on first use

    host.post(msg.Busy("Asking every strategy what it would change…", "plans"))
    found = await asyncio.to_thread(enabled_plans, ctx, ctx.config.strategies)
    ids = [item.message_id for plan in found for item in plan.items]
    host.post(msg.StrategyPlans(found, positions_of(ctx, ids)))


async def apply_plan(host: EngineHost, plan: Plan, *, priced: bool = False, queue: bool = False) -> None:
    """A strategy's plan, measured again on the session as it is now; on a proxied session its price to the
    agent's cache is asked first, as for a steering key."""
    from workbench.engine.plans.edit_price import plan_price, queue_until_cold  # deferred: loads on first use
    from workbench.engine.plans.measure import apply, measure

    store, ctx = _stored(host)
    before = ctx.used()
    fresh = await asyncio.to_thread(measure, ctx, plan.model_copy(deep=True))  # the session may have moved on
    if not fresh.items:
        host.post(msg.Notice(f"{plan.strategy}: nothing to do any more", "warning"))
        return
    if not priced:
        price = await asyncio.to_thread(plan_price, store, ctx, fresh)
        if price is not None:
            host.post(msg.EditPriced(f"apply {plan.strategy}", price.describe(), price.assumption,
                                     msg.ApplyAgain(plan)))
            return
    if queue:
        queue_until_cold(ctx, fresh)
    await asyncio.to_thread(apply, store, ctx, fresh)
    _applied(host, ctx, "applied", plan.strategy, before, len(fresh.items))


def _summary_provider(host: EngineHost, session: Session) -> Provider | None:
    factory = host.launch.summary_provider
    return factory(session) if factory is not None else None


def _warnings_to(host: EngineHost) -> Callable[[ev.Event], None]:
    from workbench.engine import events as ev  # deferred: only the agent and compaction emit events

    def emit(event: ev.Event) -> None:
        if isinstance(event, ev.Warning):
            host.post(msg.Notice(event.message, "warning"))

    return emit


async def preview_compaction(host: EngineHost, request: int, summarizer: SummarizerChoice, focus: str) -> None:
    from workbench.engine.plans.compaction import Compactor  # deferred: the compaction's modules wait for its key
    from workbench.engine.plans.fact_check import check, preview_facts

    store, ctx = _stored(host)
    host.post(msg.Busy("Summarising…", "compaction"))
    provider = _summary_provider(host, ctx.session) if summarizer != "heuristic" else None
    compactor = Compactor(store, ctx, provider=provider, model=ctx.model, emit=_warnings_to(host))
    streamed: list[str] = []

    def on_delta(text: str) -> None:
        streamed.append(text)
        host.post(msg.CompactionProgress(request, "".join(streamed)))

    try:
        plan = await compactor.preview("manual", focus.strip() or None, summarizer=summarizer, on_delta=on_delta)
    finally:
        close = getattr(provider, "aclose", None)
        if close is not None:
            await close()
    positions = positions_of(ctx, [*plan.summarized, *plan.preserved, *plan.tail])
    assert plan.budget_after is not None, "a previewed plan is measured"
    facts = tuple(preview_facts(ctx, plan.summarized))
    host.post(msg.CompactionPreviewed(request, plan, ctx.budget(), plan.budget_after, positions,
                                      host.launch.summary_provider is not None, facts, check(facts, plan.summary)))


async def apply_compaction(host: EngineHost, plan: CompactionPreview, *, priced: bool = False) -> None:
    """Apply a previewed compaction; on a proxied session its price to the agent's cache is asked first."""
    from workbench.engine.plans.compaction import Compactor  # deferred: the compaction's modules wait for its key
    from workbench.engine.plans.edit_price import compaction_price

    store, ctx = _stored(host)
    if not priced:
        price = await asyncio.to_thread(compaction_price, store, ctx, plan.plan, plan.summarized)
        if price is not None:
            host.post(msg.EditPriced("compact", price.describe(), price.assumption, msg.CompactAgain(plan)))
            return
    host.post(msg.Busy("Applying the compaction…", "compaction"))
    result = await Compactor(store, ctx, emit=_warnings_to(host)).apply(plan)
    host.post(msg.CompactionApplied(result.plan_id, result.summary_id, result.before_tokens, result.after_tokens,
                                    host.screen_state(), result.warnings))


async def list_sessions(host: EngineHost) -> None:
    """Stored sessions (the picker looks for other agents' sessions on this machine by itself)."""
    from workbench.engine.sources.session_list import session_list  # deferred: the picker's, as its screen

    current = host.ctx.session.id if host.ctx is not None else None
    if host.store is not None:
        host.post(msg.SessionsListed(session_list(host.store, keep=current), current))
        return
    db = host.launch.db
    if db is None:
        raise WorkbenchError("no database is open: " + NOT_STORED)
    host.post(msg.SessionsListed(await asyncio.to_thread(_stored_sessions, db), current))


async def remove_session(host: EngineHost, session_id: str) -> None:
    """Delete a stored session and everything it owns (never the open one, nor one of its parents)."""
    from workbench.engine.agent.subagents import outputs_root  # deferred: the agent's modules, for deleting only
    from workbench.engine.transcript.sessions import delete_session

    current = host.ctx.session.id if host.ctx is not None else None
    config = host.ctx.config if host.ctx is not None else host.launch.config or Config()
    outputs = outputs_root(config.subagents)
    if host.store is not None:
        deleted = await asyncio.to_thread(delete_session, host.store, session_id, outputs, keep=current)
    elif host.launch.db is not None:
        deleted = await asyncio.to_thread(_delete_in, host.launch.db, session_id, outputs, current)
    else:
        raise WorkbenchError("no database is open: " + NOT_STORED)
    gone = (session_id, *deleted.subagents, *deleted.side_calls)
    host.post(msg.SessionDeleted(gone, deleted.describe(), tuple(deleted.warnings)))


def _delete_in(db: Path, session_id: str, outputs: Path, current: str | None) -> Deleted:
    from workbench.engine.transcript.sessions import delete_session

    with Store(db) as store:
        return delete_session(store, session_id, outputs, keep=current)


def _stored_sessions(db: Path) -> list[ListedSession]:
    """The database's sessions while the open one is not stored (a followed transcript)."""
    from workbench.engine.sources.session_list import session_list

    with Store(db) as store:
        return session_list(store)


async def list_compactions(host: EngineHost) -> None:
    from workbench.engine.plans.compaction_history import compaction_history  # deferred, as the compaction's

    if host.ctx is None:
        raise WorkbenchError("no session is open")
    entries = compaction_history(host.ctx)
    ids = [e.summary_id for e in entries if e.summary_id]
    host.post(msg.CompactionsListed(entries, positions_of(host.ctx, ids)))


async def list_queued(host: EngineHost) -> None:
    """The session's edits waiting for its agent's cache to go cold, as the store has them now."""
    from workbench.engine.plans.queued import queued_edits

    _stored(host)
    await host.refresh_if_changed()
    _, ctx = _stored(host)
    edits = queued_edits(ctx)
    host.post(msg.QueuedListed(edits, positions_of(ctx, [m for e in edits for m in e.message_ids])))


async def cancel_queued(host: EngineHost, plan_id: str) -> None:
    """Take back one queued edit, unless the proxy has applied it meanwhile (then say so)."""
    from workbench.engine.plans.queued import cancel_queued as cancel

    _stored(host)
    await host.refresh_if_changed()
    store, ctx = _stored(host)
    entry = await asyncio.to_thread(cancel, store, ctx, plan_id)
    positions = positions_of(ctx, entry.message_ids)
    where = ", ".join(f"#{positions[m]}" for m in entry.message_ids if m in positions) or "a new message"
    host.post(msg.Notice(f"Cancelled the queued {', '.join(entry.actions)} of {where}: no request will carry it."))


async def export_session(host: EngineHost, folder: Path) -> None:
    """Write the open session as ``workbench export`` writes it (Markdown, secrets redacted) to a new file in
    ``folder``, and say where."""
    from workbench.engine.sources.export import free_name, write_export  # deferred: only an export needs it

    ctx = host.ctx
    if ctx is None:
        raise WorkbenchError("no session is open")
    target = free_name(folder, ctx.session.id, "markdown")
    written = await asyncio.to_thread(write_export, ctx, "markdown", target)
    host.post(msg.Notice(f"Exported {len(ctx.messages):,} messages to {written.resolve()}"))
    host.post(msg.Exported(written.resolve()))
