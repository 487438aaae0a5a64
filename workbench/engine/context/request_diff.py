"""Request N of a proxied session against request N−1: what changed on the wire, and who changed it.

An agent sends its whole history with every request, so what users of a proxy viewer look at first is
the difference: the messages the agent added, the blocks the workbench replaced (steering: a pruned tool
result goes up as a placeholder), the blocks the agent itself changed or dropped (its own compaction,
thinking it cleared), the system prompt and tools if they moved, and what each request cost.

Messages are matched by their transcript id (their position and a hash of what the agent sent), so a
message the agent sent again unchanged is the same message whatever the workbench forwarded in its place;
what the workbench forwarded is told from what the agent sent by the transcript (see
``request_store.request_messages``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from workbench.engine.context.attribution import MCP_PREFIX, definition_json, system_blocks
from workbench.engine.context.pricing import prices_for, request_cost
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.request_blocks import content_blocks, identity_block
from workbench.engine.transcript.request_store import (
    RequestRow,
    SentMessage,
    list_requests,
    request_messages,
    request_prompt,
)
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

ChangeKind = Literal["added", "replaced", "restored", "agent_changed", "agent_dropped", "prompt"]
CHANGE_KINDS: tuple[ChangeKind, ...] = get_args(ChangeKind)
CHANGE_LABELS: Mapping[ChangeKind, str] = {
    "added": "added by the agent",
    "replaced": "replaced by the workbench",
    "restored": "sent as the agent wrote it again",
    "agent_changed": "changed by the agent",
    "agent_dropped": "dropped by the agent",
    "prompt": "system prompt / tools",
}


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the two requests."""

    kind: ChangeKind
    what: str
    """The block's type (``tool_result``, ``thinking``, ``text``…), ``message``, ``system`` or ``tool``."""
    message: int | None
    """The message's position in its request, from 1 (in request N−1 for what was dropped)."""
    block: int | None
    """The block's position in its message, from 1 (None: the whole message)."""
    role: str
    tokens: int
    """Tokens now (0: gone)."""
    before_tokens: int
    text: str
    """What the model got in request N ("" when it is gone)."""
    before: str
    """What was there before: in request N−1, or (replaced) what the agent sent."""
    new: bool = True
    """For ``replaced``: first replaced in this request (False: it was already in N−1)."""

    @property
    def saved(self) -> int:
        return self.before_tokens - self.tokens


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """One request as the request list shows it, with its cost."""

    seq: int
    created_at: str
    model: str | None
    messages: int
    status: int | None
    steered: bool
    input_tokens: int | None
    """Everything the request read: uncached, cache writes and cache reads (None: no usage reported)."""
    cache_read: int | None
    cache_write: int | None
    output_tokens: int | None
    cost: float | None
    """USD; None when the usage or the model's price is not known."""
    api_edits: tuple[Mapping[str, Any], ...] = ()
    outcome: str | None = None
    """How the answer ended when not as its status says (a stream error, cut, abandoned)."""

    @classmethod
    def of(cls, row: RequestRow) -> RequestFacts:
        usage = row.usage
        cost = request_cost(usage, row.model or usage.model) if usage and prices_for(row.model or usage.model) \
            else None
        return cls(seq=row.seq, created_at=row.created_at, model=row.model, messages=row.messages,
                   status=row.status, steered=row.edited,
                   input_tokens=usage.total_input if usage else None,
                   cache_read=usage.cache_read_input_tokens if usage else None,
                   cache_write=usage.cache_creation_input_tokens if usage else None,
                   output_tokens=usage.output_tokens if usage else None, cost=cost,
                   api_edits=tuple(row.api_edits), outcome=row.outcome)


@dataclass(frozen=True)
class RequestDiff:
    session_id: str
    request: RequestFacts
    previous: RequestFacts | None
    changes: tuple[Change, ...]

    def of(self, kind: ChangeKind) -> tuple[Change, ...]:
        return tuple(change for change in self.changes if change.kind == kind)

    def counts(self) -> dict[ChangeKind, int]:
        return {kind: len(self.of(kind)) for kind in CHANGE_KINDS}


def session_requests(store: Store, session_id: str) -> list[RequestFacts]:
    """Every stored request of the session, oldest first."""
    return [RequestFacts.of(row) for row in list_requests(store, session_id)]


