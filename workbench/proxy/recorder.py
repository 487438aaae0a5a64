"""From requests on the wire to sessions in the store, and the store's overlay back onto the wire.

:meth:`Recorder.prepare` runs while the request waits: it parses the body, places it in a conversation,
and applies that session's overlay. Everything it must write goes to one writer (:mod:`.writer`), in order,
so the request goes upstream without waiting for SQLite; the request itself is handed over once its answer
begins (:meth:`Recorder.store_request`), so storing it does not delay the answer's first byte. If preparing
fails, the request goes upstream as the client sent it and the failure is reported, never the other way round
(fail open). A write the database will not take is said so, and the session is marked incomplete from that
request on (``metadata.incomplete``); what the recorder keeps in memory changes only once a write is in, so
the next request stores what the lost one did not.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.edit_price import CACHE_LIFETIME
from workbench.engine.sources.request_steering import read_digests, steer_request
from workbench.engine.transcript.blocks import blocks_of
from workbench.engine.transcript.overlay import fold, is_pending
from workbench.engine.transcript.request_blocks import message_id, message_key, parse_message_id
from workbench.engine.transcript.request_body import RequestBodies
from workbench.engine.transcript.request_marks import TTLS
from workbench.engine.transcript.request_store import last_request_at, overlay_mark
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.token_process import TokenProcess
from workbench.engine.transcript.tokens import TokenCounter
from workbench.proxy.exact import ExactCounts
from workbench.proxy.exchange import Exchange
from workbench.proxy.response import Answer
from workbench.proxy.storing import (
    Context,
    kept,
    link_transcript,
    store_answer,
    store_exact,
    store_request,
    write_marks,
)
from workbench.proxy.threads import Thread, Threads, agent_session_id, subagent_prompts, tools_signature
from workbench.proxy.writer import Job, StoreWriter, Warn, check_writable

if TYPE_CHECKING:
    from workbench.engine.settings.config import Config
    from workbench.engine.settings.policies import Policy
    from workbench.proxy.policy_runner import PolicyRunner

Report = Callable[[Exchange], None]

ONE_HOUR = TTLS["1h"]
ONE_HOUR_MARK = re.compile(rb'"ttl"\s*:\s*"1h"')
"""A cache mark asking for an hour; inside a JSON string its quotes would be escaped, so this is a mark."""
IDLE = timedelta(minutes=10)
"""A session without a request for this long leaves memory (:meth:`Thread.rest`)."""
REST_EVERY = 64
"""Requests between two looks for idle sessions."""
BIG_REQUEST = 4 * 1024 * 1024
"""Bytes of a request body from which its new text is counted in a process of its own."""


class Recorder:
    """Owns the proxy's sessions: placing requests, steering them, and storing them (on its own thread)."""

    def __init__(self, db_path: Path, *, home: Path | None = None, report: Report | None = None,
                 warn: Warn | None = None) -> None:
        """``warn``: where a line about storage goes (the database locked, or refusing writes); the same
        text stays in :attr:`notice` while it holds, for the app to show."""
        check_writable(db_path)
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
        self.errors: list[str] = []
        self._writer = StoreWriter(db_path, self._warned(warn))
        self._incomplete: dict[str, dict[str, object]] = {}
        """Sessions that lost a request, and what to mark them with, until the store takes the mark."""
        self._open = 0
        """Requests prepared whose answers are not through yet."""
        self._prepared = 0
        self._big: TokenCounter | None = None
        """The counter for big requests (:meth:`_counter_for`), made with the first."""
        self._through = threading.Condition()
        # The tokenizer loads now, not on the first answer.
        self._writer.submit(Job(run=self._warm, lost=lambda _: None))
        self.policy: PolicyRunner | None = None
        """The policy run for every session (``run_policy``); None: the agent's requests change only when asked."""

    def run_policy(self, policy: Policy, config: Config) -> None:
        """Run ``policy`` for every session from now on (see ``policy_runner``)."""
        from workbench.proxy.policy_runner import PolicyRunner  # deferred: the strategies, only for a policy

        self.policy = PolicyRunner(policy, config, self._submit_work, self.errors)

    def _submit_work(self, work: Callable[[Store], None]) -> None:
        """Work for the store's thread, after the writes queued before it (a policy's planning)."""
        self._writer.submit(Job(run=work, lost=lambda _: None))

    def _warm(self, _: Store) -> None:
        self.counter.count_text("warm")

    def _warned(self, warn: Warn | None) -> Warn:
        def said(text: str) -> None:
            self.errors.append(text)
            if warn is not None:
                warn(text)
        return said

    @property
    def notice(self) -> str | None:
        """What the app shows about storage now: the database locked, or refusing writes (None: all is well)."""
        return self._writer.notice

    def close(self) -> None:
        """Stop: store everything queued (waiting through another program's lock as long as it holds), link the
        agents' own transcripts (which they may write only at the end), mark the sessions that lost requests,
        and truncate the WAL. Call it once the server takes no more requests (a signal handler does); what
        could not be stored was said on the way (``warn``)."""
        threads = [t for group in self.threads.groups().values() for t in group if t.created and t.group]

        def last(store: Store) -> None:
            for thread in threads:
                try:
                    link_transcript(store, thread, self.home)
                except (WorkbenchError, sqlite3.Error, OSError) as exc:
                    self.errors.append(f"could not link {thread.session_id} to its transcript: {exc}")
            with store.transaction():
                write_marks(store, self._incomplete)

        self._reader.close()
        self._writer.close(last)
        if self._big is not None and self._big.process is not None:
            self._big.process.close()

    def flush(self) -> None:
        """Wait until everything submitted so far is stored (or given up, and said so)."""
        self._writer.flush()

    def waiting(self) -> int:
        """Writes queued and not yet in the store."""
        return self._writer.waiting()

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
            self._wake(thread)
            thread.seq += 1
            thread.open += 1
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
        self._rest_idle()
        return exchange

    def _rest_idle(self) -> None:
        """Now and then, idle sessions leave memory: a proxy that saw 600 sessions holds only the live ones."""
        self._prepared += 1
        if self._prepared % REST_EVERY == 0:
            for thread in self.threads.idle(datetime.now(UTC) - IDLE):
                thread.rest()

    def _wake(self, thread: Thread) -> None:
        """A resting session's next request: read back what storing and steering it need."""
        if not thread.resting:
            return
        ids = [r[0] for r in self._reader.connection.execute(
            "SELECT id FROM messages WHERE session_id = ? ORDER BY idx", [thread.session_id])]
        thread.known, thread.next_position, thread.resting = set(ids), len(ids), False

    def store_request(self, exchange: Exchange) -> None:
        """Store the prepared request, once. The server calls this when the answer begins (or soon after the
        request went upstream, when the answer is slow): storing holds the interpreter for milliseconds, and
        a fast answer's first byte waited for it."""
        if exchange.pending:
            exchange.pending = False
            self._store_request(exchange)

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
        hour = b'"1h"' in exchange.body and ONE_HOUR_MARK.search(exchange.body) is not None  # no scan of 30 MB
        thread.cache_lifetime = ONE_HOUR if hour else CACHE_LIFETIME
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
            if placement is not None:
                placement.thread.open = max(placement.thread.open - 1, 0)
            if placement is not None and answer is not None and kept(answer, status):
                raw = {"role": "assistant", "content": answer.blocks}
                key = message_key(raw)
                thread = placement.thread
                answer_id = message_id(len(placement.keys), key)
                thread.keys = [*placement.keys, key]
                thread.ids = [*placement.ids, answer_id]
                for prompt in subagent_prompts(answer.blocks):
                    thread.calls[prompt] = answer_id
            self._store_answer(exchange)
        finally:  # through even if recording it failed: :meth:`settle` must not wait for it
            with self._through:
                self._open -= 1
                self._through.notify_all()

    def set_exact(self, exchange: Exchange, counts: ExactCounts) -> None:
        """count_tokens answered for this request: its session's components are exact from now on."""
        self._store_exact(exchange, counts)


    # --- to the writer ---------------------------------------------------------------------------

    def _context(self, exchange: Exchange | None = None) -> Context:
        return Context(counter=self._counter_for(exchange), home=self.home, upstream=self.upstream)

    def _counter_for(self, exchange: Exchange | None) -> TokenCounter:
        """A big request's new text is counted in a process of its own: counting 30 MB here held the
        interpreter for seconds, and every other client's request waited for it."""
        if exchange is None or len(exchange.body) < BIG_REQUEST:
            return self.counter
        if self._big is None:
            try:
                self._big = TokenCounter(self.counter.cache, process=TokenProcess.launch())
            except OSError:
                return self.counter
        return self._big

    def _store_request(self, exchange: Exchange) -> None:
        self._writer.submit(Job(run=lambda store: store_request(store, exchange, self._context(exchange)),
                                lost=lambda reason: self._lost(exchange, reason), size=len(exchange.body)))

    def _store_answer(self, exchange: Exchange) -> None:
        def run(store: Store) -> None:
            store_answer(store, exchange, self._context(exchange))
            self._done(exchange, store)

        def lost(reason: str) -> None:
            self._lost(exchange, reason)
            self._done(exchange, None)

        self._writer.submit(Job(run=run, lost=lost))

    def _store_exact(self, exchange: Exchange, counts: ExactCounts) -> None:
        exact = {"system": counts.system, "tools": counts.tools, "messages": counts.messages, "total": counts.total}
        self._writer.submit(Job(run=lambda store: store_exact(store, exchange, exact),
                                lost=lambda reason: self.errors.append(f"exact counts not stored: {reason}")))

    def _lost(self, exchange: Exchange, reason: str) -> None:
        """A write given up: the request still went through; its line says so, and its session is marked."""
        note = f"not stored: {reason}"
        if exchange.warning is None or note not in exchange.warning:
            exchange.warning = f"{exchange.warning}; {note}" if exchange.warning else note
        placement = exchange.placement
        if placement is not None and placement.thread.session_id not in self._incomplete:
            thread = placement.thread
            self._incomplete[thread.session_id] = {
                "from": exchange.at.isoformat(), "after_seq": thread.last_stored[0] if thread.last_stored else None,
                "reason": reason}

    def _done(self, exchange: Exchange, store: Store | None) -> None:
        """The exchange is as stored as it will be: marks that wait are written, and the line is printed."""
        if store is not None and self._incomplete:
            with store.transaction():
                write_marks(store, self._incomplete)
        if self.report is not None:
            self.report(exchange)
