"""Which session a request belongs to, decided in memory while the request waits.

Claude Code names its session in ``metadata.user_id``; inside one of its sessions a request joins the
conversation whose history it extends (the longest shared prefix of message keys) among those with the
same tools. A request that extends none is a conversation of its own (a sub-agent, a title call), except
the first request after the agent compacted its history: that one continues its conversation past a
compaction pivot.

A client that names no session cannot be told from another that sends the same first messages, so its
request joins only a conversation whose whole history it repeats and that has no request in flight;
anything else (two clients asking the same thing at once, or one that rewrites its history) is a new
session rather than a merge.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from workbench.engine.sources.request_steering import Digest
from workbench.engine.transcript.importers.claude_subagents import SUBAGENT_TOOLS
from workbench.engine.transcript.overlay import OverlayEvent, OverlayState
from workbench.engine.transcript.request_blocks import RawMessage, content_blocks, digest, message_id
from workbench.engine.transcript.request_store import Mark, common_prefix

CONTINUATION = "This session is being continued from a previous conversation"
_SESSION_IN_USER_ID = re.compile(r"session_([0-9a-fA-F-]{36})")


def agent_session_id(body: Mapping[str, Any]) -> str | None:
    """The agent's own session id: Claude Code sends ``metadata.user_id`` as JSON with ``session_id``
    (older versions as ``user_…_session_<uuid>``)."""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if not isinstance(user_id, str):
        return None
    try:
        parsed = orjson.loads(user_id)
    except orjson.JSONDecodeError:
        match = _SESSION_IN_USER_ID.search(user_id)
        return match.group(1) if match else None
    value = parsed.get("session_id") if isinstance(parsed, dict) else None
    return value if isinstance(value, str) else None


def tools_signature(body: Mapping[str, Any]) -> str:
    tools = body.get("tools")
    names = sorted(str(t.get("name")) for t in tools if isinstance(t, Mapping)) if isinstance(tools, list) else []
    return digest(names)


def continues_after_compaction(messages: Sequence[RawMessage]) -> bool:
    """The agent compacted its history: its first message is the summary it continues from."""
    for block in content_blocks(messages[0]) if messages else ():
        text = block.get("text")
        if isinstance(text, str) and CONTINUATION in text[:2000]:
            return True
    return False


@dataclass
class Thread:
    """One conversation as the proxy follows it; a session in the store."""

    session_id: str
    group: str | None
    tools: str
    keys: list[str] = field(default_factory=list)
    """Message keys of the history the agent will send next (the last request, then its answer)."""
    ids: list[str] = field(default_factory=list)
    known: set[str] = field(default_factory=set)
    """Transcript ids already stored for this session."""
    next_position: int = 0
    seq: int = 0
    created: bool = False
    parent: tuple[str, str] | None = None
    """(session, message) of the sub-agent call that started this conversation, when it can be told."""
    calls: dict[str, str] = field(default_factory=dict)
    """Sub-agent prompts this conversation's answers sent (Agent / Task calls), to the answer's message id."""
    overlay: OverlayState = field(default_factory=OverlayState)
    events: list[OverlayEvent] = field(default_factory=list)
    overlay_mark: tuple[int, int, int] | None = None
    activated: dict[str, dict[str, object]] = field(default_factory=dict)
    """Queued edits this proxy activated (event id -> what it set), kept over a reload of the events that
    comes before the store has them: an edit applies from one request on, once."""
    summaries: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    """The content of each compaction summary the overlay's pivots name, read once from the store."""
    digests: dict[str, Digest] = field(default_factory=dict)
    """The archive digests in force, read once from the store (``request_steering.read_digests``)."""
    steered: dict[str, tuple[Any, dict[str, Any] | None]] = field(default_factory=dict)
    """What the overlay as it is makes of each message it changes (``request_steering.Memo``)."""
    entries: dict[str, str] = field(default_factory=dict)
    """Stored entry hash of each message already taken apart (see ``request_store.encode``)."""
    prompts: dict[str, tuple[str, list[Mark]]] = field(default_factory=dict)
    """The same for the system prompt and tools, which every request repeats."""
    last_request_at: datetime | None = None
    cache_lifetime: timedelta = timedelta(minutes=5)
    """How long the cache the latest request wrote lives: an hour when one of its marks asked for that."""
    last_stored: tuple[int, list[str]] | None = None
    """(seq, message hashes) of the request last stored, the base of the next one (written by the store's
    thread alone)."""
    open: int = 0
    """Requests placed here whose answers are not through yet."""
    resting: bool = False
    """Idle long enough that what it held in memory went (:meth:`rest`); read back from the store when it is
    used again."""

    def rest(self) -> None:
        """Let go of what the store holds too: an idle session keeps only what places its next request (its
        message keys and ids), not its caches (about 50 KB a session)."""
        self.known, self.entries, self.prompts, self.steered, self.summaries = set(), {}, {}, {}, {}
        self.events, self.overlay, self.overlay_mark = [], OverlayState(), None
        self.last_stored = None
        self.resting = True


