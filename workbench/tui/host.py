"""The engine thread: one owner for the session's Store, SessionContext and agent.

Threading model
---------------
The app starts :meth:`EngineHost.serve` in a thread worker, which runs its own
asyncio loop (``asyncio.run``). Everything that touches engine state runs there,
one command at a time, in the order submitted: opening a session, steering
keys (plan, measure, apply: SQLite writes), undo / redo, strategy plans,
compaction previews and applies, and agent turns. The UI thread only calls
:meth:`submit` (thread-safe) and receives messages posted to the app
(``App.post_message`` is thread-safe). With every engine event worth showing the
engine thread posts an immutable :class:`ScreenState`, so the UI never reads
a context that the agent is changing. A tool that needs approval makes the agent
await a ``concurrent.futures.Future`` that the approval modal completes.

A followed transcript (``workbench watch``) is polled the same way: a small task on
the engine loop queues a quiet ``watch`` command every ``Launch.interval`` seconds
(unless one is still waiting), so each look at the file runs between commands,
never during one. Quiet commands post no ``CommandDone``, so they do not count as
work the app waits for. Opening another session or quitting stops the task.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from textual.app import App
from textual.message import Message
from textual.worker import get_current_worker

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.models import ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.subagent_links import find_subagents, message_peaks
from workbench.tui import messages as msg
from workbench.tui.agent_compaction import agent_compactions, lost_notice
from workbench.tui.crash import write_crash_log
from workbench.tui.demo_pace import compaction_narration, event_narration
from workbench.tui.following import StoreFollow
from workbench.tui.launch import Launch
from workbench.tui.live import (
    WAITING,
    LiveAgent,
    drain,
    forget_unplayed,
    open_session,
    watch_context,
    watch_notices,
)
from workbench.tui.screen_state import ScreenState, StateKeeper

if TYPE_CHECKING:
    from workbench.engine import events as ev
    from workbench.engine.sources.watch import LiveSession, LiveUpdate

log = logging.getLogger("workbench.tui")
Work = Callable[[], Awaitable[None]]
POLL = 0.1
"""Seconds between checks that the app is shutting down."""
WATCH = "watch"
FOLLOW = "follow"


class EngineHost:
    """Engine state lives here and is touched only on the engine thread (see the module docstring)."""

    def __init__(self, app: App[None], launch: Launch) -> None:
        self._app = app
        self.launch = launch
        self._lock = threading.Lock()
        self._queue: deque[tuple[str, Work, bool]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        # Engine-thread state:
        self.store: Store | None = None
        self.ctx: SessionContext | None = None
        self.live: LiveAgent | None = None
        self.watching: LiveSession | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._following: StoreFollow | None = None
        self._last_notice: str | None = None
        self.subagents: dict[str, tuple[str, ...]] = {}
        self.subagent_peaks: dict[str, int] = {}
        self._keeper = StateKeeper()
        self._text = ""
        self._thinking = ""
        self._summary_id: str | None = None

    def reopening(self, launch: Launch, session_id: str) -> Launch:
        """``launch`` on another session of the same database, which need not be checked again if the store
        open now found it healthy (engine thread)."""
        store = self.store
        return launch.reopen(session_id, healthy=store is not None and store.damage is None and store.path == launch.db)

    # --- the UI side ------------------------------------------------------------

    def submit(self, name: str, work: Work) -> None:
        """Queue ``work`` (a coroutine function) to run on the engine thread after what is queued already."""
        with self._lock:
            self._queue.append((name, work, False))
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    def stop(self) -> None:
        self._stopping = True
        with self._lock:
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    def post(self, message: Message) -> None:
        self._app.post_message(message)

    # --- the engine thread --------------------------------------------------------

    async def serve(self) -> None:
        worker = get_current_worker()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
        wake = self._wake
        try:
            while not (self._stopping or worker.is_cancelled):
                wake.clear()
                with self._lock:
                    item = self._queue.popleft() if self._queue else None
                if item is None:
                    try:
                        await asyncio.wait_for(wake.wait(), POLL)
                    except TimeoutError:
                        pass  # a poll: look at the cancellation flag again
                    continue
                name, work, quiet = item
                await self._run(name, work, cancelled=lambda: self._stopping or worker.is_cancelled, quiet=quiet)
        finally:
            await self.close_session()

    async def _run(self, name: str, work: Work, cancelled: Callable[[], bool], quiet: bool = False) -> None:
        """``quiet``: an engine-side command (a look at a followed file): no status change, no ``CommandDone``."""
        task = asyncio.ensure_future(work())
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=POLL)
                if not task.done() and cancelled():
                    task.cancel()
            task.result()
        except asyncio.CancelledError:
            log.info("engine command %s cancelled", name)
        except WorkbenchError as exc:
            self.post(msg.CommandFailed(name, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a bug: say so, keep the traceback in the log
            where = write_crash_log(traceback.format_exc())
            self.post(msg.CommandFailed(name, f"Internal error: {type(exc).__name__}: {exc}", where))
        finally:
            if not quiet and self._following is not None and self.store is not None:
                self._following.seen(self.store)  # this command's own writes are not news
            if not quiet:
                self._set_status("watching" if self.watching is not None else "idle")
                self.post(msg.CommandDone(name))

    # --- sessions -------------------------------------------------------------------

    async def open(self, launch: Launch, *, quiet: bool = False) -> None:
        """Close the current session (and its agent) and open ``launch``'s (``quiet``: the engine's own
        doing, such as the first proxied session arriving, so no progress is shown)."""
        await self.close_session()
        self.launch = launch
        if not quiet:
            self.post(msg.Busy("Opening the session…", "session"))
        opened = await asyncio.to_thread(open_session, launch, self.approve, self.on_event, self.narrate)
        self.store, self.ctx, self.live = opened.store, opened.ctx, opened.live
        if self.live is not None:
            await self.live.start()
        self.subagents = self._find_subagents()
        screen_state = self.screen_state()
        self.post(msg.SessionOpened(screen_state, opened.state))
        if opened.watch is not None:
            self._start_watching(opened.watch)
        elif opened.store is not None:
            await self._start_following(opened.store, self.ctx.session.id)
        if self.live is not None and self.live.autoplay and self.live.next_turn is not None:
            self.post(msg.AutoplayNext(self.live.next_turn))

    async def close_session(self) -> None:
        self._stop_watching()
        live, store, ctx = self.live, self.store, self.ctx
        self.live, self.store, self.ctx = None, None, None
        self._keeper = StateKeeper()  # the closed session's rows go with it, not after the next one loads
        try:
            if live is not None:
                await live.close()
                if store is not None and ctx is not None and live.turns:
                    await asyncio.to_thread(forget_unplayed, store, ctx.session.id)
        finally:
            if store is not None:
                store.close()

    def screen_state(self) -> ScreenState:
        """The open session's state, grown from the last one posted when the session only grew since."""
        assert self.ctx is not None
        return self._keeper.state(self.ctx, self.subagents, self.subagent_peaks, self.launch.policy)

    def changed(self, follow: bool = True) -> None:
        if self.ctx is not None:
            self.post(msg.SessionChanged(self.screen_state(), follow))

    def _find_subagents(self) -> dict[str, tuple[str, ...]]:  # and their peak inputs, for the rows
        found = find_subagents(self.store, self.ctx.session.id) if self.store and self.ctx else {}
        self.subagent_peaks = message_peaks(self.store, found) if self.store and found else {}
        return found

    def _set_status(self, status: msg.Status, detail: str = "") -> None:
        self.post(msg.StatusChanged(status, detail))

    # --- a followed transcript ----------------------------------------------------------

    def _start_watching(self, watch: LiveSession) -> None:
        self.watching, self._last_notice = watch, None
        self._ticker = asyncio.ensure_future(self._tick(watch))

    def _stop_watching(self) -> None:
        self.watching = None
        self._following = None
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    async def _tick(self, watch: object) -> None:
        """Queue a look every interval, unless one is still waiting (engine loop only): at a followed file
        (``watch`` is a LiveSession) or at a stored session other processes write to (a StoreFollow)."""
        name, work = (FOLLOW, self.poll_store) if isinstance(watch, StoreFollow) else (WATCH, self.poll_watch)
        while self.watching is watch or self._following is watch:
            await asyncio.sleep(self.launch.interval)
            with self._lock:
                if not any(queued == name for queued, _, _ in self._queue):
                    self._queue.append((name, work, True))
            if self._wake is not None:
                self._wake.set()

    # --- a stored session other processes write to (the proxy, a command in another terminal) ---

    async def _start_following(self, store: Store, session_id: str) -> None:
        proxy = self.launch.proxy_url is not None
        self._following = await asyncio.to_thread(StoreFollow.start, store, session_id, proxy=proxy)
        self._ticker = asyncio.ensure_future(self._tick(self._following))

    async def refresh_if_changed(self) -> bool:
        """Before a key acts: if another process changed the session since it was shown, load it as it is now.
        True when another process steered it (pinned, pruned, undid…): the key saw stale state and must not
        act; messages only appended (an agent working through the proxy) leave the key's target as it was."""
        follow, store, ctx = self._following, self.store, self.ctx
        if follow is None or store is None or ctx is None or follow.session_id != ctx.session.id:
            return False
        if not await asyncio.to_thread(follow.changed, store):
            return False
        steered = await asyncio.to_thread(follow.steered, store)
        await self._reload(store, ctx, follow=False)
        return steered

    async def _reload(self, store: Store, ctx: SessionContext, *, follow: bool) -> None:
        """The open session as another process left it, shown."""
        self.ctx = await asyncio.to_thread(SessionContext.load, store, ctx.session.id, ctx.config)
        self.changed(follow=follow)
        if agent_compactions(self.ctx) > agent_compactions(ctx):  # the agent compacted: say what its summary lost
            notice = await asyncio.to_thread(lost_notice, self.ctx)
            if notice is not None:
                self.post(msg.Notice(notice[0], "warning" if notice[1] else "information"))

    async def poll_store(self) -> None:
        """Reload the session when another process changed it; open the first proxied session to arrive,
        and name later ones (never raise)."""
        follow, store, ctx = self._following, self.store, self.ctx
        if follow is None or store is None or ctx is None:
            return
        try:
            changed, new = await asyncio.to_thread(follow.look, store)
            if follow.session_id == WAITING and new:
                await self.open(self.reopening(self.launch, new[0][0]), quiet=True)
                return
            for _, title in new:
                self.post(msg.Notice(f"A new proxied session: {title or 'untitled'} (ctrl+o lists it)", "information"))
            if changed:
                await self._reload(store, ctx, follow=True)
        except (WorkbenchError, sqlite3.Error) as exc:
            self.post(msg.Notice(f"Could not read the session again: {exc}", "warning"))

    async def poll_watch(self) -> None:
        """Read what the other agent appended; show it, and say what went wrong (never raise)."""
        watch = self.watching
        if watch is None:
            return  # another session was opened while this look waited in the queue
        try:
            updates = await asyncio.to_thread(drain, watch)
        except WorkbenchError as exc:
            self._stop_watching()
            self.post(msg.Notice(f"Stopped following {watch.follower.path.name}: {exc}", "error"))
            self._set_status("idle")
            return
        if self.watching is not watch:
            return
        self.ctx = watch_context(watch)
        for update in updates:
            self._tell(update)
        if any(not update.follow.empty for update in updates):
            self.changed(follow=True)

    def _tell(self, update: LiveUpdate) -> None:
        notices, self._last_notice = watch_notices(update, self._last_notice, self.watching_name)
        for text in notices:
            self.post(msg.Notice(text, "warning"))

    @property
    def watching_name(self) -> str:
        return self.watching.follower.path.name if self.watching is not None else ""

    # --- the live agent ---------------------------------------------------------------

    async def send(self, text: str) -> None:
        live = self.live
        if live is None:
            raise WorkbenchError("this session cannot be continued here")
        self._set_status("streaming")
        live.begin_turn()
        self.post(msg.LiveChanged(live.state(working=True)))
        try:
            await live.send(text)
        finally:
            self.subagents = self._find_subagents()
            self.changed()
            self.post(msg.LiveChanged(live.state()))
        follow_up = live.next_turn if live.autoplay else None
        if follow_up is not None:
            self._set_status("idle")
            await self.pause(self.launch.turn_pause)  # a moment to look before the next message goes
            self.post(msg.AutoplayNext(follow_up))

    async def approve(self, call: ToolUsePart) -> bool:
        """The agent's approver: ask the UI and wait (without blocking this loop) for the answer."""
        if self.launch.approval == "approve":
            return True
        answer: Future[bool] = Future()
        countdown = self.launch.countdown if self.launch.approval == "countdown" else None
        self._set_status("waiting for approval", call.name)
        self.post(msg.ApprovalRequested(call, answer, countdown))
        try:
            return await asyncio.wrap_future(answer)
        finally:
            self._set_status("running tool", call.name)

    async def pause(self, seconds: float) -> None:
        """Wait ``seconds``, at the played demo's speed if it is one."""
        if self.launch.pace is not None:
            await self.launch.pace.pause(seconds)
        else:
            await asyncio.sleep(seconds)

    def narrate(self, text: str) -> None:
        """Say what the played demo is doing now (any thread)."""
        self.post(msg.Narration(text))

    def on_event(self, event: ev.Event) -> None:
        """The agent's event sink (engine thread): translate to UI messages."""
        from workbench.engine import events as ev  # deferred: a session opened to be read never has an event

        if self.launch.pace is not None and (said := event_narration(event)) is not None:
            self.narrate(said)

        match event:
            case ev.TurnStart():
                self._text = self._thinking = ""
                self.post(msg.Streaming("", ""))
                self._set_status("streaming")
            case ev.TextDelta(text=text):
                self._text += text
                self.post(msg.Streaming(self._text, self._thinking))
            case ev.ThinkingDelta(text=text):
                self._thinking += text
                self.post(msg.Streaming(self._text, self._thinking))
            case ev.ToolCall(name=name, input=args):
                shown = ", ".join(f"{k}={v!r}" for k, v in list(args.items())[:2])
                self.post(msg.ToolActivity("call", name, shown[:160]))
                self._set_status("running tool", name)
            case ev.ToolResult(name=name, is_error=err, bytes=size, preview=preview):
                self.post(msg.ToolActivity("result", name, f"{size:,} bytes · {preview[:120]}", err))
            case ev.Offloaded(ref_id=ref, bytes=size):
                self.post(msg.ToolActivity("offload", "offloaded", f"{size:,} bytes as {ref}"))
            case ev.Warning(message=text, kind=kind):
                self.post(msg.Notice(text if kind in ("warn", "compact", "block") else f"{kind}: {text}", "warning"))
            case ev.Retry(attempt=n, delay=delay, reason=reason):
                self.post(msg.Notice(f"retry {n} in {delay:.1f} s ({reason})", "warning"))
            case ev.ErrorEvent(message=text):
                self.post(msg.Notice(text, "error"))
            case ev.CompactionStart(trigger=trigger, before_tokens=before):
                self._set_status("compacting", trigger)
                self.post(msg.LiveCompaction("start", trigger, before))
            case ev.CompactBoundary(summary_id=summary_id):
                self._summary_id = summary_id
                self.changed()
            case ev.CompactionEnd():
                self._compaction_end(event)
            case ev.MessageAdded() | ev.UsageReported() | ev.BudgetChanged():
                self.changed()

    def _compaction_end(self, event: ev.CompactionEnd) -> None:
        summary = ""
        summarized = preserved = 0
        pinned: tuple[int, ...] = ()
        if self.ctx is not None and self._summary_id and event.error is None:
            message = next((m for m in reversed(self.ctx.messages) if m.id == self._summary_id), None)
            summary = message.text if message is not None else ""
            pivot = next((e for e in reversed(self.ctx.events) if e.action == "pivot"), None)
            if pivot is not None:
                summarized, preserved = int(pivot.data.get("summarized", 0)), int(pivot.data.get("preserved", 0))
            by_compaction = {e.message_id for e in self.ctx.events if e.action == "pin" and e.origin == "compaction"}
            kept = self.ctx.overlay.pinned - by_compaction  # the user's pins; a compaction's own are not PERSIST
            pinned = tuple(i + 1 for i, m in enumerate(self.ctx.messages) if m.id in kept)
        after = self.ctx.budget() if self.ctx is not None else None
        facts = None
        if self.ctx is not None and event.error is None:
            from workbench.engine.plans.fact_check import latest_check  # loaded with the compaction that just ran

            facts = latest_check(self.ctx)
        self.post(msg.LiveCompaction("end", event.trigger, event.before_tokens, event.after_tokens, summary,
                                     event.summarizer, summarized, preserved, event.error, after, pinned, facts))
        if self.launch.pace is not None and event.error is None:
            self.narrate(compaction_narration(pinned, event.before_tokens, event.after_tokens))
        self._summary_id = None
        self._set_status("streaming")