def request_diff(store: Store, session_id: str, seq: int, counter: TokenCounter | None = None) -> RequestDiff:
    """Request ``seq`` against the session's request before it (against nothing for its first)."""
    rows = {row.seq: row for row in list_requests(store, session_id)}
    if seq not in rows:
        known = f"its requests are {min(rows)}–{max(rows)}" if rows else "it has no stored requests"
        raise WorkbenchError(f"session {session_id} has no request {seq}: {known}")
    earlier = [n for n in rows if n < seq]
    previous = max(earlier) if earlier else None
    counter = counter or TokenCounter()
    try:
        now = request_messages(store, session_id, seq)
        before = request_messages(store, session_id, previous) if previous is not None else []
        prompts = (request_prompt(store, session_id, previous), request_prompt(store, session_id, seq)) \
            if previous is not None else None
    except KeyError as exc:  # a stored block or request is missing: the database was changed outside the workbench
        raise WorkbenchError(f"cannot rebuild request {seq} of {session_id}: {exc.args[0]}") from None
    changes = [*_message_changes(counter, before, now), *_steering(counter, before, now)]
    if prompts is not None:
        changes += _prompt_changes(counter, *prompts)
    order = {kind: n for n, kind in enumerate(CHANGE_KINDS)}
    changes.sort(key=lambda c: (order[c.kind], c.message or 0, c.block or 0))
    return RequestDiff(session_id=session_id, request=RequestFacts.of(rows[seq]),
                       previous=RequestFacts.of(rows[previous]) if previous is not None else None,
                       changes=tuple(changes))


# --- what a block reads as ------------------------------------------------------------


def block_text(block: Any) -> str:
    """A block as a person reads it: its text, thinking, result, or call with its input."""
    if not isinstance(block, Mapping):
        return "" if block is None else str(block)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return "[redacted thinking]"
    if kind in ("tool_use", "server_tool_use"):
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), ensure_ascii=False)}"
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return "\n".join(str(b.get("text", f"[{b.get('type')}]")) for b in content if isinstance(b, Mapping))
        return str(content)
    if kind == "image":
        return "[image]"
    return json.dumps(identity_block(block), ensure_ascii=False)


def _kind(block: Any) -> str:
    return str(block.get("type", "?")) if isinstance(block, Mapping) else "text"


def _blocks(message: SentMessage) -> list[Any]:
    """The blocks as forwarded."""
    return list(content_blocks({"content": message.content}))


def _own_blocks(message: SentMessage) -> list[Any]:
    """The blocks as the agent sent them (the transcript's, where steering replaced one)."""
    sent = _blocks(message)
    return [message.original[j] if j in message.replaced and j < len(message.original) else block
            for j, block in enumerate(sent)]


def _key(block: Any) -> str:
    plain = identity_block(block) if isinstance(block, Mapping) else block
    return json.dumps(plain, sort_keys=True, ensure_ascii=False, default=str)


def _text(blocks: Iterable[Any]) -> str:
    return "\n\n".join(block_text(block) for block in blocks)


# --- the three kinds of change -----------------------------------------------------------


def _message_changes(counter: TokenCounter, before: Sequence[SentMessage], now: Sequence[SentMessage]) -> list[Change]:
    """Messages added and dropped, and the agent's own edits to messages it had sent."""
    before_ids = {m.message_id: n for n, m in enumerate(before) if m.message_id is not None}
    now_ids = {m.message_id for m in now if m.message_id is not None}
    changes: list[Change] = []
    paired: set[int] = set()
    for n, message in enumerate(now):
        if message.message_id is not None and message.message_id in before_ids:
            continue
        old = before[n] if n < len(before) else None
        if old is not None and old.role == message.role and old.message_id not in now_ids:
            paired.add(n)
            changes += _block_changes(counter, n, old, message)
            continue
        blocks = _blocks(message)
        text = _text(blocks)
        kinds = sorted({_kind(block) for block in blocks})
        changes.append(Change("added", ", ".join(kinds) or "message", n + 1, None, message.role,
                              counter.count_text(text), 0, text, ""))
    for n, message in enumerate(before):
        if n in paired or (message.message_id is not None and message.message_id in now_ids):
            continue
        text = _text(_own_blocks(message))
        changes.append(Change("agent_dropped", "message", n + 1, None, message.role, 0, counter.count_text(text),
                              "", text))
    return changes


def _block_changes(counter: TokenCounter, n: int, old: SentMessage, new: SentMessage) -> list[Change]:
    """One message the agent sent again, changed: the blocks it rewrote (same place), dropped or added."""
    old_blocks, new_blocks = _own_blocks(old), _own_blocks(new)
    old_keys, new_keys = [_key(b) for b in old_blocks], [_key(b) for b in new_blocks]
    old_only = [j for j, key in enumerate(old_keys) if key not in set(new_keys)]
    new_only = [j for j, key in enumerate(new_keys) if key not in set(old_keys)]
    rewritten = set(old_only) & set(new_only)
    changes: list[Change] = []
    for j in old_only:
        text = block_text(old_blocks[j])
        after = block_text(new_blocks[j]) if j in rewritten else ""
        changes.append(Change("agent_changed" if j in rewritten else "agent_dropped", _kind(old_blocks[j]), n + 1,
                              j + 1, old.role, counter.count_text(after), counter.count_text(text), after, text))
    for j in new_only:
        if j not in rewritten:
            text = block_text(new_blocks[j])
            changes.append(Change("added", _kind(new_blocks[j]), n + 1, j + 1, new.role, counter.count_text(text), 0,
                                  text, ""))
    return changes


