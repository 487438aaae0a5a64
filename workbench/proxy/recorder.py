"""From requests on the wire to sessions in the store, and the store's overlay back onto the wire.

:meth:`Recorder.prepare` runs while the request waits: it parses the body, places it in a conversation,
and applies that session's overlay. Everything it must write goes to one writer thread, in order, so
the request goes upstream without waiting for SQLite; the request itself is handed over once its answer
begins (:meth:`Recorder.store_request`), so storing it does not delay the answer's first byte. If preparing
fails, the request goes upstream as the client sent it and the failure is reported, never the other way round
(fail open).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from workbench.engine.context.wire_offload import CWD_KEY, READ_TOOL_KEY, agent_cwd, read_tool
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.edit_price import CACHE_LIFETIME
from workbench.engine.sources.request_steering import read_digests, steer_request
from workbench.engine.sources.side_calls import is_title_call, working_directory
from workbench.engine.transcript.blocks import blocks_of
from workbench.engine.transcript.models import Message, Session, Usage
from workbench.engine.transcript.overlay import OverlayEvent, fold, is_pending
from workbench.engine.transcript.redaction import Redactor
from workbench.engine.transcript.request_blocks import (
    first_user_text,
    message_id,
    message_key,
    parse_message_id,
    transcript_message,
)
from workbench.engine.transcript.request_body import RequestBodies
from workbench.engine.transcript.request_marks import TTLS
from workbench.engine.transcript.request_store import (
    EncodedRequest,
    activate_pending,
    encode,
    finish_request,
    last_request,
    last_request_at,
    overlay_mark,
    save_request,
)
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter
from workbench.proxy.exact import ExactCounts
from workbench.proxy.exchange import Exchange
from workbench.proxy.response import Answer
from workbench.proxy.threads import Placement, Thread, Threads, agent_session_id, subagent_prompts, tools_signature

if TYPE_CHECKING:
    from workbench.engine.settings.config import Config
    from workbench.engine.settings.policies import Policy
    from workbench.proxy.policy_runner import PolicyRunner

Report = Callable[[Exchange], None]
COMPRESS_OVER = 512
"""Part bodies longer than this are stored compressed: a proxied session records whole histories."""

ONE_HOUR = TTLS["1h"]
ONE_HOUR_MARK = re.compile(rb'"ttl"\s*:\s*"1h"')
"""A cache mark asking for an hour; inside a JSON string its quotes would be escaped, so this is a mark."""


def _transcript_of(group: str, home: Path) -> str | None:
    """Claude Code's own transcript of this session, if it has written one."""
    projects = home / ".claude" / "projects"
    if not projects.is_dir():
        return None
    found = next(projects.glob(f"*/{group}.jsonl"), None)
    return str(found) if found else None


def _kept(answer: Answer, status: int) -> bool:
    """An answer joins the history only when it arrived whole: the agent does not send back a cut one."""
    return answer.complete and bool(answer.blocks) and status < 400 and not answer.error


