"""A past session as the sequence of requests its agent sent: the blocks of each, in the order the prompt
cache sees them, where its cache marks stood, when it was sent and what the API reported.

Two sources: a proxied session's stored requests (exactly as forwarded, marks included), and a Claude Code
transcript, whose requests are implied: each reply the API gave was the answer to a request holding every
message before it (since the last compaction's summary), with Claude Code's marks (its system prompt, and the
last block of the last message) and the TTL its reported cache writes show.

A block's tokens are the API's own figures wherever a report fixes them: a request's reported input is the size
of its whole prompt, so the blocks a request adds to the one before are given what the two reports differ by,
spread over them by the workbench's counts; a block keeps the count it got when it first appeared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.models import Message, Session, Usage
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.request_marks import Ttl, ttl_of
from workbench.engine.transcript.request_store import list_requests, request_body, request_messages
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

PromptKey = tuple[str, str]
"""A block that is no transcript message's part (a tool definition, a system block): ("block", its digest)."""
PartKey = tuple[str, int]
"""A message's part: (message id, part index)."""
BlockKey = PromptKey | PartKey


@dataclass(frozen=True, slots=True)
class Block:
    key: Hashable
    """What the block is: two blocks with one key hold the same content."""
    estimate: int
    """The workbench's own count of it."""


@dataclass
class Request:
    """One request of the session, as the agent sent it."""

    number: int
    """1 for the first."""
    sent_at: datetime
    model: str | None
    blocks: list[Block]
    marks: list[tuple[int, Ttl]]
    """(block position, TTL) of each cache mark."""
    reported: Usage | None
    messages: list[str] = field(default_factory=list)
    """The transcript ids of the messages it held, in order: what a policy plans on."""
    tokens: list[int] = field(default_factory=list)
    """Of each block, by the API's figures (see :func:`calibrate`)."""


@dataclass
class Timeline:
    """A session's requests, with the transcript messages they were made of."""

    session: Session
    messages: list[Message]
    requests: list[Request]
    source: str
    """``proxy`` (stored requests) or ``transcript`` (implied by a transcript file)."""
    events: list[OverlayEvent] = field(default_factory=list)
    """The session's overlay (a compaction the transcript records, a proxied session's steering)."""


def _digest(value: Any) -> str:
    return hashlib.blake2b(orjson.dumps(value, option=orjson.OPT_SORT_KEYS), digest_size=12).hexdigest()


