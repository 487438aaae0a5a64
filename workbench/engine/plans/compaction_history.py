"""Every compaction of a session, applied or undone, and what follows from the latest one.

Built on :func:`plans.history` (time, undone) and the pivot events' data (trigger, summariser,
tokens before and after, how many messages the summary replaced). Compactions a transcript
recorded itself (a Claude Code ``compact_boundary``) are listed too, with what the file says.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans import plan as plans
from workbench.engine.transcript.overlay import NOT_UNDOABLE_ORIGINS, OverlayEvent
from workbench.engine.transcript.store import Store

STRATEGY = "compaction"


class CompactionEntry(BaseModel):
    plan_id: str
    created_at: datetime | None
    trigger: str
    summarizer: str
    model: str | None = None
    before_tokens: int | None
    after_tokens: int | None
    summarized: int | None
    """Messages the summary replaced (None for a compaction recorded by an imported transcript)."""
    preserved: int | None = None
    summary_id: str | None = None
    origin: str
    undone: bool


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def compaction_history(ctx: SessionContext) -> list[CompactionEntry]:
    """Oldest first."""
    entries = {entry.plan_id: entry for entry in plans.history(ctx)}
    out: list[CompactionEntry] = []
    for event in ctx.events:
        if event.action != "pivot":
            continue
        entry = entries.get(event.plan_id)
        data = event.data
        imported = event.origin == "import"
        out.append(CompactionEntry(
            plan_id=event.plan_id,
            # An imported boundary's own time (every imported event shares the import's plan and its entry)
            created_at=event.created_at if imported else (entry.created_at if entry else None) or event.created_at,
            trigger=str(data.get("trigger", "manual")),
            summarizer=str(data.get("summarizer") or ("recorded in the transcript" if imported else "unknown")),
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            before_tokens=_int(data.get("pre_tokens")),
            after_tokens=_int(data.get("post_tokens")),
            summarized=_int(data.get("summarized")),
            preserved=_int(data.get("preserved")),
            summary_id=data.get("summary_id") if isinstance(data.get("summary_id"), str) else None,
            origin=event.origin,
            undone=event.undone,
        ))
    return out


def undo_compaction(store: Store, ctx: SessionContext) -> CompactionEntry:
    """Undo the latest compaction, which must be the latest change still applied (plans are undone in order)."""
    live = [e for e in plans.history(ctx) if not e.undone and e.origin not in NOT_UNDOABLE_ORIGINS]
    if not live:
        raise WorkbenchError("nothing to undo: no compaction (or other change) is applied")
    if live[-1].strategy != STRATEGY:
        raise WorkbenchError(
            f"the latest change is not a compaction but {live[-1].strategy!r} ({live[-1].plan_id}); undo that first"
        )
    undone = plans.undo(store, ctx)
    entry = next(e for e in compaction_history(ctx) if e.plan_id == undone.plan_id)
    return entry


def _latest_pivot(ctx: SessionContext) -> OverlayEvent | None:
    return next((e for e in reversed(ctx.events) if e.action == "pivot" and not e.undone), None)


def plan_files_to_reinject(ctx: SessionContext) -> list[str]:
    """Plan files the prompt builder should inject into the next request (spec 000: "plan files re-injected
    on next message"): those of the latest live compaction, until a model reply follows its summary."""
    pivot = _latest_pivot(ctx)
    if pivot is None or pivot.origin != "compaction" or not pivot.data.get("reinject_plan_files"):
        return []
    summary_id = pivot.data.get("summary_id")
    for message in reversed(ctx.messages):
        if message.role == "assistant":
            return []  # the model has answered since: the files went in with that request
        if message.id == summary_id:
            files = pivot.data.get("plan_files")
            return [str(f) for f in files] if isinstance(files, list) else []
    return []
