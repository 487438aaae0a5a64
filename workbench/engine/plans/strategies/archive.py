"""Archiving old tool results behind one digest (spec 003, "Tool Result Summarization").

When more than ``cutoff`` tool results are visible, the oldest are archived
(hidden from the model, kept in the transcript) until at most ``cutoff`` remain,
and one digest message (role user, kind ``tool_summary``, agent-visible,
user-hidden) lists what they were.

Pairs stay whole: the unit archived is an assistant message with tool calls
together with the message(s) holding all of their results, so no tool_use is
ever left without its tool_result or the reverse. A unit is skipped (and later
ones considered) when it is not clean: a call without a result, a result
message that also holds something else, a pinned message, or a tool id used
again later (a replayed script does that): the newest result of an id answers
only the newest call of it. Anything else
the assistant message held (its text, its thinking) is archived with it.

The digest is a new transcript message that the plan adds; its ``summary``
event is part of the plan, and projection hides a ``tool_summary`` whose event
was undone, so undo takes the digest away with the archive. The planner writes
the offline digest; ``archive_digest`` has the model write it instead where one
is configured (the agent loop does that before applying).

:func:`plan_archive_message` is the user's archive of one message (the CLI's
``workbench archive``, the app's ``a`` key): the message with every message
holding the other half of its tool calls, so the model never sees a call
without its result.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Literal

from workbench.engine.context.session import SessionContext
from workbench.engine.context.wire_archive import (
    FILE_KEY,
    IDS_KEY,
    archive_path,
    archive_text,
    file_line,
    without_file_line,
)
from workbench.engine.context.wire_offload import reader_of
from workbench.engine.plans.measure import NEW_MESSAGE
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.plans.strategies.base import (
    Costs,
    Result,
    SessionIndex,
    add_item,
    describe_call,
    finish,
    new_plan,
    session_index,
)
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import Message, ToolResultPart, ToolUsePart

DIGEST_HEADER = "[Compaction tool digest]"
"""Spec 003's prefix of the digest message."""
CLIP_MARKER = "\n… [digest clipped] …\n"


Unit = tuple[int, tuple[int, ...], tuple[Result, ...]]
"""An assistant message with tool calls and the messages holding their results: (the caller's position, the
holders' positions, the results). A plain tuple: a long session has thousands of units, made on every planning."""


def units(index: SessionIndex) -> Iterator[Unit]:
    """Every clean unit of the view, oldest first (made as they are asked for: the planner may stop early)."""
    # The view's items, not the messages, for roles and part counts: their slots are quicker to read, and
    # close together in memory (a long session's messages are not).
    items, result_of, only_results = index.items, index.result_of, index.only_results
    calls = index.call_order
    last = len(calls) - 1
    for caller, (at, first) in enumerate(zip(index.callers, index.first_calls, strict=True)):
        if items[at].role != "assistant":
            continue
        if first == last or calls[first + 1].position != at:  # one call: the common case, made simply
            call = calls[first]
            result = result_of.get(call.id)
            if result is None or result.call is not call:  # no result, or one answering a later reuse of the id
                continue
            holder = result.position
            if holder in only_results and len(items[holder].parts) == 1:
                yield at, (holder,), (result,)
            continue
        group = index.calls_at(caller)
        results = [result_of.get(c.id) for c in group]
        found = [r for r, c in zip(results, group, strict=True) if r is not None and r.call is c]
        if len(found) < len(results):
            continue
        holders = list(dict.fromkeys(r.position for r in found))
        if all(h in only_results for h in holders) and sum(len(items[h].parts) for h in holders) == len(found):
            yield at, tuple(holders), tuple(found)  # the holders answer these calls and nothing else


def in_flight(index: SessionIndex) -> bool:
    """The newest message asks for tools whose results are not there yet: nothing may follow it now."""
    if not index.items:
        return False
    last = index.items[-1]
    return last.role == "assistant" and any(
        type(p) is ToolUsePart and p.id not in index.result_of for p in last.parts
    )


def clip(text: str, limit: int) -> str:
    """Head and tail, as spec 003 clips its heuristic digest."""
    if len(text) <= limit:
        return text
    keep = limit - len(CLIP_MARKER)
    head = keep // 2
    return text[:head] + CLIP_MARKER + text[len(text) - (keep - head):]


