"""What the recorder writes, on the writer's thread (:mod:`.writer`): a request, its answer, its session.

Each write is one transaction, and what the recorder keeps in memory about a session (the messages and
blocks already stored, the base of the next request) changes only after it committed: a write the store
refused, and tries again or gives up, leaves nothing in memory that claims it is stored. Every text taken
from a request (titles, the working directory, parameters, warnings) passes the same redaction as the
message parts.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from workbench.engine.context.wire_offload import CWD_KEY, READ_TOOL_KEY, agent_cwd, read_tool
from workbench.engine.sources.side_calls import is_title_call, working_directory
from workbench.engine.transcript.models import Message, Session, Usage
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.redaction import Redactor
from workbench.engine.transcript.request_blocks import first_user_text, message_key, transcript_message
from workbench.engine.transcript.request_store import (
    MissingBlocks,
    activate_pending,
    encode,
    finish_request,
    next_seq,
    save_request,
)
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter
from workbench.proxy.exchange import Exchange
from workbench.proxy.response import Answer
from workbench.proxy.threads import Placement, Thread

COMPRESS_OVER = 512
"""Part bodies longer than this are stored compressed: a proxied session records whole histories."""
AGENT_SESSION_ID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
"""What a Claude Code session id looks like; any other value a client sends names no transcript file."""


@dataclass(frozen=True)
class Context:
    """What every write needs besides the exchange."""

    counter: TokenCounter
    home: Path
    upstream: str | None


@dataclass(frozen=True)
class Remembering(Redactor):
    """A redactor for one write: a message is redacted for the transcript and again as request blocks, and
    a 30 MB tool result took seconds each time."""

    seen: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def text(self, text: str) -> str:
        done = self.seen.get(text)
        if done is None:
            done = self.seen[text] = super().text(text)
        return done


def redactor_for(exchange: Exchange) -> Remembering:
    return Remembering(Redactor.holding(exchange.secrets).known)


def kept(answer: Answer, status: int) -> bool:
    """An answer joins the history only when it arrived whole: the agent does not send back a cut one."""
    return answer.complete and bool(answer.blocks) and status < 400 and not answer.error


def transcript_of(group: str, home: Path) -> str | None:
    """Claude Code's own transcript of this session, if it has written one. The id comes from a client:
    it is matched whole against a UUID and used only as an exact file name, never as a path or a pattern."""
    if AGENT_SESSION_ID.fullmatch(group) is None:
        return None
    projects = home / ".claude" / "projects"
    try:
        folders = sorted(entry for entry in projects.iterdir() if entry.is_dir())
    except OSError:
        return None
    name = f"{group}.jsonl"
    return next((str(folder / name) for folder in folders if (folder / name).is_file()), None)


def store_request(store: Store, exchange: Exchange, context: Context) -> None:
    """The request, the messages it adds to its session's transcript, and what it stopped sending."""
    placement, body = exchange.placement, exchange.parsed
    assert placement is not None and body is not None
    thread = placement.thread
    redactor = redactor_for(exchange)
    clean = redactor.value
    new, position = _unstored(store, placement, body, clean)
    events = history_events(placement)
    sent = exchange.steered if exchange.steered is not None else body
    ids = exchange.sent_ids if exchange.sent_ids is not None else placement.ids
    prompts = dict(thread.prompts)
    encoded = encode(sent, ids, exchange.changed, clean=clean, known=thread.entries, prompts=prompts)
    warning = redactor.text(exchange.warning) if exchange.warning else None
    with store.transaction():
        created = _save_session(store, thread, body, exchange, context.upstream)
        seq = next_seq(store, thread.session_id)
        if exchange.activated:
            activate_pending(store, thread.session_id, exchange.activated, exchange.at, seq)
        store.save_messages(new, context.counter, compress_over=COMPRESS_OVER)
        if events:
            store.add_overlay_events(events)
        try:
            save_request(store, thread.session_id, encoded, thread.last_stored, edited=exchange.edited,
                         warning=warning, seq=seq)
        except MissingBlocks:  # an earlier write of this session was lost: this request stands whole
            prompts = {}
            encoded = encode(sent, ids, exchange.changed, clean=clean, prompts=prompts)
            save_request(store, thread.session_id, encoded, None, edited=exchange.edited, warning=warning, seq=seq)
            thread.entries.clear()
    thread.created = thread.created or created
    thread.known.update(m.id for m in new)
    thread.next_position = position
    thread.entries.update(encoded.entries)
    thread.prompts = prompts
    thread.last_stored = (seq, encoded.messages)
    thread.seq = max(thread.seq, seq)
    exchange.seq, exchange.stored = seq, True


