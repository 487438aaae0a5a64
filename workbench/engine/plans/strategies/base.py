"""What every planner reads: the view's messages with their turns, tool calls and results, protections,
and a cheap calibrated estimate of what one change saves.

A planner never changes anything: it reads a :class:`SessionIndex` of the
context as it is now and returns a :class:`~workbench.engine.plans.plan.Plan`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter
from typing import Any

from workbench.engine.context.projection import ContextItem, ContextView, pruned_input
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import Message, Part, TextPart, ToolResultPart, ToolUsePart, posix_path
from workbench.engine.transcript.overlay import Action, Origin
from workbench.engine.transcript.tokens import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, input_json

Planner = Callable[[SessionContext, StrategiesConfig], Plan]
"""A strategy: reads the context, returns what it would change; never changes anything."""
Rewrite = Callable[[SessionContext, Plan], Awaitable[Plan]]
"""Gives a measured plan its final form just before it is applied (the archive digest written by the model)."""

FRAMING = BLOCK_OVERHEAD + MESSAGE_OVERHEAD
"""What a one-part message's raw tokens hold besides its part's own count (see the projector's raw components)."""
SUBAGENT_KEY = "subagent"
"""``session.metadata[SUBAGENT_KEY]`` is true for a sub-agent's session: DCP leaves it alone."""


def is_subagent(ctx: SessionContext) -> bool:
    return bool(ctx.session.metadata.get(SUBAGENT_KEY))


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """``**`` spans directories, ``*`` and ``?`` stay inside one."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def matches_pattern(path: str, pattern: str) -> bool:
    """A relative pattern matches anywhere a path component starts, so absolute paths match too."""
    parts = posix_path(path).lstrip("/").split("/")
    regex = _glob_regex(pattern.lstrip("/"))
    return any(regex.fullmatch("/".join(parts[i:])) for i in range(len(parts)))


@lru_cache(maxsize=4096)
def _protected_path(path: str, patterns: tuple[str, ...]) -> bool:
    return any(matches_pattern(path, pattern) for pattern in patterns)


@lru_cache(maxsize=256)
def _lowered(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(name.lower() for name in names)


def is_protected_tool(name: str, protected: Iterable[str]) -> bool:
    """``name`` is one of ``protected``, without regard to case."""
    return name.lower() in _lowered(tuple(protected))


def is_protected_file(call: ToolUsePart, patterns: Iterable[str]) -> bool:
    paths = call.file_paths()
    return bool(paths) and any(_protected_path(p, tuple(patterns)) for p in paths)


class Call:
    """A tool call of the view, with what every planner asks of it worked out once. (Plain slotted classes here,
    and a message's own facts in the index's columns, not in an object per message: a long session makes tens of
    thousands, and every one is made again, then walked by the cycle collector, on each planning.)"""

    __slots__ = ("changed", "id", "message_id", "name", "part", "part_index", "position", "shown")

    def __init__(self, position: int, message_id: str, part_index: int, part: ToolUsePart, shown: Part,
                 changed: bool) -> None:
        self.position = position
        """Of its message in :attr:`SessionIndex.messages`."""
        self.message_id = message_id
        self.part_index = part_index
        self.part = part
        """As the transcript has it."""
        self.id = part.id
        self.name = part.name
        """The part's, kept here: read by every planner, and a slot is several times quicker to read than a
        part's field (a long session's parts are scattered in memory; the index is not)."""
        self.shown = shown
        """As the model sees it now."""
        self.changed = changed
        """Already pruned or offloaded: nothing left for a strategy to take."""


class Result:
    """A tool result of the view, with its call (None when the call is not in view)."""

    __slots__ = (
        "call",
        "changed",
        "chars",
        "is_error",
        "message_id",
        "part",
        "part_index",
        "position",
        "shown",
        "tokens",
        "tool_name",
    )

    def __init__(self, position: int, message_id: str, part_index: int, part: ToolResultPart, shown: Part,
                 call: Call | None, changed: bool, tokens: int) -> None:
        self.position = position
        self.message_id = message_id
        self.part_index = part_index
        self.part = part
        self.is_error = part.is_error
        self.chars = len(part.text)
        """Characters of the output as written. It and :attr:`is_error` are the part's, kept here for the planners
        (see :attr:`Call.name`)."""
        self.call = call
        self.shown = shown
        self.tool_name = call.name if call is not None else ""
        self.changed = changed
        self.tokens = tokens
        """Raw tokens of :attr:`shown`, -1 until :meth:`SessionIndex.tokens` counts them. A result alone in its
        message is known already: the projector counted the message as that part and its framing."""


@dataclass
class SessionIndex:
    """The view's messages in order, with their turns, tool calls and tool results.

    Built once per view and shared by every planner (see :func:`session_index`), so what
    they all ask (turn, pinned, already changed, the part as shown) is answered here once.
    A message is its position in :attr:`items`; what is known of it is in the lists beside.
    """

    ctx: SessionContext
    view: ContextView
    items: list[ContextItem] = field(default_factory=list)
    """The item of each message in view: what the planners read of a message (its role, parts as sent,
    tokens); the transcript's message itself is found when asked (see :meth:`message`)."""
    turns: list[int] = field(default_factory=list)
    """How many turns had started at each message (0 before the first). A turn starts at a user
    message with text of its own (not tool results, not a summary) and runs until the next. In a sub-agent's
    session (one prompt, then the agent's steps) each step's results start a turn too."""
    only_results: set[int] = field(default_factory=set)
    """The messages that hold tool results and nothing else."""
    calls: dict[str, Call] = field(default_factory=dict)
    call_order: list[Call] = field(default_factory=list)
    """Every call in view order (an id used again is here twice, in :attr:`calls` once: the newest)."""
    callers: list[int] = field(default_factory=list)
    """The messages that hold tool calls, in order."""
    first_calls: list[int] = field(default_factory=list)
    """Beside :attr:`callers`: where each one's calls start in :attr:`call_order`."""
    results: list[Result] = field(default_factory=list)
    result_of: dict[str, Result] = field(default_factory=dict)
    failed: list[Result] = field(default_factory=list)
    """The results that are errors, in order."""
    pinned_ids: AbstractSet[str] = frozenset()
    current_turn: int = 0
    last_summary: int = -1
    """Position of the newest summary in the view (a compaction's, or an archive digest), -1 if none."""
    _by_id: dict[str, Message] | None = field(default=None, init=False, repr=False)

    @classmethod
    def build(cls, ctx: SessionContext) -> SessionIndex:
        view = ctx.view()
        overlay = ctx.overlay
        index = cls(ctx, view, pinned_ids=frozenset(overlay.pinned))
        summaries = overlay.summaries
        touched = {key[0] for key in overlay.pruned}.union(key[0] for key in overlay.offloaded)
        items, turns, only_results = index.items, index.turns, index.only_results
        calls, call_order, callers, first_calls = index.calls, index.call_order, index.callers, index.first_calls
        results, result_of, failed = index.results, index.result_of, index.failed
        turn = 0
        step_turns = is_subagent(ctx)  # one prompt, then steps: protecting "turns" would protect it all
        at = -1  # the position of the message in view
        for item in view.items:
            if item.kind != "message":
                continue
            message_id = item.message_id or ""
            at += 1
            items.append(item)
            # What the item says of its message is read from the item: a slot is several times quicker to read
            # than a message's field. Its badges say whether it is a summary (of either kind, see the projector's
            # badges); its parts are the message's own unless the overlay replaced one.
            if message_id in summaries or "summary" in item.badges:
                index.last_summary = at
            is_touched = message_id in touched
            user = item.role == "user"
            has_result = has_other = has_text = False
            shown = item.parts
            for n, part in enumerate(index.message(at).parts if is_touched else shown):
                # Exact types, not isinstance: the parts are a closed union, and isinstance on a pydantic
                # class costs several times as much (a long session has tens of thousands of parts).
                if type(part) is ToolUsePart:
                    call = Call(at, message_id, n, part, shown[n], is_touched and index.changed(message_id, n))
                    calls[part.id] = call
                    if not callers or callers[-1] != at:
                        callers.append(at)
                        first_calls.append(len(call_order))
                    call_order.append(call)
                    has_other = True
                elif type(part) is ToolResultPart:
                    tool_use_id = part.tool_use_id
                    result = Result(at, message_id, n, part, shown[n], calls.get(tool_use_id),
                                    is_touched and index.changed(message_id, n),
                                    item.raw_tokens - FRAMING if len(shown) == 1 else -1)
                    result_of[tool_use_id] = result
                    results.append(result)
                    if result.is_error:
                        failed.append(result)
                    has_result = True
                else:
                    has_other = True
                    if user and not has_text and type(part) is TextPart:
                        text = part.text
                        has_text = bool(text) and not text.isspace()  # ``bool(text.strip())`` without a copy
            if user and (step_turns and has_result
                         or has_text and not has_result and index.message(at).kind == "message"):
                turn += 1
            turns.append(turn)
            if has_result and not has_other:
                only_results.add(at)
        index.current_turn = turn
        return index

    @property
    def messages(self) -> list[Message]:
        """The transcript's messages in view, in order."""
        return [self.message(position) for position in range(len(self.items))]

    def message(self, position: int) -> Message:
        """The transcript's message at ``position`` in the view, found when asked: the planners read what they
        need of most messages from their items, and asking a long session's transcript for each was a tenth of
        the index's time."""
        item = self.items[position]
        log = self.ctx.messages
        at = item.index
        if at is not None and 0 <= at < len(log) and log.ids[at] == item.message_id:
            return log[at]
        by_id = self._by_id
        if by_id is None:  # the messages' indexes are not their places in the list (a fork, a partial load)
            by_id = self._by_id = {m.id: m for m in log.every()}
        return by_id[item.message_id or ""]

    def calls_at(self, caller: int) -> list[Call]:
        """The calls of the ``caller``-th message of :attr:`callers`, in order."""
        stop = self.first_calls[caller + 1] if caller + 1 < len(self.first_calls) else len(self.call_order)
        return self.call_order[self.first_calls[caller]:stop]

    def calls_of(self, tools: Iterable[str]) -> list[Call]:
        """The calls of ``tools``, in view order: one walk for the one planner that asks, not a list per tool
        kept by every index."""
        names = frozenset(tools)
        return [call for call in self.call_order if call.name in names]

    def tokens(self, result: Result) -> int:
        """Raw tokens of the result as the model sees it now, counted once for every planner that asks."""
        tokens = result.tokens
        if tokens < 0:
            tokens = result.tokens = self.ctx.counter.count_part(result.shown)
        return tokens

    def age(self, position: int) -> int:
        """Turns since the turn of the message at ``position``: 0 for the current one."""
        return self.current_turn - self.turns[position]

    def pinned(self, *message_ids: str) -> bool:
        return any(m in self.pinned_ids for m in message_ids)

    def changed(self, message_id: str, part_index: int) -> bool:
        """Already pruned or offloaded: nothing left for a strategy to take."""
        key = (message_id, part_index)
        overlay = self.ctx.overlay
        return overlay.is_pruned(*key) or key in overlay.offloaded