def digest_line(result: Result) -> str:
    text = result.part.text
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    call = describe_call(result.call.part) if result.call else "tool"
    lines = text.count("\n") + 1 if text else 0
    status = "error: " if result.part.is_error else ""
    return f"- {call} → {status}{first[:100]!r} ({lines:,} lines, {len(text.encode()):,} bytes)"


def digest_header(archived: int) -> str:
    return (f"{DIGEST_HEADER} {archived} older tool results were archived: the model no longer sees them, "
            "the transcript keeps them.")


def digest(results: list[Result], limit: int, earlier: Sequence[str] = (), total: int | None = None) -> str:
    """The digest, clipped to ``limit``; only the lines that can show are written (thousands may be archived).
    ``earlier``: the bodies of the digests it replaces, first; ``total``: the results all of it stands for."""
    header = digest_header(len(results) if total is None else total)
    head = [header, *earlier]
    size = sum(len(line) + 1 for line in head)
    shown = 0
    while shown < len(results) and size <= limit:
        head.append(digest_line(results[shown]))
        size += 1 + len(head[-1])
        shown += 1
    if shown == len(results):
        return clip("\n".join(head), limit)
    tail: list[str] = []
    size = 0
    rest = results[shown:]
    while len(tail) < len(rest) and size <= limit:
        tail.append(digest_line(rest[-1 - len(tail)]))
        size += 1 + len(tail[-1])
    # Enough of both ends to clip exactly as the whole text would be (a gap line stands for the middle).
    gap = ["…"] if len(tail) < len(rest) else []
    return clip("\n".join([*head, *gap, *reversed(tail)]), limit)


def due(ctx: SessionContext, config: StrategiesConfig) -> bool:
    """A batch of tool results past the cutoff, with the window used enough: cheaper than planning, asked before
    every request."""
    share = config.archive.automatic_from
    if share > 0:
        budget = ctx.budget()
        if budget.used < share * budget.effective_window:
            return False
    enough = config.archive.cutoff + config.archive.batch
    count = 0
    for item in ctx.view().items:
        for part in item.parts:
            if isinstance(part, ToolResultPart):
                count += 1
                if count >= enough:
                    return True
    return False


def earlier_digests(index: SessionIndex) -> list[tuple[str, str, int, int]]:
    """The archive digests in view, oldest first: (message id, body below the header, results it stands for,
    tokens). A new archive replaces them, so the model reads one digest however many passes there were."""
    found = []
    for position, item in enumerate(index.items):
        if item.role != "user" or "summary" not in item.badges:
            continue
        message = index.message(position)
        if message.kind != "tool_summary" or not message.source.get("archive_plan"):
            continue
        header, _, body = message.text.partition("\n")
        counted = message.source.get("archived_results")
        match = _COUNT.search(header)
        results = counted if isinstance(counted, int) else int(match[1]) if match else 0
        found.append((message.id, body, results, item.tokens))
    return found


_COUNT = re.compile(r"(\d+) older tool results were archived")


