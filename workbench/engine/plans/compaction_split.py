"""Where a compaction splits the view: older messages (summarised or preserved) and a verbatim tail.

The tail is chosen by tokens (or a message count), never splits a tool call from its result, and
never reaches back past the previous compaction's summary (what came before that summary is the
summary's to carry). Preserved messages are the pinned ones among the older messages, plus
whatever completes their tool pairs, so the request stays valid.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from workbench.engine.context.projection import ContextItem
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.transcript.models import TextPart, ToolResultPart, ToolUsePart


def tail_budget(config: CompactionConfig, usable_window: int, conversation_tokens: int) -> int | None:
    """Tokens kept verbatim; None means "keep ``keep_recent_messages`` messages" (spec 003's count rule)."""
    match config.split:
        case "opencode":
            return int(min(config.tail_max, max(config.tail_min, config.tail_share * usable_window)))
        case "keep_recent":
            if config.keep_recent_tokens <= 0:
                return None
            return min(config.keep_recent_tokens, usable_window // 2)
        case "preserve_ratio":
            return int(config.preserve_ratio * conversation_tokens)
    raise ValueError(f"unknown split rule {config.split!r}")


def valid_starts(items: Sequence[ContextItem]) -> list[bool]:
    """``valid[p]``: the tail may start at position ``p`` (0..len) without parting a tool call from its result.

    Every position at once, O(session): for inspecting a view; :func:`split_point` checks only the tail's.
    """
    calls: dict[str, int] = {}
    crossing = [0] * (len(items) + 2)
    for position, item in enumerate(items):
        for part in item.parts:
            if isinstance(part, ToolUsePart):
                calls[part.id] = position
            elif isinstance(part, ToolResultPart) and part.tool_use_id in calls:
                call = calls[part.tool_use_id]
                if call < position:  # starts in (call, position] would separate them
                    crossing[call + 1] += 1
                    crossing[position + 1] -= 1
    valid: list[bool] = []
    open_pairs = 0
    for position in range(len(items) + 1):
        open_pairs += crossing[position]
        valid.append(open_pairs == 0)
    return valid


def summary_floor(items: Sequence[ContextItem]) -> int:
    """First position the tail may start at: after everything written before the last summary in view."""
    summaries = [i.index for i in items if "summary" in i.badges and i.index is not None]
    if not summaries:
        return 0
    last = max(summaries)
    return 1 + max(p for p, item in enumerate(items) if item.index is not None and item.index <= last)


def starts_turn(item: ContextItem) -> bool:
    """A user message of the user's own (text, not tool results, not a summary): where a turn begins."""
    return (item.role == "user" and "summary" not in item.badges
            and any(isinstance(p, TextPart) for p in item.parts)
            and not any(isinstance(p, ToolResultPart) for p in item.parts))


def split_point(
    items: Sequence[ContextItem], budget: int | None, keep_messages: int, floor: int = 0, *, at_turn: bool = False
) -> int:
    """Position of the first tail item; ``len(items)`` (an empty tail) when not even one whole turn fits.

    ``at_turn``: the tail starts where a user turn starts: the first one inside the budget, else the turn the
    budget ends in, kept whole. Walks back from the end only as far as the tail reaches: O(tail), not O(session).
    """
    n = len(items)
    if budget is None:
        start = max(0, n - keep_messages)
    else:
        start, used = n, 0
        for position in range(n - 1, -1, -1):
            used += items[position].tokens
            if used > budget:
                break
            start = position
    low = max(start, floor)
    # valid[p - low]: no result in items[p:] answers a call before p.
    valid = [True] * (n + 1 - low)
    unanswered: set[str] = set()
    for position in range(n - 1, low - 1, -1):
        parts = items[position].parts
        unanswered.update(p.tool_use_id for p in parts if isinstance(p, ToolResultPart))
        unanswered.difference_update(p.id for p in parts if isinstance(p, ToolUsePart))
        valid[position - low] = not unanswered
    if at_turn:
        inside = next((p for p in range(low, n) if valid[p - low] and starts_turn(items[p])), None)
        if inside is not None:
            return inside
        for position in range(low - 1, floor - 1, -1):  # the turn the budget ends in, from its start
            parts = items[position].parts
            unanswered.update(p.tool_use_id for p in parts if isinstance(p, ToolResultPart))
            unanswered.difference_update(p.id for p in parts if isinstance(p, ToolUsePart))
            if not unanswered and starts_turn(items[position]):
                return position
    return next(p for p in range(low, n + 1) if valid[p - low])


def current_turn(items: Sequence[ContextItem]) -> int:
    """Where the turn in progress starts (its user message); ``len(items)`` when the model has answered the
    last turn (the view ends with an assistant message that calls no tool).

    Not bounded by :func:`summary_floor`: a turn kept by an earlier compaction was written before that
    compaction's summary, yet the summary does not carry it.
    """
    if not items or (items[-1].role == "assistant"
                     and not any(isinstance(p, ToolUsePart) for p in items[-1].parts)):
        return len(items)
    return next((p for p in range(len(items) - 1, -1, -1) if starts_turn(items[p])), len(items))


def _partners(older: Sequence[ContextItem], position: int) -> list[int]:
    """Positions holding the other half of this item's tool calls and results (they sit close by)."""
    item = older[position]
    calls = {p.id for p in item.parts if isinstance(p, ToolUsePart)}
    results = {p.tool_use_id for p in item.parts if isinstance(p, ToolResultPart)} - calls
    calls -= {p.tool_use_id for p in item.parts if isinstance(p, ToolResultPart)}
    found: list[int] = []
    for step, wanted, kind in ((1, calls, ToolResultPart), (-1, results, ToolUsePart)):
        other = position + step
        while wanted and 0 <= other < len(older):
            ids = {p.tool_use_id if isinstance(p, ToolResultPart) else p.id
                   for p in older[other].parts if isinstance(p, kind)}
            if ids & wanted:
                found.append(other)
                wanted = wanted - ids
            other += step
    return found


def complete_pairs(older: Sequence[ContextItem], keep: Collection[int]) -> set[int]:
    """``keep`` plus every older position needed so that no kept tool call or result loses its partner."""
    kept = set(keep)
    pending = list(kept)
    while pending:
        for partner in _partners(older, pending.pop()):
            if partner not in kept:
                kept.add(partner)
                pending.append(partner)
    return kept


@dataclass(frozen=True)
class Split:
    budget: int | None
    tail: list[ContextItem]
    preserved: list[ContextItem]
    prior: list[ContextItem]
    """Earlier compaction summaries being replaced: quoted once in the prompt, not as conversation."""
    conversation: list[ContextItem]
    """What the summary replaces (earlier summaries aside)."""
    pair_pins: list[str]
    """Preserved only to keep a tool pair whole: pinned by the compaction itself."""
    turn_pin: str | None = None
    """The user's message of the turn in progress, preserved: pinned by the compaction itself."""


def split_view(
    items: Sequence[ContextItem], pinned: Collection[str], config: CompactionConfig, usable_window: int
) -> Split:
    """Split the view's message items (in view order) for a compaction."""
    budget = tail_budget(config, usable_window, sum(i.tokens for i in items))
    start = split_point(items, budget, config.keep_recent_messages, summary_floor(items), at_turn=config.tail_at_turn)
    turn = current_turn(items)
    if turn >= start or (asked := items[turn].message_id) is None or asked in pinned:
        return split_at(items, start, pinned, budget)
    # The user's message of the turn in progress stays verbatim, whatever the tail's budget: the model has not
    # answered it yet. The turn's earlier steps may still be summarised (a long agentic turn stays compactable).
    return replace(split_at(items, start, {*pinned, asked}, budget), turn_pin=asked)


def split_at(items: Sequence[ContextItem], start: int, pinned: Collection[str], budget: int | None = None) -> Split:
    """The split with the tail starting at position ``start`` (a valid start: see :func:`valid_starts`)."""
    older = list(items[:start])
    prior_at = {p for p, i in enumerate(older) if "summary" in i.badges and i.message_id not in pinned}
    pinned_at = {p for p, i in enumerate(older) if i.message_id in pinned}
    kept = complete_pairs(older, pinned_at)
    preserved = [older[p] for p in sorted(kept)]
    return Split(
        budget=budget,
        tail=list(items[start:]),
        preserved=preserved,
        prior=[older[p] for p in sorted(prior_at - kept)],
        conversation=[i for p, i in enumerate(older) if p not in kept and p not in prior_at],
        pair_pins=[older[p].message_id or "" for p in sorted(kept - pinned_at)],
    )
