"""The recovery cascade when the API refuses a request as too long (spec 000): cheap overlay changes first.

The steps, in order: prune duplicate tool results, prune the largest tool outputs, summarise, and as the last
resort drop everything before the current turn. After each step that changed something the request is sent
again; a step that finds nothing to change hands over to the next at once. When the cascade ends without an
accepted request, everything it applied is undone the way ``plans.undo`` undoes a plan (the summary messages
stay in the transcript, hidden), so the session is as it was before the recovery started.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from workbench.engine import events as ev
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction_split import starts_turn
from workbench.engine.plans.measure import commit
from workbench.engine.plans.plan import undo_plans
from workbench.engine.transcript.models import ToolResultPart, ToolUsePart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store

LARGEST_TO_PRUNE = 3

Compact = Callable[[str | None], Awaitable[str | None]]
"""Summarise (None), or drop what comes before the given message; the plan id applied, or None if nothing was."""


@dataclass(frozen=True)
class _Result:
    message_id: str
    part_index: int
    tool_use_id: str
    tokens: int


def _results(ctx: SessionContext) -> tuple[dict[str, str], list[_Result]]:
    """Each tool call's identity (name and input), and the tool results the model still sees in full."""
    calls: dict[str, str] = {}
    results: list[_Result] = []
    for item in ctx.view().items:
        for position, part in enumerate(item.parts):
            if isinstance(part, ToolUsePart):
                calls[part.id] = f"{part.name}:{json.dumps(part.input, sort_keys=True)}"
            elif (
                isinstance(part, ToolResultPart)
                and item.message_id
                and not ctx.overlay.is_pruned(item.message_id, position)
                and item.message_id not in ctx.overlay.pinned
            ):
                results.append(_Result(item.message_id, position, part.tool_use_id, ctx.counter.count_part(part)))
    return calls, results


def _prunes(ctx: SessionContext, targets: list[tuple[_Result, str]]) -> list[OverlayEvent]:
    plan = uuid.uuid4().hex
    return [
        OverlayEvent(id=f"{plan}:{n}", session_id=ctx.session.id, plan_id=plan, action="prune",
                     message_id=result.message_id, part_index=result.part_index, origin="strategy",
                     reason=f"recovery: {why}", tokens_saved=result.tokens)
        for n, (result, why) in enumerate(targets)
    ]


def duplicate_events(ctx: SessionContext) -> list[OverlayEvent]:
    """Prune the results of repeated identical tool calls, keeping the newest."""
    calls, results = _results(ctx)
    seen: set[str] = set()
    targets: list[tuple[_Result, str]] = []
    for result in reversed(results):
        key = calls.get(result.tool_use_id)
        if key is not None and key in seen:
            targets.append((result, "duplicate of a newer identical tool call"))
        elif key is not None:
            seen.add(key)
    return _prunes(ctx, targets)


def largest_events(ctx: SessionContext, count: int = LARGEST_TO_PRUNE) -> list[OverlayEvent]:
    """Prune the ``count`` largest tool results the model still sees in full."""
    _, results = _results(ctx)
    largest = sorted(results, key=lambda r: r.tokens, reverse=True)[:count]
    return _prunes(ctx, [(r, f"one of the largest tool outputs ({r.tokens:,} tokens)") for r in largest])


def turn_start(ctx: SessionContext) -> str | None:
    """The message the current turn starts with, when something before it could be dropped."""
    items = [i for i in ctx.view().items if i.kind == "message"]
    position = next((p for p in range(len(items) - 1, -1, -1) if starts_turn(items[p])), None)
    if not position:  # no turn start, or nothing before it
        return None
    return items[position].message_id


@dataclass(frozen=True)
class _Step:
    did: str
    """What it did, for the one-line error when the cascade ends: "summarised the conversation"."""
    run: Callable[[], Awaitable[str | None]]


class Recovery:
    """One model call's recovery: the steps not yet tried, and the plans applied so far (to undo on failure)."""

    def __init__(self, store: Store, ctx: SessionContext, emit: ev.EventSink, compact: Compact) -> None:
        self.store = store
        self.ctx = ctx
        self._emit = emit
        self._compact = compact
        self._steps = deque([
            _Step("pruned duplicate tool results", lambda: self._prune("recovery: duplicates", duplicate_events)),
            _Step("pruned the largest tool outputs", lambda: self._prune("recovery: largest", largest_events)),
            _Step("summarised the conversation", lambda: compact(None)),
            _Step("dropped the messages before this turn", self._truncate),
        ])
        self.applied: list[str] = []
        """Plan ids, in the order applied."""
        self.done: list[str] = []
        self._resent = False

    @property
    def has_more(self) -> bool:
        """Whether anything is left to try: a step, or (when no step has changed anything) one resend as is."""
        return bool(self._steps) or not (self.applied or self._resent)

    async def next(self) -> bool:
        """Run steps in order until one changes the context; False when none is left that does.

        When no step has changed anything, the request is sent once more as it is: the API may count a
        request differently than the budget does, and a refusal it does not repeat costs one request.
        """
        while self._steps:
            step = self._steps.popleft()
            plan_id = await step.run()
            if plan_id is not None:
                self.applied.append(plan_id)
                self.done.append(step.did)
                return True
        if not self.applied and not self._resent:
            self._resent = True
            return True
        return False

    def summary(self) -> str:
        """What the cascade did, for the end of the one-line error."""
        if not self.done:
            return "nothing could be removed"
        return f"{', '.join(self.done)}; undone"

    def rollback(self) -> bool:
        """Undo every plan this recovery applied; whether there was any."""
        if not self.applied:
            return False
        undo_plans(self.store, self.ctx, self.applied)
        self._emit(ev.Warning(kind="recovery_undone",
                              message=f"the request still failed; the recovery's changes ({', '.join(self.done)}) "
                                      "were undone"))
        self.applied = []
        return True

    async def _prune(self, strategy: str, planner: Callable[[SessionContext], list[OverlayEvent]]) -> str | None:
        events = planner(self.ctx)
        if not events:
            return None
        commit(self.store, self.ctx, events)
        self._emit(ev.PlanApplied(strategy=strategy, plan_id=events[0].plan_id, items=len(events),
                                  tokens_saved=sum(e.tokens_saved for e in events)))
        return events[0].plan_id

    async def _truncate(self) -> str | None:
        start = turn_start(self.ctx)
        return await self._compact(start) if start is not None else None
