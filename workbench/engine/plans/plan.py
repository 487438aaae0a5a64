"""Plans: proposed overlay changes, applied atomically, undone and redone as one.

Every context change (a strategy, a manual pin or prune, a compaction) is a
plan. Applying writes its overlay events in one transaction; undo marks the
latest applied plan's events undone, redo marks them live again. The
transcript is never touched.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workbench.engine.context.budget import Budget
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.overlay import (
    NOT_UNDOABLE_ORIGINS,
    Action,
    EntryState,
    Origin,
    OverlayEvent,
    entry_state,
)
from workbench.engine.transcript.store import Store


@dataclass(slots=True)
class PlanItem:
    """One change of a plan.

    A slotted dataclass, not a pydantic model: planners make one per changed part
    and a long session's plans hold tens of thousands (a pydantic instance costs
    several times as much to make and to collect). It still round-trips through
    :class:`Plan`'s validation and JSON, which accept dataclasses; the overlay
    events it becomes are pydantic models.
    """

    message_id: str
    action: Action
    part_index: int | None = None
    reason: str = ""
    tokens_saved: int = 0
    data: dict[str, Any] | None = None
    """What the item carries besides its action (the message it adds, an offload's reference); None when nothing,
    as for most: a planning makes thousands of items, and an empty dict for each was a fortieth of its time."""


class Plan(BaseModel):
    """What a strategy would change; nothing is changed until it is applied.

    Measured by :func:`workbench.engine.plans.measure.measure` (the one measure: the whole budget after,
    by projecting the plan on a copy) and applied by its ``apply``, whatever made the plan."""

    model_config = ConfigDict(defer_build=True)  # built when first used: opening a session makes no plan

    plan_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    session_id: str
    strategy: str
    origin: Origin = "strategy"
    tokens_before: int = 0
    tokens_after: int = 0
    budget_after: Budget | None = Field(default=None, exclude=True)
    """The whole budget once applied, by component: what a preview shows (set by measuring)."""
    items: list[PlanItem] = Field(default_factory=list)
    skipped: list[PlanItem] = Field(default_factory=list)
    """What the strategy found and left as it is, each with why (an input too small to be worth a placeholder);
    never applied."""

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def events(self) -> list[OverlayEvent]:
        now = datetime.now(UTC)
        return [
            OverlayEvent(
                id=f"{self.plan_id}:{n}",
                session_id=self.session_id,
                plan_id=self.plan_id,
                action=item.action,
                message_id=item.message_id,
                part_index=item.part_index,
                origin=self.origin,
                reason=item.reason or self.strategy,
                tokens_saved=item.tokens_saved,
                data={**(item.data or {}), "strategy": self.strategy},
                created_at=now,
            )
            for n, item in enumerate(self.items)
        ]


class HistoryEntry(BaseModel):
    model_config = ConfigDict(defer_build=True)  # as Plan's
    plan_id: str
    strategy: str
    origin: str
    created_at: datetime | None
    actions: list[str]
    items: int
    tokens_saved: int
    undone: bool
    state: EntryState = "applied"
    request: int | None = None
    """A queued edit's: the number of the proxied request it applied from."""
    message_ids: list[str] = Field(default_factory=list)


def history(ctx: SessionContext) -> list[HistoryEntry]:
    """Every plan, oldest first: applied, queued, undone or cancelled."""
    entries: dict[str, HistoryEntry] = {}
    for event in ctx.events:
        entry = entries.get(event.plan_id)
        if entry is None:
            seq = event.data.get("activated_seq")
            entry = entries[event.plan_id] = HistoryEntry(
                plan_id=event.plan_id, strategy=str(event.data.get("strategy", event.origin)), origin=event.origin,
                created_at=event.created_at, actions=[], items=0, tokens_saved=0, undone=event.undone,
                state=entry_state(event), request=seq if isinstance(seq, int) else None,
            )
        if event.action not in entry.actions:
            entry.actions.append(event.action)
        if event.message_id not in entry.message_ids:
            entry.message_ids.append(event.message_id)
        entry.items += 1
        entry.tokens_saved += event.tokens_saved
    return list(entries.values())


def _set_undone(store: Store, ctx: SessionContext, plan_id: str, undone: bool) -> None:
    """Undo or redo one plan, chosen from the history this context holds: refused (:class:`StaleSession`) when
    another program changed the session since, so an undo is never reported that another one already did."""
    with ctx.writing(store):
        store.set_plan_undone(ctx.session.id, plan_id, undone)
    ctx.events = [e.model_copy(update={"undone": undone}) if e.plan_id == plan_id else e for e in ctx.events]
    ctx.apply_events([])


def undo_plans(store: Store, ctx: SessionContext, plan_ids: Collection[str]) -> None:
    """Mark these plans undone together (a failed recovery taking back what it tried), with one rebuild."""
    if not plan_ids:
        return
    with ctx.writing(store, check=False):  # taking back its own plans, whatever else changed
        for plan_id in plan_ids:
            store.set_plan_undone(ctx.session.id, plan_id, True)
    ctx.events = [e.model_copy(update={"undone": True}) if e.plan_id in plan_ids else e for e in ctx.events]
    ctx.apply_events([])


def undo(store: Store, ctx: SessionContext) -> HistoryEntry:
    """Revert the latest applied plan; a :class:`WorkbenchError` when there is none."""
    for entry in reversed(history(ctx)):
        if not entry.undone and entry.origin not in NOT_UNDOABLE_ORIGINS:
            _set_undone(store, ctx, entry.plan_id, True)
            return entry.model_copy(update={"undone": True})
    raise WorkbenchError("nothing to undo")


def redo(store: Store, ctx: SessionContext) -> HistoryEntry:
    """Re-apply the plan undone most recently, if nothing was applied after it."""
    entries = [e for e in history(ctx) if e.origin not in NOT_UNDOABLE_ORIGINS]
    undone_tail = []
    for entry in reversed(entries):
        if not entry.undone:
            break
        undone_tail.append(entry)
    if not undone_tail:
        raise WorkbenchError("nothing to redo")
    target = undone_tail[-1]
    _set_undone(store, ctx, target.plan_id, False)
    return target.model_copy(update={"undone": False})