INDEX_KEY = "strategies.index"


def session_index(ctx: SessionContext) -> SessionIndex:
    """The index of ``ctx`` as it is now, shared by the planners that run one after another."""
    view = ctx.view()
    cached = ctx.derived.get(INDEX_KEY)
    if cached is not None and cached[0] is view and isinstance(cached[1], SessionIndex):
        return cached[1]
    index = SessionIndex.build(ctx)
    ctx.derived[INDEX_KEY] = (view, index)
    return index


class Costs:
    """Calibrated token estimates of one change, with the coefficients the context has learned."""

    def __init__(self, ctx: SessionContext) -> None:
        self.counter = ctx.counter
        calibration = ctx.builder.calibrator.for_model(ctx.model)
        self.ratio, self.overhead = calibration.coefficients()
        self._texts: dict[str, int] = {}
        """Texts counted by this planning: a placeholder recurs for every item, and hashing it is not free."""

    def part_saving(self, shown: Part, replacement: Part) -> int:
        raw = self.counter.count_part(shown) - self.counter.count_part(replacement)
        return round(self.ratio * raw)

    def text_tokens(self, text: str) -> int:
        """Counted once per distinct text, in the counter's cache (reference texts recur on every planning)."""
        tokens = self._texts.get(text)
        if tokens is None:
            key = "text:" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
            tokens = self.counter.cache.get(key)
            if tokens is None:
                tokens = self.counter.cache[key] = self.counter.count_text(text)
            self._texts[text] = tokens
        return tokens

    def output_saving(self, tokens: int, text: str) -> int:
        """Replacing a tool result's output of ``tokens`` raw tokens (images too) with ``text``, which a result
        counts as."""
        return round(self.ratio * (tokens - self.text_tokens(text)))

    def input_saving(self, shown: Part, call: ToolUsePart, replacement: str | None = None) -> int:
        """Pruning a call's input (see ``projection.pruned_input``); a call counts as its name and its JSON input."""
        pruned = pruned_input(call.input) if replacement is None else pruned_input(call.input, replacement)
        after = self.text_tokens(call.name) + self.text_tokens(input_json(pruned))
        return round(self.ratio * (self.counter.count_part(shown) - after))

    def message_cost(self, text: str) -> int:
        """What a new one-text-part message adds."""
        raw = self.counter.count_text(text) + BLOCK_OVERHEAD + MESSAGE_OVERHEAD
        return round(self.ratio * raw + self.overhead)