def store_answer(store: Store, exchange: Exchange, context: Context) -> None:
    """The answer's message, its usage, and how the request ended. When the request itself was not stored,
    the messages it added are stored first, so the transcript keeps the order the agent sent."""
    placement, answer, body = exchange.placement, exchange.answer, exchange.parsed
    if placement is None or body is None:
        return
    thread = placement.thread
    clean = redactor_for(exchange).value
    usage: Usage | None = answer.usage if answer is not None else None
    new, position = ([], thread.next_position) if exchange.stored else _unstored(store, placement, body, clean)
    with store.transaction():
        if answer is not None and kept(answer, exchange.status):
            raw = {"role": "assistant", "content": answer.blocks}
            message = transcript_message(thread.session_id, len(placement.keys), message_key(raw), clean(raw),
                                         position)
            if message.id not in thread.known:
                new.append(message.model_copy(update={"usage": usage, "model": answer.model,
                                                      "created_at": exchange.steered_at}))
                position += 1
            store.save_messages(new, context.counter, compress_over=COMPRESS_OVER)
            if usage is not None:
                store.record_usage(thread.session_id, message.id, usage, None)
        else:
            store.save_messages(new, context.counter, compress_over=COMPRESS_OVER)
        if exchange.stored:
            finish_request(store, thread.session_id, exchange.seq, exchange.status, usage,
                           answer.edits if answer is not None else (), exchange.outcome)
        link_transcript(store, thread, context.home)
    thread.known.update(m.id for m in new)
    thread.next_position = position


def store_exact(store: Store, exchange: Exchange, exact: Mapping[str, int]) -> None:
    """count_tokens' counts of the session's components, from this request on."""
    assert exchange.placement is not None
    session = store.get_session(exchange.placement.thread.session_id)
    store.save_session(session.model_copy(update={"metadata": {**session.metadata,
                                                               "exact": {"seq": exchange.seq, **exact}}}))


def write_marks(store: Store, incomplete: dict[str, dict[str, object]]) -> None:
    """Mark the sessions that lost a request (inside the caller's transaction); a mark stays waiting for a
    session the store does not hold yet."""
    for session_id, mark in list(incomplete.items()):
        cursor = store.connection.execute(
            "UPDATE sessions SET metadata = json_set(coalesce(metadata, '{}'), '$.incomplete', json(?)) "
            "WHERE id = ? AND json_extract(coalesce(metadata, '{}'), '$.incomplete') IS NULL",
            [orjson.dumps(mark).decode(), session_id])
        exists = cursor.rowcount or store.connection.execute(
            "SELECT 1 FROM sessions WHERE id = ?", [session_id]).fetchone()
        if exists:
            incomplete.pop(session_id, None)


def link_transcript(store: Store, thread: Thread, home: Path) -> None:
    if thread.group is None:
        return
    session = store.get_session(thread.session_id)
    if session.metadata.get("agent_transcript"):
        return
    path = transcript_of(thread.group, home)
    if path is not None:
        store.save_session(session.model_copy(update={"metadata": {**session.metadata, "agent_transcript": path}}))