def _steering(counter: TokenCounter, before: Sequence[SentMessage], now: Sequence[SentMessage]) -> list[Change]:
    """Blocks the workbench replaced in request N, and blocks it replaced in N−1 that go as the agent wrote
    them again (the steering was undone)."""
    replaced_before = {(m.message_id, j) for m in before for j in m.replaced if m.message_id is not None}
    changes: list[Change] = []
    for n, message in enumerate(now):
        sent = _blocks(message)
        for j in message.replaced:
            if j >= len(sent):
                continue
            forwarded, own = block_text(sent[j]), block_text(message.original[j] if j < len(message.original) else "")
            changes.append(Change("replaced", _kind(sent[j]), n + 1, j + 1, message.role,
                                  counter.count_text(forwarded), counter.count_text(own), forwarded, own,
                                  new=(message.message_id, j) not in replaced_before))
    now_replaced = {(m.message_id, j) for m in now for j in m.replaced}
    for n, message in enumerate(now):
        sent = _blocks(message)
        for j in range(len(sent)):
            if (message.message_id, j) in replaced_before and (message.message_id, j) not in now_replaced:
                earlier = next(m for m in before if m.message_id == message.message_id)
                placeholder = block_text(_blocks(earlier)[j])
                text = block_text(sent[j])
                changes.append(Change("restored", _kind(sent[j]), n + 1, j + 1, message.role,
                                      counter.count_text(text), counter.count_text(placeholder), text, placeholder))
    return changes


def _prompt_changes(counter: TokenCounter, before: tuple[Any, list[Any]], now: tuple[Any, list[Any]]) -> list[Change]:
    """System blocks that changed, and tools added, removed or changed (by name)."""
    changes: list[Change] = []
    old_system, new_system = system_blocks(before[0]), system_blocks(now[0])
    for j in range(max(len(old_system), len(new_system))):
        old = str(old_system[j].get("text", "")) if j < len(old_system) else ""
        new = str(new_system[j].get("text", "")) if j < len(new_system) else ""
        if old != new:
            changes.append(Change("prompt", "system", None, j + 1, "system", counter.count_text(new),
                                  counter.count_text(old), new, old))
    old_tools = {str(t.get("name", "")): t for t in before[1] if isinstance(t, Mapping)}
    new_tools = {str(t.get("name", "")): t for t in now[1] if isinstance(t, Mapping)}
    for name in [*new_tools, *(name for name in old_tools if name not in new_tools)]:
        old_tool, new_tool = old_tools.get(name), new_tools.get(name)
        if old_tool == new_tool:
            continue
        old_text = definition_json(old_tool) if old_tool is not None else ""
        new_text = definition_json(new_tool) if new_tool is not None else ""
        what = "MCP tool" if name.startswith(MCP_PREFIX) else "tool"
        changes.append(Change("prompt", f"{what} {name}", None, None, "tools", counter.count_text(new_text),
                              counter.count_text(old_text), new_text, old_text))
    return changes


# --- JSON -------------------------------------------------------------------------------


def facts_json(facts: RequestFacts) -> dict[str, Any]:
    return {"seq": facts.seq, "created_at": facts.created_at, "model": facts.model, "messages": facts.messages,
            "status": facts.status, "steered": facts.steered, "input_tokens": facts.input_tokens,
            "cache_read_tokens": facts.cache_read, "cache_write_tokens": facts.cache_write,
            "output_tokens": facts.output_tokens, "cost_usd": facts.cost, "api_edits": list(facts.api_edits),
            "outcome": facts.outcome}


def diff_json(diff: RequestDiff) -> dict[str, Any]:
    return {
        "session": diff.session_id,
        "request": facts_json(diff.request),
        "previous": facts_json(diff.previous) if diff.previous is not None else None,
        "counts": diff.counts(),
        "changes": [{"kind": c.kind, "what": c.what, "message": c.message, "block": c.block, "role": c.role,
                     "tokens": c.tokens, "before_tokens": c.before_tokens, "new": c.new, "text": c.text,
                     "before": c.before} for c in diff.changes],
    }
