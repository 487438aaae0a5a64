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
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.replay.cache import prefixes
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
    hashes: list[int] = field(default_factory=list)
    """Of the prompt up to each block (see ``cache.prefixes``)."""


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
    counter: TokenCounter = field(default_factory=TokenCounter)
    """What counted the blocks: the replay's context counts with it too, so nothing is counted twice."""


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
    estimates: dict[Hashable, int] = {}
    requests: list[Request] = []
    for row in list_requests(store, session_id):
        if row.status is not None and row.status >= 400:
            continue  # the API refused it: nothing was billed or cached
        body = request_body(store, session_id, row.seq)
        sent = request_messages(store, session_id, row.seq)
        ids = [m.message_id for m in sent]
        steered = {(n, j) for n, m in enumerate(sent) for j in m.replaced}
        request = _from_body(counter, estimates, body, (ids, steered), datetime.fromisoformat(row.created_at))
        request.model, request.reported = row.model, row.usage
        requests.append(request)
    if not requests:
        raise WorkbenchError(f"session {session_id} has no stored requests to replay: only a proxied session's "
                             "requests are stored (see `workbench requests`)")
    messages = store.load_messages(session_id)
    return Timeline(session, messages, calibrate(requests), "proxy", store.load_overlay(session_id), counter)


def _from_body(counter: TokenCounter, estimates: dict[Hashable, int], body: dict[str, Any],
               sent: tuple[Sequence[str | None], set[tuple[int, int]]], sent_at: datetime) -> Request:
    """One stored request's blocks. ``sent``: the transcript id of each message, and the (message, block) positions
    the workbench's steering replaced (another block than the transcript's part); ``estimates``: the counts of
    the blocks seen in earlier requests, by key."""
    ids, steered = sent
    blocks: list[Block] = []
    marks: list[tuple[int, Ttl]] = []

    def add(key: Hashable, block: Any) -> None:
        if isinstance(block, dict) and "cache_control" in block:
            marks.append((len(blocks), ttl_of(block["cache_control"])))
        estimate = estimates.get(key)
        if estimate is None:
            estimate = estimates[key] = _count(counter, block)
        blocks.append(Block(key, estimate))

    for tool in body.get("tools") or ():
        add(("block", _digest(["tool", _plain(tool)])), tool)
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or ():
        add(("block", _digest(["system", _plain(block)])), block)
    for index, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        message_id = ids[index] if index < len(ids) else None
        for j, block in enumerate([content] if isinstance(content, str) else content or ()):
            key: Hashable = (message_id, j) if message_id and (index, j) not in steered \
                else ("block", _digest([message.get("role"), _plain(block)]))
            add(key, block)
    if "cache_control" in body and blocks:  # automatic caching: a mark on the last block
        marks.append((len(blocks) - 1, ttl_of(body["cache_control"])))
    return Request(0, sent_at, None, blocks, marks, None, [i for i in ids if i])


def from_transcript(store: Store, session_id: str) -> Timeline:
    """The requests an imported Claude Code transcript implies: one per reply the API reported usage for."""
    session = store.get_session(session_id)
    if session.source_format != "claude-code":
        raise WorkbenchError(f"session {session_id} is a {session.source_format} session: a replay reads proxied "
                             "sessions and Claude Code transcripts; proxy another agent, then replay that session")
    messages = store.load_messages(session_id)  # with the counts stored when it was imported
    counter = TokenCounter()
    return Timeline(session, messages, calibrate(list(_implied(messages, counter))), "transcript",
                    store.load_overlay(session_id), counter)


def from_session(store: Store, session_id: str) -> Timeline:
    """A stored session's requests: a proxied session's as stored, a Claude Code transcript's as implied."""
    if store.get_session(session_id).source_format == "proxy":
        return from_store(store, session_id)
    return from_transcript(store, session_id)