def _plain(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


def _count(counter: TokenCounter, block: Any) -> int:
    plain = _plain(block)
    return max(1, counter.count_text(plain if isinstance(plain, str) else orjson.dumps(plain).decode()))


def from_store(store: Store, session_id: str) -> Timeline:
    """A proxied session's stored requests, exactly as they were forwarded."""
    session = store.get_session(session_id)
    counter = TokenCounter()
    requests: list[Request] = []
    for row in list_requests(store, session_id):
        if row.status is not None and row.status >= 400:
            continue  # the API refused it: nothing was billed or cached
        body = request_body(store, session_id, row.seq)
        ids = [m.message_id for m in request_messages(store, session_id, row.seq)]
        request = _from_body(counter, body, ids, len(requests) + 1, datetime.fromisoformat(row.created_at))
        request.model, request.reported = row.model, row.usage
        requests.append(request)
    if not requests:
        raise WorkbenchError(f"session {session_id} has no stored requests to replay: only a proxied session's "
                             "requests are stored (see `workbench requests`)")
    messages = store.load_messages(session_id)
    return Timeline(session, messages, calibrate(requests), "proxy", store.load_overlay(session_id))


def _from_body(counter: TokenCounter, body: dict[str, Any], ids: Sequence[str | None], number: int,
               sent_at: datetime) -> Request:
    blocks: list[Block] = []
    marks: list[tuple[int, Ttl]] = []

    def add(key: Hashable, block: Any) -> None:
        if isinstance(block, dict) and "cache_control" in block:
            marks.append((len(blocks), ttl_of(block["cache_control"])))
        blocks.append(Block(key, _count(counter, block)))

    for tool in body.get("tools") or ():
        add(("block", _digest(["tool", _plain(tool)])), tool)
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or ():
        add(("block", _digest(["system", _plain(block)])), block)
    for index, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        message_id = ids[index] if index < len(ids) else None
        for j, block in enumerate([content] if isinstance(content, str) else content or ()):
            key = (message_id, j) if message_id else ("block", _digest([message.get("role"), _plain(block)]))
            add(key, block)
    if "cache_control" in body and blocks:  # automatic caching: a mark on the last block
        marks.append((len(blocks) - 1, ttl_of(body["cache_control"])))
    return Request(number, sent_at, None, blocks, marks, None, [i for i in ids if i])


def from_transcript(path: Path) -> Timeline:
    """The requests a Claude Code transcript implies: one per reply the API reported usage for."""
    from workbench.engine.transcript.importers import parse_file  # deferred: the importers, only for a file

    parsed = parse_file(path)
    if parsed.session.source_format != "claude-code":
        raise WorkbenchError(f"{path}: a replay reads Claude Code transcripts (this is {parsed.session.source_format}); "
                             "for another agent, proxy it and replay the proxied session")
    return Timeline(parsed.session, parsed.messages, calibrate(list(_implied(parsed.messages))), "transcript",
                    parsed.events)


def _implied(messages: Sequence[Message]) -> Iterable[Request]:
    """Each reported reply's request: the messages the agent saw before it, since the last summary."""
    counter = TokenCounter()
    ttl: Ttl = "1h" if any(m.usage and m.usage.cache_creation_1h_input_tokens for m in messages) else "5m"
    seen: list[Message] = []
    counts: dict[str, list[int]] = {}
    for message in messages:
        if message.sidechain or not message.agent_visible:
            continue
        usage = message.usage
        if message.role == "assistant" and usage is not None and not usage.synthetic and usage.total_input:
            yield _request(seen, counts, message, ttl)
        if message.kind == "summary":
            seen = []
        seen.append(message)
        counts[message.id] = [max(1, counter.count_part(part)) for part in message.parts]


def _request(seen: Sequence[Message], counts: Mapping[str, list[int]], reply: Message, ttl: Ttl) -> Request:
    """The request ``reply`` answered: the prompt (what the transcript does not hold, one block), the parts of
    ``seen`` (one block each, ``counts`` their tokens), a mark on the prompt and on the last block."""
    blocks = [Block(("block", "prompt"), 0)]
    for message in seen:
        blocks += [Block((message.id, n), count) for n, count in enumerate(counts[message.id])]
    marks: list[tuple[int, Ttl]] = [(0, ttl), (len(blocks) - 1, ttl)] if len(blocks) > 1 else [(0, ttl)]
    return Request(0, reply.created_at or datetime.min, reply.model, blocks, marks, reply.usage,
                   [m.id for m in seen])


def calibrate(requests: list[Request]) -> list[Request]:
    """Number the requests and give each block its tokens by the API's reports (see the module's docstring)."""
    known: dict[Hashable, int] = {}
    for number, request in enumerate(requests, 1):
        request.number = number
        reported = request.reported.total_input if request.reported else 0
        fixed = [known.get(block.key) for block in request.blocks]
        new = [n for n, count in enumerate(fixed) if count is None]
        if fixed and fixed[0] is None and request.blocks[0].estimate == 0:  # the prompt the transcript lacks
            messages = sum(block.estimate for block in request.blocks[1:])
            request.blocks[0] = Block(request.blocks[0].key, max(1, reported - messages))
        rest = reported - sum(count for count in fixed if count is not None)
        counts = _spread(rest, [request.blocks[n].estimate for n in new]) if reported and rest > 0 \
            else [request.blocks[n].estimate for n in new]
        for n, count in zip(new, counts, strict=True):
            known[request.blocks[n].key] = count
        request.tokens = [known[block.key] for block in request.blocks]
    return requests


def _spread(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` over blocks in proportion to ``weights``."""
    whole = sum(weights)
    if not weights or whole <= 0:
        return [0] * len(weights)
    out = [total * w // whole for w in weights]
    out[-1] += total - sum(out)
    return out
