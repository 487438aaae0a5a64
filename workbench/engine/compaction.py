"""Compaction as a plan: what would be summarised, kept and preserved, then applied in one transaction.

The summary here is the offline heuristic checkpoint; an LLM summariser plugs
in behind :func:`plan_compaction` without the agent loop changing.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, Field

from workbench.engine.context import SessionContext
from workbench.engine.models import Message, TextPart, ToolResultPart, ToolUsePart
from workbench.engine.overlay import OverlayEvent
from workbench.engine.projection import ContextItem
from workbench.engine.store import Store

SUMMARY_PREFIX = "[Previous conversation summary]"
TAIL_SHARE = 0.25
TAIL_MIN, TAIL_MAX = 2_000, 15_000
"""The kept tail: 25% of the usable window, clamped (the OpenCode rule)."""
AUTO_CONTINUE = "Continue if you have next steps"

Trigger = Literal["manual", "auto", "recovery"]


class CompactionPlan(BaseModel):
    plan_id: str
    session_id: str
    trigger: Trigger
    summarizer: str
    before_tokens: int
    after_tokens: int
    summarized: list[str] = Field(default_factory=list)
    preserved: list[str] = Field(default_factory=list)
    tail: list[str] = Field(default_factory=list)
    summary: str
    warnings: list[str] = Field(default_factory=list)


def tail_budget(effective_window: int) -> int:
    return int(min(TAIL_MAX, max(TAIL_MIN, TAIL_SHARE * effective_window)))


def split_tail(items: list[ContextItem], budget: int) -> int:
    """Index of the first message kept verbatim; never starts on a tool result (its call would be lost)."""
    start = len(items)
    used = 0
    for i in range(len(items) - 1, -1, -1):
        used += items[i].tokens
        if used > budget:
            break
        start = i
    while start < len(items) and any(isinstance(p, ToolResultPart) for p in items[start].parts):
        start += 1
    return start


def heuristic_summary(messages: list[Message], focus: str | None = None) -> str:
    """A structured checkpoint built from the transcript alone: deterministic and offline."""
    requests = [m.text.strip() for m in messages if m.role == "user" and m.kind == "message" and m.text.strip()]
    files: list[str] = []
    errors: list[str] = []
    names: dict[str, str] = {}
    todos: list[dict[str, str]] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolUsePart):
                names[p.id] = p.name
                path = p.input.get("path")
                if isinstance(path, str) and p.name in ("write_file", "edit_file", "Write", "Edit") and path not in files:
                    files.append(path)
                if p.name in ("todo_write", "TodoWrite") and isinstance(p.input.get("todos"), list):
                    todos = [t for t in p.input["todos"] if isinstance(t, dict)]
            elif isinstance(p, ToolResultPart) and p.is_error:
                errors.append(f"{names.get(p.tool_use_id, 'tool')}: {' '.join(p.text.split())[:160]}")
    last = next((m.text.strip() for m in reversed(messages) if m.role == "assistant" and m.text.strip()), "")
    lines = [SUMMARY_PREFIX, ""]
    if focus:
        lines += ["Focus: " + focus, ""]
    asked = [f"- {' '.join(r.split())[:300]}" for r in requests[-10:]] or ["- (none)"]
    changed = [f"- {f}" for f in files] or ["- (none)"]
    lines += ["User requests:", *asked, "", "Files modified:", *changed, ""]
    if todos:
        lines += ["Todo list:", *[f"- [{t.get('status', 'pending')}] {t.get('content', '')}" for t in todos], ""]
    if errors:
        lines += ["Errors seen:", *[f"- {e}" for e in errors[-5:]], ""]
    lines += ["Where work stopped:", " ".join(last.split())[:600] or "(no assistant reply yet)"]
    return "\n".join(lines)


def plan_compaction(ctx: SessionContext, trigger: Trigger = "manual", focus: str | None = None) -> CompactionPlan:
    view = ctx.view()
    budget = ctx.budget()
    items = [i for i in view.items if i.kind == "message"]
    pinned = ctx.overlay.pinned
    start = split_tail(items, tail_budget(budget.effective_window))
    tail = [i.message_id for i in items[start:] if i.message_id]
    older = items[:start]
    preserved = [i.message_id for i in older if i.message_id in pinned]
    summarized = [i.message_id for i in older if i.message_id and i.message_id not in pinned]
    by_id = {m.id: m for m in ctx.messages}
    summary = heuristic_summary([by_id[i] for i in summarized if i in by_id], focus)
    plan = CompactionPlan(
        plan_id=uuid.uuid4().hex,
        session_id=ctx.session.id,
        trigger=trigger,
        summarizer="heuristic",
        before_tokens=budget.used,
        after_tokens=0,
        summarized=summarized,
        preserved=preserved,
        tail=tail,
        summary=summary,
    )
    plan.after_tokens = _after_tokens(ctx, plan)
    return plan


def _materialise(ctx: SessionContext, plan: CompactionPlan) -> tuple[Message, list[OverlayEvent]]:
    summary = Message(
        id=f"summary-{plan.plan_id[:12]}",
        session_id=ctx.session.id,
        index=len(ctx.messages),
        role="user",
        kind="summary",
        parts=[TextPart(text=plan.summary)],
        source={"compaction": plan.plan_id, "summarizer": plan.summarizer},
    )
    pivot_at = plan.tail[0] if plan.tail else summary.id
    common = {"session_id": ctx.session.id, "plan_id": plan.plan_id, "origin": "compaction"}
    events = [
        OverlayEvent(id=f"{plan.plan_id}:summary", action="summary", message_id=summary.id,
                     reason=f"{plan.trigger} compaction summary", **common),
        OverlayEvent(
            id=f"{plan.plan_id}:pivot", action="pivot", message_id=pivot_at,
            reason=f"{plan.trigger} compaction", tokens_saved=max(0, plan.before_tokens - plan.after_tokens),
            data={"trigger": plan.trigger, "pre_tokens": plan.before_tokens, "summary_id": summary.id,
                  "summarizer": plan.summarizer},
            **common,
        ),
    ]
    return summary, events


def _after_tokens(ctx: SessionContext, plan: CompactionPlan) -> int:
    summary, events = _materialise(ctx, plan)
    trial = ctx.fork()
    trial.append(summary)
    trial.apply_events(events)
    return trial.budget().used


def apply_compaction(store: Store, ctx: SessionContext, plan: CompactionPlan) -> Message:
    """Commit exactly what the plan shows: the summary message and the pivot, in one transaction."""
    summary, events = _materialise(ctx, plan)
    with store.transaction():
        store.save_messages([summary], ctx.counter)
        store.add_overlay_events(events)
    ctx.append(summary)
    ctx.apply_events(events)
    return summary