def _unstored(store: Store, placement: Placement, body: Mapping[str, Any],
              clean: Callable[[Any], Any]) -> tuple[list[Message], int]:
    """The request's messages its session's transcript does not hold yet (those a lost write did not store
    included), and the position after them."""
    thread = placement.thread
    position = _after_written(store, thread)
    messages = body["messages"]
    new: list[Message] = []
    seen: set[str] = set()
    for index, mid in enumerate(placement.ids[:len(messages)]):
        if mid in thread.known or mid in seen:
            continue
        seen.add(mid)
        new.append(transcript_message(thread.session_id, index, placement.keys[index], clean(messages[index]),
                                      position))
        position += 1
    return new, position


def _after_written(store: Store, thread: Thread) -> int:
    """Where new messages go: after those the workbench wrote into the session (a compaction's summary), so a
    replay reads the summary before what the agent sent after it."""
    last = store.connection.execute("SELECT max(idx) FROM messages WHERE session_id = ?",
                                    [thread.session_id]).fetchone()[0]
    return thread.next_position if last is None else max(thread.next_position, int(last) + 1)


def history_events(placement: Placement) -> list[OverlayEvent]:
    """What the agent stopped sending leaves the view: all of it past a compaction (a pivot), or the
    messages it sends differently now (archived, marked as the agent's doing) unless they are archived
    already: a client that repeats one question drops the same answer every time, and each event more
    made every later request read the session's overlay again."""
    session_id = placement.thread.session_id
    dropped = [mid for mid in placement.dropped
               if mid in placement.thread.known and mid not in placement.thread.overlay.archived]
    if not dropped and not (placement.pivot and placement.ids):
        return []  # the common case: nothing left the view, so no plan (and no id drawn for one)
    plan = f"proxy-{uuid.uuid4().hex[:12]}"
    if placement.pivot and placement.ids:
        return [OverlayEvent(id=f"{plan}-pivot", session_id=session_id, plan_id=plan, action="pivot",
                             message_id=placement.ids[0], origin="agent", reason="the agent compacted its history",
                             data={"trigger": "agent"})]
    return [OverlayEvent(id=f"{plan}-{n}", session_id=session_id, plan_id=plan, action="archive",
                         message_id=mid, origin="agent", reason="the agent no longer sends this message")
            for n, mid in enumerate(dropped)]


def _save_session(store: Store, thread: Thread, body: dict[str, Any], exchange: Exchange,
                  upstream: str | None) -> bool:
    """The session's row, made with the first request or updated when what it records changed; True when
    it was made now."""
    clean: Callable[[str], str] = Redactor.holding(exchange.secrets).text
    model = body.get("model") if isinstance(body.get("model"), str) else None
    cwd = agent_cwd(body)
    metadata: dict[str, Any] = {"tools_signature": thread.tools, "max_tokens": body.get("max_tokens"),
                                "anthropic_beta": exchange.beta, CWD_KEY: clean(cwd) if cwd else cwd,
                                READ_TOOL_KEY: read_tool(body.get("tools"))}
    if thread.group:
        metadata["agent_session"] = thread.group
    if upstream is not None:
        metadata["upstream"] = upstream
    if thread.parent is not None:
        metadata["parent_session"], metadata["parent_message"] = thread.parent
    if thread.created:
        session = store.get_session(thread.session_id)
        if all(session.metadata.get(key) == value for key, value in metadata.items()) and session.model == model:
            return False
        store.save_session(session.model_copy(update={"model": model, "metadata": {**session.metadata,
                                                                                    **metadata}}))
        return False
    # Once, as the session is made: what tells it apart in the session list.
    if is_title_call(body):
        metadata["side_call"] = "title"
    if (directory := working_directory(body)) is not None:
        metadata["cwd"] = clean(directory)
    title = first_user_text(body["messages"], clean) or "(proxied request)"
    store.save_session(Session(id=thread.session_id, title=title, source_format="proxy", model=model,
                               metadata=metadata))
    return True