class Recorder:
    """Owns the proxy's sessions: placing requests, steering them, and storing them (on its own thread)."""

    def __init__(self, db_path: Path, *, home: Path | None = None, report: Report | None = None) -> None:
        self.db_path = db_path
        self.home = home or Path.home()
        self.report = report
        self.threads = Threads()
        self.upstream: str | None = None
        """Where the proxy forwards: kept with each session, so a summary asked of the LLM goes the same way."""
        self._bodies = RequestBodies()
        self.counter = TokenCounter()
        self._reader = Store(db_path)
        """The loop thread's own connection: reads overlay marks while a request waits."""
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="workbench-proxy-store")
        self._local = threading.local()
        self.errors: list[str] = []
        self._open = 0
        """Requests prepared whose answers are not through yet."""
        self._through = threading.Condition()
        self._writer.submit(self.counter.count_text, "warm")  # the tokenizer loads now, not on the first answer
        self.policy: PolicyRunner | None = None
        """The policy run for every session (``run_policy``); None: the agent's requests change only when asked."""

    def run_policy(self, policy: Policy, config: Config) -> None:
        """Run ``policy`` for every session from now on (see ``policy_runner``)."""
        from workbench.proxy.policy_runner import PolicyRunner  # deferred: the strategies, only for a policy

        self.policy = PolicyRunner(policy, config, self._writer.submit, self._store, self.errors)

    def close(self) -> None:
        """Store what is pending; link the agents' own transcripts, which they may write only at the end."""
        threads = [t for group in self.threads.groups().values() for t in group if t.created and t.group]

        def link() -> None:
            for thread in threads:
                try:
                    self._link_transcript(self._store(), thread)
                except (WorkbenchError, sqlite3.Error, OSError) as exc:
                    self.errors.append(f"could not link {thread.session_id} to its transcript: {exc}")

        self._writer.submit(link)
        self._writer.shutdown(wait=True)
        self._reader.close()

    def flush(self) -> None:
        """Wait until everything submitted so far is stored."""
        self._writer.submit(lambda: None).result()

    def settle(self, timeout: float = 10.0) -> None:
        """Wait (up to ``timeout`` seconds) until every request seen so far has its answer through, then until
        all is stored: a client has the whole answer a moment before the proxy is done with it."""
        with self._through:
            self._through.wait_for(lambda: self._open == 0, timeout)
        self.flush()

    # --- while the request waits ---------------------------------------------------------------

    def prepare(self, raw: bytes, beta: str | None = None, secrets: tuple[str, ...] = ()) -> Exchange:
        """Place the request and steer it; on any failure, the client's bytes unchanged and a warning.
        ``beta``: the request's ``anthropic-beta`` header (a 1M-context beta selects the 1M window);
        ``secrets``: the client's key, redacted wherever it appears in what is stored."""
        exchange = Exchange(body=raw, beta=beta, secrets=secrets)
        with self._through:
            self._open += 1
        try:
            request = self._bodies.read(raw)
            if request is None:
                return exchange
            body, keys = request.body, request.keys
            exchange.parsed = body
            self._restore(agent_session_id(body), tools_signature(body))
            placement = self.threads.place(body, keys)
            thread = placement.thread
            thread.seq += 1
            exchange.placement, exchange.seq = placement, thread.seq
            self._refresh_overlay(thread)
            exchange.steered_at = datetime.now(UTC)
            self._activate_when_cold(thread, exchange)
            if self.policy is not None:
                self.policy.before_steering(thread, exchange)
            steering = steer_request(request.messages, placement.ids, thread.overlay, thread.summaries, thread.steered,
                                     thread.digests)
            if steering is not None and steering.messages is not None:
                exchange.steered = {**request.body, "messages": steering.messages}
                exchange.body = orjson.dumps(exchange.steered)
                exchange.sent_ids = steering.ids
            elif steering is not None:
                exchange.body = request.rewritten(steering.replaced)
                exchange.steered = request.with_messages(steering.replaced)
            if steering is not None:
                exchange.edited = True
                exchange.changed = steering.changed
            thread.keys, thread.ids = list(keys), list(placement.ids)
        except Exception as exc:  # noqa: BLE001 - fail open: the agent must never see a workbench error
            exchange.body = raw
            exchange.edited, exchange.steered, exchange.sent_ids = False, None, None
            exchange.warning = f"request forwarded unchanged: {type(exc).__name__}: {exc}"
            self.errors.append(exchange.warning)
            return exchange
        exchange.pending = True
        return exchange

    def store_request(self, exchange: Exchange) -> None:
        """Store the prepared request, once. The server calls this when the answer begins (or soon after the
        request went upstream, when the answer is slow): storing holds the interpreter for milliseconds, and
        a fast answer's first byte waited for it."""
        if exchange.pending:
            exchange.pending = False
            self._submit(self._store_request, exchange)

    def _restore(self, group: str | None, tools: str) -> None:
        """Threads of an agent session stored by an earlier proxy run (``claude --resume``)."""
        if group is None or group in self.threads.groups():
            return
        self.threads.groups()[group] = []
        rows = self._reader.connection.execute(
            "SELECT id FROM sessions WHERE source_format = 'proxy' AND json_extract(metadata, '$.agent_session') = ?",
            [group]).fetchall()
        for (session_id,) in rows:
            session = self._reader.get_session(session_id)
            thread = Thread(session_id=session_id, group=group, tools=str(session.metadata.get("tools_signature", "")),
                            created=True)
            self._refresh_overlay(thread)
            ids = [r[0] for r in self._reader.connection.execute(
                "SELECT id FROM messages WHERE session_id = ? ORDER BY idx", [session_id])]
            thread.known = set(ids)
            thread.next_position = len(ids)
            # The agent sends nothing from before its own compactions; one the user applied leaves what it sends
            # as it was (the proxy leaves the summarised messages out on the wire).
            pivot = next((p for p in reversed(thread.overlay.pivots) if p.summary_id is None), None)
            if pivot is not None and pivot.message_id in ids:
                ids = ids[ids.index(pivot.message_id):]
            thread.ids = [i for i in ids if i not in thread.overlay.archived and parse_message_id(i)]
            thread.keys = [parsed[1] for parsed in map(parse_message_id, thread.ids) if parsed]
            last = self._reader.connection.execute("SELECT max(seq) FROM requests WHERE session_id = ?",
                                                   [session_id]).fetchone()
            thread.seq = int(last[0] or 0)
            thread.last_request_at = last_request_at(self._reader, session_id)
            self.threads.add(thread)

    def _refresh_overlay(self, thread: Thread) -> None:
        """Read the session's overlay again only when its events changed (another process steered it)."""
        if not thread.created:
            return
        mark = overlay_mark(self._reader, thread.session_id)
        if mark != thread.overlay_mark:
            thread.events = self._reader.load_overlay(thread.session_id)
            for event in thread.events:
                activation = thread.activated.get(event.id)
                if activation is not None and is_pending(event):
                    event.data.update(activation)
            thread.overlay = fold(thread.events)
            thread.overlay_mark = mark
            thread.steered = {}
            self._read_summaries(thread)
            thread.digests = read_digests(self._reader, thread.session_id, thread.overlay, thread.digests)

    def _read_summaries(self, thread: Thread) -> None:
        """The summaries of the compactions the user applied, as the view shows them first."""
        wanted = [p.summary_id for p in thread.overlay.pivots
                  if p.summary_id is not None and p.summary_id not in thread.summaries]
        if wanted:
            for message in self._reader.load_messages(thread.session_id, wanted):
                thread.summaries[message.id] = blocks_of(message.parts)

    def _activate_when_cold(self, thread: Thread, exchange: Exchange) -> None:
        """Edits queued until the cache is cold apply from the first request after a pause that outlived it."""
        last, thread.last_request_at = thread.last_request_at, exchange.at
        lifetime = thread.cache_lifetime
        thread.cache_lifetime = ONE_HOUR if ONE_HOUR_MARK.search(exchange.body) else CACHE_LIFETIME
        if last is not None and exchange.at - last <= lifetime:
            return
        queued = [event for event in thread.events if is_pending(event) and not event.undone]
        for event in queued:
            activation = {"activated_at": exchange.at.isoformat(), "activated_seq": exchange.seq}
            event.data.update(activation)
            thread.activated[event.id] = activation
        if queued:
            exchange.activated = [event.id for event in queued]
            thread.overlay = fold(thread.events)
            thread.steered = {}

    # --- when the answer has passed --------------------------------------------------------------

    def finish(self, exchange: Exchange, status: int, answer: Answer | None) -> None:
        """The answer is through: its message joins the history the agent will send next."""
        try:
            self.store_request(exchange)
            exchange.status, exchange.answer = status, answer
            placement = exchange.placement
            if placement is not None and answer is not None and _kept(answer, status):
                raw = {"role": "assistant", "content": answer.blocks}
                key = message_key(raw)
                thread = placement.thread
                answer_id = message_id(len(placement.keys), key)
                thread.keys = [*placement.keys, key]
                thread.ids = [*placement.ids, answer_id]
                for prompt in subagent_prompts(answer.blocks):
                    thread.calls[prompt] = answer_id
            self._submit(self._store_answer, exchange)
        finally:  # through even if recording it failed: :meth:`settle` must not wait for it
            with self._through:
                self._open -= 1
                self._through.notify_all()

    def set_exact(self, exchange: Exchange, counts: ExactCounts) -> None:
        """count_tokens answered for this request: its session's components are exact from now on."""
        self._submit(lambda e: self._store_exact(e, counts), exchange)

    # --- on the writer thread -------------------------------------------------------------------

    def _store_exact(self, exchange: Exchange, counts: ExactCounts) -> None:
        assert exchange.placement is not None
        store = self._store()
        session = store.get_session(exchange.placement.thread.session_id)
        exact = {"seq": exchange.seq, "system": counts.system, "tools": counts.tools, "messages": counts.messages,
                 "total": counts.total}
        store.save_session(session.model_copy(update={"metadata": {**session.metadata, "exact": exact}}))

    def _submit(self, work: Callable[[Exchange], None], exchange: Exchange) -> Future[None]:
        def run() -> None:
            try:
                work(exchange)
            except Exception as exc:  # noqa: BLE001 - storing must not stop the proxy; the failure is reported
                exchange.warning = f"could not store request: {type(exc).__name__}: {exc}"
                self.errors.append(exchange.warning)
        return self._writer.submit(run)

    def _store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = Store(self.db_path)
        return store

    def _store_request(self, exchange: Exchange) -> None:
        placement, body = exchange.placement, exchange.parsed
        assert placement is not None and body is not None
        store, thread = self._store(), placement.thread
        self._save_session(store, thread, body, exchange.beta)
        messages = body["messages"]
        clean = Redactor.holding(exchange.secrets).value
        self._after_written(store, thread)
        new: list[Message] = []
        for index in range(placement.shared, len(messages)):
            mid = placement.ids[index]
            if mid in thread.known:
                continue
            message = transcript_message(thread.session_id, index, placement.keys[index], clean(messages[index]),
                                         thread.next_position)
            new.append(message)
            thread.known.add(mid)
            thread.next_position += 1
        events = self._history_events(placement)
        sent = exchange.steered if exchange.steered is not None else body
        ids = exchange.sent_ids if exchange.sent_ids is not None else placement.ids
        encoded: EncodedRequest = encode(sent, ids, exchange.changed, clean=clean, known=thread.entries,
                                         prompts=thread.prompts)
        thread.entries.update(encoded.entries)
        with store.transaction():
            if exchange.activated:
                activate_pending(store, thread.session_id, exchange.activated, exchange.at, exchange.seq)
            store.save_messages(new, self.counter, compress_over=COMPRESS_OVER)
            if events:
                store.add_overlay_events(events)
            save_request(store, thread.session_id, exchange.seq, encoded,
                         last_request(store, thread.session_id, thread.last_stored),
                         edited=exchange.edited, warning=exchange.warning)
        thread.last_stored = (exchange.seq, encoded.messages)

    @staticmethod
    def _after_written(store: Store, thread: Thread) -> None:
        """New messages go after those the workbench wrote into the session (a compaction's summary), so a
        replay reads the summary before what the agent sent after it."""
        last = store.connection.execute("SELECT max(idx) FROM messages WHERE session_id = ?",
                                        [thread.session_id]).fetchone()[0]
        if last is not None:
            thread.next_position = max(thread.next_position, int(last) + 1)

    def _history_events(self, placement: Placement) -> list[OverlayEvent]:
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

    def _save_session(self, store: Store, thread: Thread, body: dict[str, Any], beta: str | None) -> None:
        model = body.get("model") if isinstance(body.get("model"), str) else None
        metadata: dict[str, Any] = {"tools_signature": thread.tools, "max_tokens": body.get("max_tokens"),
                                    "anthropic_beta": beta, CWD_KEY: agent_cwd(body), READ_TOOL_KEY: read_tool(
                                        body.get("tools"))}
        if thread.group:
            metadata["agent_session"] = thread.group
        if self.upstream is not None:
            metadata["upstream"] = self.upstream
        if thread.parent is not None:
            metadata["parent_session"], metadata["parent_message"] = thread.parent
        if thread.created:
            session = store.get_session(thread.session_id)
            if all(session.metadata.get(key) == value for key, value in metadata.items()) and session.model == model:
                return
            session = session.model_copy(update={"model": model, "metadata": {**session.metadata, **metadata}})
        else:
            # Once, as the session is made: what tells it apart in the session list.
            if is_title_call(body):
                metadata["side_call"] = "title"
            if (directory := working_directory(body)) is not None:
                metadata["cwd"] = directory
            session = Session(id=thread.session_id, title=first_user_text(body["messages"]) or "(proxied request)",
                              source_format="proxy", model=model, metadata=metadata)
            thread.created = True
        store.save_session(session)

    def _store_answer(self, exchange: Exchange) -> None:
        placement, answer = exchange.placement, exchange.answer
        if placement is not None:
            store, thread = self._store(), placement.thread
            usage: Usage | None = answer.usage if answer is not None else None
            with store.transaction():
                if answer is not None and _kept(answer, exchange.status):
                    index = len(placement.keys)
                    raw = {"role": "assistant", "content": answer.blocks}
                    stored = Redactor.holding(exchange.secrets).value(raw)
                    message = transcript_message(thread.session_id, index, message_key(raw), stored,
                                                 thread.next_position)
                    if message.id not in thread.known:
                        message = message.model_copy(update={"usage": usage, "model": answer.model,
                                                             "created_at": exchange.steered_at})
                        store.save_messages([message], self.counter, compress_over=COMPRESS_OVER)
                        thread.known.add(message.id)
                        thread.next_position += 1
                    if usage is not None:
                        store.record_usage(thread.session_id, message.id, usage, None)
                finish_request(store, thread.session_id, exchange.seq, exchange.status, usage,
                               answer.edits if answer is not None else (), exchange.outcome)
                self._link_transcript(store, thread)
        if self.report is not None:
            self.report(exchange)

    def _link_transcript(self, store: Store, thread: Thread) -> None:
        if thread.group is None:
            return
        session = store.get_session(thread.session_id)
        if session.metadata.get("agent_transcript"):
            return
        path = _transcript_of(thread.group, self.home)
        if path is not None:
            store.save_session(session.model_copy(update={"metadata": {**session.metadata, "agent_transcript": path}}))