def _implied(messages: Sequence[Message], counter: TokenCounter) -> Iterable[Request]:
    """Each reported reply's request: the prompt (what the transcript does not hold, one block) and the parts of
    the messages the agent saw before it since the last summary (one block each), marked as Claude Code marks
    them: on the prompt and on the last block."""
    ttl: Ttl = "1h" if any(m.usage and m.usage.cache_creation_1h_input_tokens for m in messages) else "5m"
    prompt = Block(("block", "prompt"), 0)
    seen: list[str] = []
    blocks = [prompt]
    for message in messages:
        if message.sidechain or not message.agent_visible:
            continue
        usage = message.usage
        if message.role == "assistant" and usage is not None and not usage.synthetic and usage.total_input:
            marks: list[tuple[int, Ttl]] = [(0, ttl), (len(blocks) - 1, ttl)] if len(blocks) > 1 else [(0, ttl)]
            yield Request(0, message.created_at or datetime.min, message.model, list(blocks), marks, usage, list(seen))
        if message.kind == "summary":
            seen, blocks = [], [prompt]
        seen.append(message.id)
        blocks += [Block((message.id, n), max(1, counter.count_part(part))) for n, part in enumerate(message.parts)]


def calibrate(requests: list[Request]) -> list[Request]:
    """Number the requests and give each block its tokens by the API's reports (see the module's docstring)."""
    for request in requests:
        request.hashes = prefixes(request.model, [block.key for block in request.blocks])
    anchors = _anchors(requests)
    known: dict[Hashable, int] = {}
    for number, request in enumerate(requests, 1):
        request.number = number
        blocks, hashes = request.blocks, request.hashes
        if blocks and blocks[0].estimate == 0 and blocks[0].key not in known:  # the prompt a transcript lacks
            reported = request.reported.total_input if request.reported else 0
            blocks[0] = Block(blocks[0].key, max(1, reported - sum(block.estimate for block in blocks[1:])))
        start, done = 0, 0
        for end, h in enumerate(hashes):
            total = anchors.get(h)
            if total is None and end < len(blocks) - 1:
                continue
            stretch = blocks[start:end + 1]
            fixed = sum(known.get(block.key, 0) for block in stretch)
            new = [block for block in stretch if block.key not in known]
            rest = (total - done - fixed) if total is not None else -1
            counts = _spread(rest, [block.estimate for block in new]) if rest > 0 else [b.estimate for b in new]
            known.update((block.key, count) for block, count in zip(new, counts, strict=True))
            done += sum(known[block.key] for block in stretch)
            start = end + 1
        request.tokens = [known[block.key] for block in blocks]
    return requests


def _anchors(requests: Sequence[Request]) -> dict[int, int]:
    """The size of the prompt up to a block, by the hash of the prompt up to there, wherever a report gives it:
    a request's whole prompt (its reported input), and the entry a request read from the cache (its reported
    read), taken to be the earlier marked position whose size by the workbench's counts comes nearest."""
    anchors: dict[int, int] = {}
    marked: set[int] = set()
    for request in requests:
        hashes = request.hashes
        reported = request.reported
        if reported is not None and reported.total_input and hashes:
            read = reported.cache_read_input_tokens
            if 0 < read < reported.total_input and read not in (anchors.get(h) for h in hashes if h in marked):
                found = _nearest(hashes, [block.estimate for block in request.blocks], reported.total_input, read,
                                 {h for h in marked if h not in anchors})
                if found is not None:
                    anchors[found] = read
            anchors.setdefault(hashes[-1], reported.total_input)
        marked.update(hashes[p] for p, _ in request.marks if p < len(hashes))
    return anchors


def _nearest(hashes: Sequence[int], estimates: Sequence[int], total: int, read: int, candidates: set[int]) -> int | None:
    """Of the ``candidates`` (marked before, size unknown: one whose size a report gave would have read exactly
    that), the position whose size by the workbench's counts, scaled to ``total``, comes nearest to ``read``."""
    scale = total / max(1, sum(estimates))
    running, best, distance = 0.0, None, 0.0
    for h, count in zip(hashes, estimates, strict=True):
        running += count * scale
        if h in candidates and (best is None or abs(running - read) < distance):
            best, distance = h, abs(running - read)
    return best


def _spread(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` over blocks in proportion to ``weights``."""
    whole = sum(weights)
    if not weights or whole <= 0:
        return [0] * len(weights)
    out = [total * w // whole for w in weights]
    out[-1] += total - sum(out)
    return out