@dataclass(frozen=True)
class Placement:
    """Where a request goes: its thread, its messages' ids, and what it changes of the thread's history."""

    thread: Thread
    keys: list[str]
    ids: list[str]
    shared: int
    """How many leading messages it shares with the thread's history."""
    pivot: bool
    """The agent compacted: the history before this request is gone from the model's view."""
    dropped: list[str]
    """Ids the thread's history had past ``shared`` that this request no longer sends."""


class Threads:
    """Every conversation seen, grouped by the agent's session id (None for clients that send none)."""

    def __init__(self) -> None:
        self._by_group: dict[str | None, list[Thread]] = {}

    def groups(self) -> dict[str | None, list[Thread]]:
        return self._by_group

    def add(self, thread: Thread) -> None:
        self._by_group.setdefault(thread.group, []).append(thread)

    def _caller(self, group: str | None, messages: Sequence[RawMessage]) -> tuple[str, str] | None:
        """The conversation whose sub-agent call sent the prompt this one starts with."""
        first = messages[0] if messages else {}
        texts = [text for b in content_blocks(first) if isinstance(text := b.get("text"), str)]
        for thread in reversed(self._by_group.get(group, [])):
            for prompt, message in thread.calls.items():
                if any(prompt in text for text in texts):
                    return thread.session_id, message
        return None

    def idle(self, before: datetime) -> list[Thread]:
        """Threads with nothing in flight whose latest request came before ``before``, not yet resting."""
        return [t for group in self._by_group.values() for t in group
                if not t.resting and not t.open and t.last_request_at is not None and t.last_request_at < before]

    def place(self, body: Mapping[str, Any], keys: list[str]) -> Placement:
        group = agent_session_id(body)
        tools = tools_signature(body)
        candidates = [t for t in self._by_group.get(group, []) if t.tools == tools]
        best: Thread | None = None
        shared = 0
        for thread in candidates:
            n = common_prefix(thread.keys, keys)
            if group is None and (thread.open or n < len(thread.keys)):
                continue  # no session id: only a whole, idle history can be told to be this client's
            if n > shared:
                best, shared = thread, n
        messages = body.get("messages") or []
        pivot = False
        if best is None:
            if candidates and continues_after_compaction(messages):
                best, pivot = candidates[-1], True
            else:
                best = Thread(session_id=f"proxy-{uuid.uuid4().hex[:12]}", group=group, tools=tools,
                              parent=self._caller(group, messages))
                self.add(best)
        ids = best.ids[:shared] + [message_id(i, keys[i]) for i in range(shared, len(keys))]
        sent = set(ids)
        dropped = [i for i in best.ids[shared:] if i not in sent]
        return Placement(thread=best, keys=keys, ids=ids, shared=shared, pivot=pivot, dropped=dropped)


def subagent_prompts(blocks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The prompts of the sub-agent calls in an answer."""
    out: list[str] = []
    for block in blocks:
        tool_input = block.get("input")
        if block.get("type") == "tool_use" and block.get("name") in SUBAGENT_TOOLS and isinstance(tool_input, Mapping):
            prompt = tool_input.get("prompt")
            if isinstance(prompt, str) and prompt.strip():
                out.append(prompt.strip())
    return out