def new_plan(ctx: SessionContext, strategy: str, origin: Origin = "strategy") -> Plan:
    return Plan(session_id=ctx.session.id, strategy=strategy, origin=origin, tokens_before=ctx.used())


def add_item(
    plan: Plan, message_id: str, action: Action, part_index: int | None, reason: str, saving: int,
    data: dict[str, Any] | None = None,
) -> None:
    plan.items.append(PlanItem(message_id, action, part_index, reason, saving, {} if data is None else data))


def add_or_skip(
    plan: Plan, message_id: str, part_index: int, reason: str, saving: int, what: str,
    data: dict[str, Any] | None = None,
) -> None:
    """A prune that saves tokens joins the plan; one that does not is listed as skipped, saying why."""
    if saving > 0:
        add_item(plan, message_id, "prune", part_index, reason, saving, data)
    else:
        plan.skipped.append(PlanItem(message_id, "prune", part_index,
                                     f"{reason}: skipped, {what} is no larger than its placeholder"))


_SAVED = attrgetter("tokens_saved")


def finish(plan: Plan) -> Plan:
    """Estimated totals: what the items add up to. :func:`measure.measure` replaces them with exact ones."""
    plan.tokens_after = plan.tokens_before - sum(map(_SAVED, plan.items))
    return plan


def describe_call(part: ToolUsePart, width: int = 60) -> str:
    """``Read(file_path=/a/b.py)``: the tool and its first arguments, clipped."""
    args = []
    for key, value in list(part.input.items())[:2]:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        args.append(f"{key}={first_words(text, width)}")
    return f"{part.name}({', '.join(args)})"


def first_words(text: str, width: int) -> str:
    """``' '.join(text.split())[:width]``, reading only the start of the text when that is enough: an argument
    may be a whole file's content, and a planning describes hundreds of calls."""
    head = text[:4 * width]
    words = " ".join(head.split())
    if len(words) <= width and len(head) < len(text):  # mostly blank so far: the words may go on after it
        words = " ".join(text.split())
    return words[:width]
