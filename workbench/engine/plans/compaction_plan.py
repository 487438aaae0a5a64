"""A compaction is a :class:`Plan` like every strategy's; :class:`CompactionPreview` is what a user reads of one.

The plan's items are the overlay events a compaction writes (pins that keep a preserved message's tool call
and result together, the pivot the model sees nothing before, the summary shown first), and its new messages
ride on them as a strategy's do (``measure.NEW_MESSAGE``): the hidden boundary marker on the pivot, the
summary on its summary item. It is measured by ``plans.measure.measure`` (the whole budget after, with the
pivot saving the difference), written by ``plans.measure.commit``, listed by ``plans.plan.history`` and
undone by ``plans.plan.undo``, as every plan is.

The preview holds that plan with what a user reads before applying it: which messages are summarised,
preserved or kept, the exact prompt, the editable summary, warnings, and the basis a stale preview is
refused by. Editing the summary makes and measures the plan again (:func:`measured`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from workbench.engine.context.budget import Budget
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction_metadata import CompactionMetadata
from workbench.engine.plans.compaction_prompt import SUMMARY_PREFIX
from workbench.engine.plans.measure import NEW_MESSAGE, measure
from workbench.engine.plans.plan import Plan, PlanItem

Trigger = Literal["manual", "auto", "recovery"]
STRATEGY = "compaction"


class CompactionPreview(BaseModel):
    """Everything a compaction would do; edit ``summary`` before applying if you like (applying makes the
    plan again from it)."""

    plan: Plan
    """The change itself, measured: ``plan.budget_after`` is the whole budget once it is applied."""
    trigger: Trigger
    summarizer: str
    """The summariser that produced ``summary``: llm, heuristic, or truncation (after failures)."""
    model: str | None = None
    created_at: datetime
    split_rule: str
    tail_budget: int | None
    summarized: list[str] = Field(default_factory=list)
    """Messages the summary replaces (earlier summaries included), in view order."""
    preserved: list[str] = Field(default_factory=list)
    tail: list[str] = Field(default_factory=list)
    prior_summaries: list[str] = Field(default_factory=list)
    pair_pins: list[str] = Field(default_factory=list)
    """Preserved messages the plan pins so that a preserved tool call keeps its result (or vice versa)."""
    turn_pin: str | None = None
    """The user's message of the turn in progress, which the plan pins: the model has not answered it yet."""
    focus: str | None = None
    instructions: list[str] = Field(default_factory=list)
    """Added by PreCompact hooks."""
    system_prompt: str
    prompt: str
    summary: str
    metadata: CompactionMetadata
    warnings: list[str] = Field(default_factory=list)
    basis: str
    """Fingerprint of the session the plan was made on; apply refuses a plan for a session that moved on."""

    @property
    def plan_id(self) -> str:
        return self.plan.plan_id

    @property
    def session_id(self) -> str:
        return self.plan.session_id

    @property
    def before_tokens(self) -> int:
        return self.plan.tokens_before

    @property
    def after_tokens(self) -> int:
        return self.plan.tokens_after

    @property
    def budget_after(self) -> Budget | None:
        return self.plan.budget_after

    def preview_json(self) -> dict[str, Any]:
        """The preview as ``compact --json`` prints it and ``compact --apply --plan`` reads it back: the plan's
        figures beside the rest (the plan's own copy of the summary is the one measured, ``summary`` the one
        applied)."""
        return {"plan_id": self.plan_id, "session_id": self.session_id, "before_tokens": self.before_tokens,
                "after_tokens": self.after_tokens, **self.model_dump(mode="json")}


def basis(ctx: SessionContext) -> str:
    digest = hashlib.sha256()
    for event in ctx.events:
        digest.update(f"{event.id}:{int(event.undone)}\n".encode())
    last = ctx.messages[-1].id if ctx.messages else ""
    return f"{len(ctx.messages)}:{last}:{len(ctx.events)}:{digest.hexdigest()[:16]}"


def summary_text(body: str, metadata: CompactionMetadata) -> str:
    return f"{SUMMARY_PREFIX}\n\n{body.strip()}\n\n{metadata.as_text()}"


def normalise(text: str) -> str:
    """A summary always starts with the prefix the model (and spec 003) recognise it by."""
    stripped = text.strip()
    return stripped if stripped.startswith(SUMMARY_PREFIX) else f"{SUMMARY_PREFIX}\n\n{stripped}"


def _items(preview: CompactionPreview, text: str) -> list[PlanItem]:
    """Pins, pivot (carrying the marker), summary: the marker is stored just before the summary, as a replay
    from a checkpoint expects."""
    plan_id, trigger = preview.plan_id, preview.trigger
    auto = trigger != "manual"
    marker_id, summary_id = f"{plan_id}-marker", f"{plan_id}-summary"
    items = [PlanItem(message_id, "pin", None, "keeps a preserved message's tool call and result together")
             for message_id in preview.pair_pins]
    if preview.turn_pin is not None:
        items.append(PlanItem(preview.turn_pin, "pin", None, "the user's message of the turn in progress: the model "
                              "has not answered it yet"))
    marker = {"id": marker_id, "role": "system", "kind": "compact_boundary", "agent_visible": False, "text": "",
              "source": {"compaction": plan_id, "trigger": trigger, "auto": auto}}
    items.append(PlanItem(preview.tail[0] if preview.tail else marker_id, "pivot", None, f"{trigger} compaction", 0, {
        "trigger": trigger, "auto": auto, "pre_tokens": None, "post_tokens": None, "summary_id": summary_id,
        "marker_id": marker_id, "summarizer": preview.summarizer, "model": preview.model,
        "summarized": len(preview.summarized), "preserved": len(preview.preserved), "tail": len(preview.tail),
        "plan_files": preview.metadata.plan_files, "reinject_plan_files": bool(preview.metadata.plan_files),
        NEW_MESSAGE: marker,
    }))
    summary = {"role": "user", "kind": "summary", "text": text,
               "source": {"compaction": plan_id, "summarizer": preview.summarizer, "model": preview.model}}
    items.append(PlanItem(summary_id, "summary", None, f"{trigger} compaction summary", 0, {NEW_MESSAGE: summary}))
    return items


def measured(ctx: SessionContext, preview: CompactionPreview, text: str) -> Plan:
    """The compaction's plan with ``text`` as its summary, measured on ``ctx`` by the one measure; the figures
    it found are written where the history and the boundary marker show them."""
    plan = Plan(plan_id=preview.plan_id, session_id=ctx.session.id, strategy=STRATEGY, origin="compaction",
                items=_items(preview, text))
    measure(ctx, plan)
    before, after = plan.tokens_before, plan.tokens_after
    pivot = next(item for item in plan.items if item.action == "pivot")
    pivot.data = data = {**(pivot.data or {}), "pre_tokens": before, "post_tokens": after}
    data[NEW_MESSAGE]["text"] = f"Conversation compacted ({preview.trigger}): {before:,} → {after:,} tokens"
    return plan
