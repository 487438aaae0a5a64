"""Opening a session on the engine thread, and the live agent that continues it.

:func:`open_session` turns a :class:`Launch` into a :class:`SessionContext`
(and a :class:`LiveAgent` when the session can be continued): a scripted demo
gets a fresh engine session with the script's workspace; a stored engine
session is continued with the Anthropic provider when there is an API key, and a
session a script played is resumed by its script where it stopped; an
imported transcript has no agent to continue it, but its context can be steered (kept by the workbench:
what it shows, exports and forks; the transcript file is never changed); a followed
transcript (``workbench watch``) is read with a :class:`LiveSession` and not
stored at all, so nothing can be steered until it is imported.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.engine.context.session import SCRIPT_KEY, SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Session
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.targets import resolve_target
from workbench.gc_policy import paused, settle_loaded
from workbench.tui.demo_pace import DemoPace, PacedScript, Say
from workbench.tui.launch import Launch
from workbench.tui.messages import LiveState

if TYPE_CHECKING:  # the agent's modules load when a session the agent continues opens, the follower's when
    # a transcript is followed
    from workbench.engine import events as ev
    from workbench.engine.agent.loop import Agent, Approver
    from workbench.engine.agent.runner import RunSetup
    from workbench.engine.sources.watch import LiveSession, LiveUpdate

log = logging.getLogger("workbench.tui")
DRAIN_POLLS = 64
"""At most this many reads in one look at a followed file (each reads up to the importer's line limit)."""
WATCHED = ("read-only: this transcript is being followed, not stored, so it cannot be steered; "
           "ctrl+o and Enter on it import it")
PROXIED = "proxied: what you steer here applies to the agent's next request"
WAITING = "proxy:waiting"
"""The id of the empty session shown until a proxied agent sends its first request."""
IMPORTED = "imported {} transcript, no agent to message · steering stays in the workbench; the file is never changed"


def imported_reason(label: str) -> str:
    """What the message box of an imported transcript says: it is not read-only (the steering keys work, kept
    as the workbench's overlay), but nothing continues it and its file stays as it was."""
    return IMPORTED.format(label)


NO_KEY = ("This session was run by the workbench's own agent with the Anthropic API: set ANTHROPIC_API_KEY to "
          "continue it (the steering keys work meanwhile).")


@dataclass
class LiveAgent:
    """An agent bound to the engine thread's event loop, with the script's turns when it plays one."""

    setup: RunSetup
    turns: list[str] = field(default_factory=list)
    sent: int = 0
    autoplay: bool = False

    @property
    def agent(self) -> Agent:
        return self.setup.agent

    @property
    def next_turn(self) -> str | None:
        return self.turns[self.sent] if self.sent < len(self.turns) else None

    def state(self, *, working: bool = False) -> LiveState:
        """``working``: a turn is under way, so the next scripted message does not wait in the box yet."""
        scripted = bool(self.turns)
        prefill = None if self.autoplay or working else self.next_turn
        if scripted and self.next_turn is None:
            reason = "The demo script is finished: ctrl+o opens another session."
        else:
            reason = "Message the agent ([PERSIST] pins it) · Enter sends"
        return LiveState(can_send=True, reason=reason, prefill=prefill, autoplay=self.autoplay,
                         turn=self.sent, turns=len(self.turns), working=working)

    async def start(self) -> None:
        await self.setup.__aenter__()  # MCP servers, if configured

    def begin_turn(self) -> None:
        if self.turns and self.sent < len(self.turns):
            self.sent += 1

    async def send(self, text: str) -> None:
        await self.agent.send(text)

    async def close(self) -> None:
        try:
            close = getattr(self.agent.provider, "aclose", None)
            if close is not None:
                await close()
        finally:
            await self.setup.__aexit__(None, None, None)


@dataclass
class Opened:
    """A session opened on the engine thread: its context, its store, its agent when it can go on."""

    ctx: SessionContext
    store: Store | None
    live: LiveAgent | None
    state: LiveState
    watch: LiveSession | None = None


def _unplayed(store: Store, title: str) -> str | None:
    for session, count in store.list_sessions():
        if count == 0 and session.source_format == "engine" and session.title == title:
            return session.id
    return None


def open_session(launch: Launch, approve: Approver, on_event: ev.EventSink, say: Say | None = None) -> Opened:
    """Blocking (SQLite, import, token counting): call it on the engine thread. The collector is paused meanwhile,
    as an import runs: a load keeps what it builds (no cycles to find), and one young collection of it held
    the interpreter for 40 ms of a 50,000-message open, the UI waiting. What it built is frozen before the
    collector runs again (else its first young collection walks all of it: the same 40 ms, just later).
    ``say``: where the played demo says what each step is (see :mod:`.demo_pace`)."""
    with paused():
        opened = _open(launch, approve, on_event)
        settle_loaded()
    if opened.live is not None and opened.live.turns and launch.pace is not None and say is not None:
        _pace(opened.live.agent, launch, launch.pace, say)
    if opened.live is not None and launch.wrap_provider is not None:
        agent = opened.live.agent
        agent.provider = launch.wrap_provider(agent.provider)
    return opened


def _pace(agent: Agent, launch: Launch, pace: DemoPace, say: Say) -> None:
    """The demo's scripted provider, paced and saying what each step is."""
    from workbench.engine.providers.scripted import ScriptedProvider  # loaded by the agent already

    if isinstance(agent.provider, ScriptedProvider):
        agent.provider = PacedScript(agent.provider, pace, say, step_pause=launch.step_pause,
                                     chunk_delay=launch.chunk_delay)


def _open(launch: Launch, approve: Approver, on_event: ev.EventSink) -> Opened:
    config = launch.config or Config()
    if launch.follow is not None:
        return _open_watch(Path(launch.follow).expanduser(), launch.fmt, config)
    if launch.loader is not None:
        ctx = launch.loader()
        return Opened(ctx, None, None, LiveState(reason="read-only: this session is not stored, so it cannot be steered"))
    if launch.db is None:
        raise ValueError("a Launch needs a database or a loader")
    checked, found = launch.db_checked, None
    if not checked and launch.db_check is not None:
        checked, found = True, launch.db_check()
    store = Store(launch.db, checked=checked, found=found)
    try:
        return _open_stored(launch, store, config, approve, on_event)
    except BaseException:
        store.close()
        raise


def _open_stored(launch: Launch, store: Store, config: Config, approve: Approver, on_event: ev.EventSink) -> Opened:
    if launch.script is not None:
        from workbench.engine.agent.runner import script_path  # deferred: see _continue_script
        from workbench.engine.providers.scripted import Script

        title = f"Scripted: {Script.load(script_path(launch.script)).name}"
        reuse = _unplayed(store, title) if launch.reuse_unplayed else None
        return _continue_script(launch, store, config, reuse, launch.script, approve, on_event)
    if launch.target is None and launch.proxy_url is not None:
        waiting = Session(id=WAITING, title=f"proxy on {launch.proxy_url}", source_format="proxy")
        return Opened(SessionContext(waiting, [], [], config=config), store, None,
                      LiveState(reason=f"waiting for an agent's first request: ANTHROPIC_BASE_URL={launch.proxy_url}",
                                label="proxy · waiting"))
    assert launch.target is not None
    session_id, _ = resolve_target(store, launch.target, launch.fmt)
    session = store.get_session(session_id)
    if session.source_format == "proxy":
        return _open_read_only(store, session, config, LiveState(reason=PROXIED, label="proxied"))
    if session.source_format != "engine":
        label = session.source_format.replace("-", " ")
        return _open_read_only(store, session, config, LiveState(reason=imported_reason(label), label="imported"))
    script = session.metadata.get(SCRIPT_KEY)
    if launch.provider_factory is None and isinstance(script, str):
        return _continue_script(launch, store, config, session.id, script, approve, on_event)
    if launch.provider_factory is None:
        return _open_read_only(store, session, config, LiveState(reason=NO_KEY, label="no API key"))
    from workbench.engine.agent.runner import prepare_run  # deferred: see _continue_script
    workspace = session.metadata.get("workspace")
    folder = Path(workspace) if isinstance(workspace, str) and Path(workspace).is_dir() else None
    setup = prepare_run(store, config, session_id=session_id, scripted=None, model=None, workspace=folder,
                        approve=approve, on_event=on_event, provider=launch.provider_factory())
    live = LiveAgent(setup)
    return Opened(setup.agent.ctx, store, live, live.state())


def _continue_script(
    launch: Launch, store: Store, config: Config, session_id: str | None, script: str, approve: Approver,
    on_event: ev.EventSink,
) -> Opened:
    """A scripted session: a new one, or one an earlier run of the script left, resumed where it stopped
    (its remaining user turns, and the responses not given yet).

    The agent's modules (its loop, tools, compaction) load here, not with the app: opening an imported or
    proxied session, which no agent continues, does not wait for them."""
    from workbench.engine.agent.runner import model_replies, played_turns, prepare_run
    from workbench.engine.providers.scripted import ScriptedProvider

    setup = prepare_run(store, config, session_id=session_id, scripted=script, model=None, workspace=None,
                        approve=approve, on_event=on_event, chunk_delay=launch.chunk_delay)
    assert setup.script is not None
    if session_id is not None:  # the responses the script already gave are not given again
        ctx = setup.agent.ctx
        setup.agent.provider = ScriptedProvider(setup.script, ctx.counter, launch.chunk_delay,
                                                skip=model_replies(ctx))
    turns = [turn.user for turn in setup.script.turns]
    live = LiveAgent(setup, turns, sent=played_turns(setup.agent.ctx, turns), autoplay=launch.autoplay)
    return Opened(setup.agent.ctx, store, live, live.state())


def _open_read_only(store: Store, session: Session, config: Config, state: LiveState) -> Opened:
    """A session nothing will append to here (a long one resumes from its stored view state, reading its
    messages as they are shown)."""
    return Opened(SessionContext.load(store, session.id, config), store, None, state)


def drain(watch: LiveSession) -> list[LiveUpdate]:
    """Read everything appended since the last look (blocking: file I/O and token counts).

    Raises :class:`ImportFailed` when the file is not a Claude Code or Codex transcript.
    """
    updates = [watch.poll()]
    while updates[-1].follow.more and len(updates) < DRAIN_POLLS:
        updates.append(watch.poll())
    return updates


def watch_context(watch: LiveSession) -> SessionContext:
    """The followed session so far; before its first complete line, an empty session named after the file."""
    if watch.ctx is not None:
        return watch.ctx
    path = watch.follower.path
    session = Session(id=f"watch:{path.name}", title=path.name, source_format=watch.follower.format_name or "jsonl",
                      source_path=str(path))
    return SessionContext(session, [], [], watch.counter, watch.config)


def _open_watch(path: Path, fmt: str | None, config: Config) -> Opened:
    if not path.is_file():
        raise WorkbenchError(f"{path}: no such file (watch follows a transcript that exists)")
    from workbench.engine.sources.watch import LiveSession  # deferred: only following a file needs it

    watch = LiveSession(path, fmt, config)
    drain(watch)
    return Opened(watch_context(watch), None, None, LiveState(reason=WATCHED, watching=path.name), watch)


def watch_notices(update: LiveUpdate, last: str | None, name: str) -> tuple[list[str], str | None]:
    """What a look at a followed file has to say, and the notice to remember: each notice once (a missing
    file is reported once, not every half second), skipped lines in one."""
    follow = update.follow
    said: list[str] = []
    for text in follow.notices:
        if follow.reset or text != last:
            said.append(text)
        last = text
    if not follow.notices and (follow.new or follow.changed):
        last = None
    if follow.skipped:
        first = follow.skipped[0]
        more = f" and {len(follow.skipped) - 1} more" if len(follow.skipped) > 1 else ""
        said.append(f"{name}: skipped unreadable line {first.line} ({first.reason}){more}")
    return said, last


def forget_unplayed(store: Store, session_id: str) -> None:
    """A scripted demo closed before its first message: its session holds nothing, so it goes (the next
    launch would otherwise find one more empty session)."""
    from workbench.engine.transcript.sessions import delete_session  # deferred: a demo's session alone needs it

    try:
        if store.message_count(session_id) == 0:
            delete_session(store, session_id)
    except (WorkbenchError, sqlite3.Error) as exc:  # only an empty session is left behind (and not listed)
        log.warning("could not remove the unplayed session %s: %s", session_id, exc)
