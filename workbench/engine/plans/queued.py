"""Edits queued until a proxied agent's prompt cache has gone cold: listed, and cancelled while they wait.

A queued edit is a plan whose events wait (``overlay.PENDING``): the view leaves it out and the proxy applies it
to the first request after a pause longer than the cache lives, recording that request's number
(``request_store.activate_pending``). Until then it can be cancelled: its events are marked undone only where
they still wait, so an edit the proxy has applied is never cancelled behind its back (undo it instead).
"""

from __future__ import annotations

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.plan import HistoryEntry, history
from workbench.engine.transcript.request_store import cancel_pending
from workbench.engine.transcript.store import Store


def queued_edits(ctx: SessionContext) -> list[HistoryEntry]:
    """The session's edits waiting for a cold cache, oldest first (``workbench queued`` numbers them from 1)."""
    return [entry for entry in history(ctx) if entry.state == "queued"]


def find_queued(ctx: SessionContext, ref: str) -> HistoryEntry:
    """A queued edit by its number in :func:`queued_edits` (from 1) or its plan id."""
    edits = queued_edits(ctx)
    for entry in edits:
        if entry.plan_id == ref:
            return entry
    if ref.isdigit() and 1 <= int(ref) <= len(edits):
        return edits[int(ref) - 1]
    if not edits:
        raise WorkbenchError(f"session {ctx.session.id} has no queued edit")
    raise WorkbenchError(f"no queued edit {ref!r} in session {ctx.session.id} (give 1–{len(edits)} or a plan id)")


def cancel_queued(store: Store, ctx: SessionContext, ref: str) -> HistoryEntry:
    """Cancel the queued edit ``ref`` (see :func:`find_queued`); a :class:`WorkbenchError` when the proxy has
    applied it meanwhile."""
    entry = find_queued(ctx, ref)
    if not cancel_pending(store, ctx.session.id, entry.plan_id):
        raise WorkbenchError(f"the edit {entry.plan_id} was applied by the proxy meanwhile; undo it instead")
    ctx.events = [e.model_copy(update={"undone": True}) if e.plan_id == entry.plan_id else e for e in ctx.events]
    ctx.apply_events([])
    return entry.model_copy(update={"state": "cancelled", "undone": True})