def plan_archive(ctx: SessionContext, config: StrategiesConfig) -> Plan:
    settings = config.archive
    plan = new_plan(ctx, "archive")
    index = session_index(ctx)
    visible = len(index.results)
    if visible <= settings.cutoff or in_flight(index):
        return finish(plan)
    archived: list[Result] = []
    positions: list[int] = []  # the archived messages' positions in the view, for a proxied agent's file
    left = visible - settings.cutoff  # results to archive still
    reasons: dict[str | tuple[str, ...], tuple[str, str]] = {}  # the same few tools recur in thousands of units
    items = plan.items
    pinned = index.pinned_ids
    view_items = index.items
    for caller, holders, results in units(index):
        if left <= 0:
            break
        if pinned and index.pinned(*(view_items[p].message_id or "" for p in (caller, *holders))):
            continue
        archived.extend(results)
        positions.extend((caller, *holders))
        left -= len(results)
        tools = results[0].tool_name if len(results) == 1 else tuple(r.tool_name for r in results)
        reason = reasons.get(tools)
        if reason is None:
            names = ", ".join(dict.fromkeys(r.tool_name or "tool" for r in results))
            reason = reasons[tools] = (f"old tool calls ({names}) archived behind a digest",
                                       f"their results ({names}) archived with them")
        item = view_items[caller]
        items.append(PlanItem(item.message_id or "", "archive", None, reason[0], item.tokens))
        for holder in holders:
            item = view_items[holder]
            items.append(PlanItem(item.message_id or "", "archive", None, reason[1], item.tokens))
    if not archived:
        return finish(plan)
    earlier = earlier_digests(index)
    for message_id, _, _, tokens in earlier:
        items.append(PlanItem(message_id, "archive", None, "an earlier digest, replaced by the new one", tokens))
    total = len(archived) + sum(count for _, _, count, _ in earlier)
    bodies = [without_file_line(body) for _, body, _, _ in earlier]
    text = digest(archived, settings.max_chars, [body for body in bodies if body], total)
    digest_id = f"digest-{plan.plan_id[:12]}"
    source: dict[str, object] = {"archive_plan": plan.plan_id, "strategy": "archive", "summarizer": "heuristic",
                                 "archived_results": total}
    reader = reader_of(ctx.session)
    if reader is not None:
        text, source = _with_file(index, reader.cwd, positions, [message_id for message_id, *_ in earlier], text,
                                  source)
    spec = {"role": "user", "kind": "tool_summary", "text": text, "agent_visible": True, "user_visible": False,
            "source": source}
    add_item(plan, digest_id, "summary", None, f"digest of {total} archived tool results",
             -Costs(ctx).message_cost(text), {NEW_MESSAGE: spec})
    return finish(plan)


def _with_file(index: SessionIndex, cwd: str, positions: Sequence[int], earlier: Sequence[str], text: str,
               source: dict[str, object]) -> tuple[str, dict[str, object]]:
    """A proxied agent's digest, naming the file its archived messages (and those of the digests it replaces) are
    written to; the source says which, so the proxy writes them (``sources.request_steering``)."""
    messages = [index.message(position) for position in positions]
    if earlier:
        replaced = set(earlier)
        wanted = {str(i) for message in index.ctx.messages if message.id in replaced
                  for i in message.source.get(IDS_KEY) or ()}
        messages += [message for message in index.ctx.messages if message.id in wanted]
    whole = archive_text(messages)
    path = archive_path(cwd, whole)
    ids = [message.id for message in sorted(messages, key=lambda m: m.index)]
    return f"{text}\n{file_line(path, whole)}", {**source, FILE_KEY: path, IDS_KEY: ids}


# --- one message, on the user's request ----------------------------------------------------------


def tool_group(ctx: SessionContext, message: Message) -> list[str]:
    """The message with every message holding the other half of its tool calls / results, in order.

    Walks the transcript, not the view: an archived message is not in the view, and unarchiving one
    must bring its pair back too."""
    callers: dict[str, str] = {}
    holders: dict[str, set[str]] = {}
    for m in ctx.messages:
        for part in m.parts:
            if isinstance(part, ToolUsePart):
                callers[part.id] = m.id
            elif isinstance(part, ToolResultPart):
                holders.setdefault(part.tool_use_id, set()).add(m.id)
    by_id = {m.id: m for m in ctx.messages}
    group = {message.id}
    todo = [message.id]
    while todo:
        current = by_id[todo.pop()]
        linked: set[str] = set()
        for part in current.parts:
            if isinstance(part, ToolUsePart):
                linked |= holders.get(part.id, set())
            elif isinstance(part, ToolResultPart) and part.tool_use_id in callers:
                linked.add(callers[part.tool_use_id])
        for other in linked - group:
            group.add(other)
            todo.append(other)
    return [m.id for m in ctx.messages if m.id in group]


def plan_archive_message(ctx: SessionContext, message: Message, *, undo: bool = False) -> Plan:
    """Archive (hide from the model, keep in the transcript) a message and its tool pairs, or bring them back."""
    action: Literal["archive", "unarchive"] = "unarchive" if undo else "archive"
    plan = new_plan(ctx, action, origin="user")
    archived = ctx.overlay.archived
    for message_id in tool_group(ctx, message):
        if (message_id in archived) == undo:
            reason = "archived by the user" if not undo else "brought back by the user"
            if message_id != message.id:
                reason += " (with its tool call / result)"
            add_item(plan, message_id, action, None, reason, 0)
    return finish(plan)
