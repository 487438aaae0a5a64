"""What the app opens, and how: a transcript or stored session, a scripted demo, or a ready context.

A :class:`Launch` is plain data made by the command line (``workbench``,
``workbench demo``, ``workbench open``, ``workbench watch``), the tests and the screenshot script;
the engine thread turns it into a session with :func:`workbench.tui.live.open_session`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.transcript import credentials
from workbench.tui.demo_pace import DemoPace
from workbench.tui.pacing import DEMO_CHUNK_DELAY, DEMO_STEP_PAUSE, DEMO_TURN_PAUSE, WATCH_INTERVAL, demo_speed

if TYPE_CHECKING:  # the providers' module loads with the first model call
    from workbench.engine.providers.base import Provider
    from workbench.engine.transcript.models import Session

__all__ = ["DEMO_CHUNK_DELAY", "WATCH_INTERVAL", "Launch"]

Approval = Literal["ask", "approve", "countdown"]
ProviderFactory = Callable[[], "Provider"]
DEMO_SCRIPT = "demo"
DEMO_APPROVAL_COUNTDOWN = 1.0


def anthropic_factory(config: Config | None = None) -> ProviderFactory | None:
    """The Anthropic provider (with the config's timeout and retries) when ``ANTHROPIC_API_KEY`` is set."""
    if not credentials.get("ANTHROPIC_API_KEY"):  # (taken out of os.environ once a client holds it)
        return None
    settings = (config or Config()).provider

    def make() -> Provider:
        from workbench.engine.providers.anthropic import AnthropicProvider  # the SDK loads only when used

        return AnthropicProvider.from_config(settings)

    return make


SummaryFactory = Callable[["Session"], "Provider"]
"""Makes the model that summarises a session in the compaction pane."""


def summariser_factory(config: Config | None = None) -> SummaryFactory | None:
    """The Anthropic summariser (``AnthropicProvider.summariser_for``: a proxied session's through its agent's
    upstream) when ``ANTHROPIC_API_KEY`` is set in the workbench's own environment."""
    if not credentials.get("ANTHROPIC_API_KEY"):
        return None
    settings = (config or Config()).provider

    def make(session: Session) -> Provider:
        from workbench.engine.providers.anthropic import AnthropicProvider  # the SDK loads only when used

        return AnthropicProvider.summariser_for(settings, session)

    return make


@dataclass(frozen=True)
class Launch:
    """What the app opens and how: a database and a session or transcript, a followed file, a demo."""

    db: Path | None = None
    """The database; None only with ``loader`` (a context that is not stored: steering is off)."""
    target: str | None = None
    """A transcript file (imported first) or a stored session id."""
    follow: str | None = None
    """A Claude Code or Codex transcript to follow while another agent writes it (read, not stored)."""
    interval: float = WATCH_INTERVAL
    """With ``follow``: seconds between looks at the file."""
    fmt: str | None = None
    script: str | None = None
    """A scripted session to play: a fresh engine session with the script's workspace."""
    autoplay: bool = False
    """Send the script's user messages by themselves; otherwise the next one waits in the input box."""
    reuse_unplayed: bool = False
    """With ``script``: open a stored session of that script that has no message yet, if there is one."""
    loader: Callable[[], SessionContext] | None = None
    config: Config | None = None
    chunk_delay: float = 0.0
    turn_pause: float = 0.0
    step_pause: float = 0.0
    """With ``pace``: seconds before each scripted model call (the demo's step, said on screen meanwhile)."""
    pace: DemoPace | None = None
    """The played demo's speed (the faster key changes it), and its steps said on screen; None otherwise."""
    approval: Approval = "ask"
    countdown: float = DEMO_APPROVAL_COUNTDOWN
    provider_factory: ProviderFactory | None = None
    """Continues an engine session (default: Anthropic when ``ANTHROPIC_API_KEY`` is set)."""
    summary_provider: SummaryFactory | None = None
    """For the llm summariser in the compaction pane (default: Anthropic when the key is set)."""
    wrap_provider: Callable[[Provider], Provider] | None = None
    """Wraps the agent's provider, whichever it is (tests hold a stream at a chosen point with it)."""
    proxy_url: str | None = None
    """A proxy serves on this URL (``workbench proxy``): its sessions are followed as it writes them, and
    without ``target`` the app waits for the first new one."""
    policy: str | None = None
    """With ``proxy_url``: the policy that proxy runs (``workbench proxy --policy``), said on its sessions."""
    db_checked: bool = False
    """The command line found ``db`` healthy just before the app started: the app does not check it again."""
    db_check: Callable[[], str | None] | None = None
    """A check of ``db``'s health under way (the app starts one as it starts): the open waits for its verdict,
    what it found damaged or None, instead of checking again."""

    def checking(self) -> Launch:
        """This launch with a check of its database's health started, on a thread of its own, when the open
        would check it: the check (reading the whole file) then goes on while the app draws its first screen."""
        if self.db is None or self.db_checked or self.db_check is not None or not self.db.is_file():
            return self
        from workbench.engine.transcript import db_health  # deferred: only an app that opens a database checks it

        return replace(self, db_check=db_health.check_in_background(self.db))

    @classmethod
    def demo(cls, db: Path, config: Config | None = None, *, autoplay: bool = True) -> Launch:
        """``workbench demo``: autoplay, each tool call approved after a countdown; with ``autoplay`` False
        (``--no-autoplay``) each scripted message waits in the input box."""
        return cls(
            db=db, script=DEMO_SCRIPT, autoplay=autoplay, reuse_unplayed=not autoplay, config=config,
            chunk_delay=DEMO_CHUNK_DELAY, turn_pause=DEMO_TURN_PAUSE if autoplay else 0.0,
            step_pause=DEMO_STEP_PAUSE if autoplay else 0.0, pace=DemoPace(demo_speed()),
            approval="countdown" if autoplay else "ask",
            provider_factory=anthropic_factory(config), summary_provider=summariser_factory(config),
        )

    @classmethod
    def welcome(cls, db: Path, config: Config | None = None) -> Launch:
        """The bare ``workbench`` on a database with nothing to show yet: the demo plays by itself, its tool
        calls approved (they run in a temporary copy of the demo's project), in the session an earlier launch
        left unplayed if there is one, so that launching again never piles up empty sessions."""
        return replace(cls.demo(db, config, autoplay=True), approval="approve", reuse_unplayed=True)

    @classmethod
    def open(cls, db: Path, target: str, fmt: str | None = None, config: Config | None = None, *,
             db_checked: bool = False) -> Launch:
        return cls(db=db, target=target, fmt=fmt, config=config, provider_factory=anthropic_factory(config),
                   summary_provider=summariser_factory(config), db_checked=db_checked)

    @classmethod
    def watch(cls, path: str | Path, fmt: str | None = None, config: Config | None = None, *,
              db: Path | None = None, interval: float = WATCH_INTERVAL) -> Launch:
        """``workbench watch PATH``: ``db`` only serves the session picker (the followed file is not stored)."""
        return cls(db=db, follow=str(path), fmt=fmt, config=config, interval=interval,
                   summary_provider=summariser_factory(config))

    @classmethod
    def proxy(cls, db: Path, url: str, config: Config | None = None, policy: str | None = None) -> Launch:
        """``workbench proxy`` on a terminal: the sessions its agents send, as they arrive."""
        return cls(db=db, config=config, proxy_url=url, summary_provider=summariser_factory(config), policy=policy)

    @classmethod
    def from_loader(cls, loader: Callable[[], SessionContext]) -> Launch:
        return cls(loader=loader)

    def reopen(self, session_id: str, *, healthy: bool = False) -> Launch:
        """The same settings, on another stored session (the session picker, a sub-agent). ``healthy``: the
        database the app has open was found healthy, so this open does not read the whole file to check it
        again (up to a second on a big one, at every change of session)."""
        return Launch(db=self.db, target=session_id, config=self.config, chunk_delay=self.chunk_delay,
                      approval="ask" if self.approval == "countdown" else self.approval, countdown=self.countdown,
                      provider_factory=self.provider_factory, summary_provider=self.summary_provider,
                      wrap_provider=self.wrap_provider, proxy_url=self.proxy_url, policy=self.policy,
                      db_checked=healthy)

    def watching(self, path: str, fmt: str | None = None) -> Launch:
        """The same database and settings, following ``path`` (the session picker's watch key)."""
        return Launch.watch(path, fmt, self.config, db=self.db, interval=self.interval)
