"""Fixtures and helpers for the TUI tests: sessions in a temporary database, never the user's data dir.

Live sessions play a small script written here (``tui_script``) in a copied
workspace; a :class:`GatedProvider` holds the model's stream at a chosen chunk
so a test can look at the screen mid-stream; ``frozen`` pins clocks and ids so
snapshots do not change from run to run.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import re
import shutil
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES_DIR, claude_fixture
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input, TextArea

from workbench.cli import demo_path
from workbench.engine.context.session import SessionContext
from workbench.engine.providers.base import ModelRequest, Provider, StreamDelta, StreamItem
from workbench.engine.providers.scripted import Script, ScriptedProvider, ScriptTurn
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import Message, Session, TextPart
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch

COMPACTED_FIXTURE = FIXTURES_DIR / "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"
BIG_SESSION_SIZE = 100_000
SIZE = (140, 45)

Loader = Callable[[], SessionContext]

# --- helpers ------------------------------------------------------------------------


def text_of(widget: Widget) -> str:
    """What a widget paints, as plain text (one line per row)."""
    strips = widget.render_lines(Region(0, 0, *widget.outer_size))
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


def flat(text: str) -> str:
    """Painted text with borders dropped and wrapping undone, for phrase checks."""
    return " ".join(text.translate(str.maketrans("│╭╮╰╯─", "      ")).split())


def record_toasts(app: WorkbenchApp) -> list[str]:
    """A list that fills with the message of every toast ``app`` shows from now on: its public ``notify``
    wrapped (a screen's ``notify`` goes through the app's), so no test reads Textual's private store."""
    said: list[str] = []
    notify = app.notify

    def recording(message: str, *args: Any, **kwargs: Any) -> None:
        said.append(message)
        notify(message, *args, **kwargs)

    app.notify = recording  # type: ignore[method-assign]
    return said


async def settle(pilot: Pilot[None]) -> None:
    """Wait until the engine thread has finished every command and the UI has handled its messages."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    # The main screen asks for its session as it mounts: on a loaded machine the test can get here first.
    await until(pilot, lambda: bool(app.screen_stack) and app.main_screen.is_mounted)
    await app.settled(timeout=180)  # a played demo on a loaded machine
    await pilot.pause()
    filtering = [worker for worker in app.workers if worker.group == "filter"]
    if filtering:  # (an empty list would mean every worker, the engine's too)
        await app.workers.wait_for_complete(filtering)
    await pilot.pause()
    await pilot.pause()


async def until(pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Pause until ``condition()`` holds (the engine thread posts at its own pace)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {condition}")
        await pilot.pause(0.02)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()


def footer_labels(painted: str) -> list[str]:
    """A painted footer's labels ("? Help"): separated by two spaces or more, or the palette's rule."""
    return [label for label in re.split(r"\s*▏\s*|\s{2,}", painted.strip()) if label]


def footer_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Filled, from now on, with the keys each read of the bindings by a :class:`KeyFooter` found."""
    from workbench.tui.widgets import key_footer

    reads: list[tuple[str, ...]] = []
    read_keys = key_footer.read_keys

    def counted(*args: Any, **kwargs: Any) -> tuple[key_footer.FooterEntry, ...]:
        entries = read_keys(*args, **kwargs)
        reads.append(tuple(entry.key for entry in entries))
        return entries

    monkeypatch.setattr(key_footer, "read_keys", counted)
    return reads


def no_blink(app: WorkbenchApp) -> None:
    """Cursors that blink make snapshots flaky: stop them on every screen."""
    for screen in app.screen_stack:
        for widget in screen.query("Input, TextArea"):
            assert isinstance(widget, Input | TextArea)
            widget.cursor_blink = False


async def steady(pilot: Pilot[None]) -> None:
    """Pause until two pictures in a row are the same, cursors kept still: on a loaded machine a pane's late
    mount or focus lands after :func:`settle`, and a snapshot must not catch it half way."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    last = None
    for _ in range(50):
        no_blink(app)
        await pilot.pause(0.1)
        picture = app.export_screenshot()
        if picture == last:
            return
        last = picture


async def ready(pilot: Pilot[None]) -> None:
    """Loaded, settled, no blinking cursor."""
    await settle(pilot)
    assert isinstance(pilot.app, WorkbenchApp)
    no_blink(pilot.app)
    await pilot.pause()


def stored(app: WorkbenchApp) -> SessionContext:
    """The app's session as a fresh load from its database sees it (what the engine really wrote)."""
    snapshot = app.main_screen.screen_state
    assert snapshot is not None and app.launch.db is not None
    with Store(app.launch.db) as store:
        return SessionContext.load(store, snapshot.session.id)


# --- engine isolation -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the data dir, config and home at the test's temporary directory; no API key.

    An empty home means the session picker finds no other agents' sessions unless a test puts some there.
    """
    data = tmp_path / "data"
    home = tmp_path / "isolated-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for variable in ("CODEX_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(data))
    monkeypatch.setenv("WORKBENCH_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    yield data


FROZEN_NOW = datetime(2026, 3, 14, 9, 30, 0, tzinfo=UTC)


class FrozenDatetime(datetime):
    """``datetime`` whose ``now`` is always :data:`FROZEN_NOW`."""

    @classmethod
    def now(cls, tz: Any = None) -> FrozenDatetime:  # type: ignore[override]
        return cls.fromtimestamp(FROZEN_NOW.timestamp(), tz or UTC)


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed clocks and counted ids in the engine, so ids and times on screen are the same every run."""
    import workbench.engine.agent.loop as agent
    from workbench.engine.plans import compaction, measure
    from workbench.engine.transcript import store_rows
    from workbench.engine.transcript.importers import claude_code, codex, opencode

    for module in (agent, compaction, store_rows, measure):
        monkeypatch.setattr(module, "datetime", FrozenDatetime)
    counter = itertools.count(1)
    lock = threading.Lock()

    def counted() -> uuid.UUID:
        with lock:
            n = next(counter)
        return uuid.UUID(bytes=hashlib.md5(f"uuid-{n}".encode()).digest())  # distinct prefixes, same every run

    monkeypatch.setattr(uuid, "uuid4", counted)

    def by_name(format_name: str, path: Path) -> str:
        """An imported file's identity from its name alone: the checkout's path must not show on screen."""
        return hashlib.blake2b(f"{format_name}:{Path(path).name}".encode(), digest_size=8).hexdigest()

    for module in (claude_code, codex, opencode):
        monkeypatch.setattr(module, "source_digest", by_name)


# --- other agents' sessions on this machine ----------------------------------------------


def plant(home: Path, tmp_path: Path, key: str = "short") -> Path:
    """A real Claude Code transcript where Claude Code keeps them (under ``home``), with a fixed date."""
    assert home.is_relative_to(tmp_path), "never write into the real home folder"
    folder = home / ".claude" / "projects" / "-home-user-spotter"
    folder.mkdir(parents=True)
    path = folder / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    shutil.copyfile(claude_fixture(key), path)
    moment = 1_773_480_600  # 2026-03-14 09:30 UTC
    os.utime(path, (moment, moment))
    return path


# --- stored sessions --------------------------------------------------------------------


def import_and_load(db: Path, path: Path) -> SessionContext:
    with Store(db) as store:
        parsed = import_file(store, path)
        return SessionContext.load(store, parsed.session.id)


def file_loader(db: Path, path: Path) -> Loader:
    """A loader like the old CLI's: import into ``db``, then load (a context that is not stored)."""
    return lambda: import_and_load(db, path)


@pytest.fixture
def demo_launch(tmp_path: Path) -> Launch:
    """The bundled recorded transcript, imported into a temporary database (steerable)."""
    return Launch.open(tmp_path / "t.db", str(demo_path()))


@pytest.fixture
def demo_loader(tmp_path: Path) -> Loader:
    return file_loader(tmp_path / "loader.db", demo_path())


@pytest.fixture
def demo_context(tmp_path: Path) -> SessionContext:
    """The demo as the app will see it, loaded here for the assertions."""
    return import_and_load(tmp_path / "expected.db", demo_path())


@pytest.fixture
def compacted_launch(tmp_path: Path) -> Launch:
    return Launch.open(tmp_path / "t.db", str(COMPACTED_FIXTURE))


@pytest.fixture
def empty_loader() -> Loader:
    session = Session(id="empty-session", title="An empty session", source_format="engine")
    return lambda: SessionContext(session, [], events=[])


def synthetic_context(count: int) -> SessionContext:
    """``count`` short alternating user/assistant messages, built directly (no database)."""
    session = Session(id="synthetic", title=f"Synthetic session, {count:,} messages", model="claude-sonnet-4-5")
    messages = [
        Message(
            id=f"m{i}",
            session_id=session.id,
            index=i,
            role="user" if i % 2 == 0 else "assistant",
            parts=[TextPart(text=f"message {i + 1}: the quick brown fox jumps over the lazy dog")],
        )
        for i in range(count)
    ]
    return SessionContext(session, messages, events=[])


@pytest.fixture(scope="module")
def big_context() -> SessionContext:
    """100,000 messages; built once per module because the engine needs a few seconds for it."""
    return synthetic_context(BIG_SESSION_SIZE)


# --- live sessions ------------------------------------------------------------------------

NOTES = "# Notes\n\nThe greeting must end with an exclamation mark.\n\n" + "".join(
    f"- rule {n}: keep the output of app.py on one line, in plain ASCII, no trailing spaces.\n" for n in range(1, 41)
)
RULES = "# Rules\n\n" + "".join(
    f"- {n}. every change to app.py is reviewed; the reviewer reads the notes again first.\n" for n in range(1, 41)
)
TUI_SCRIPT: dict[str, Any] = {
    "name": "tui-test",
    "model": "scripted-demo",
    "context_window": 8000,
    "workspace": "ws",
    "turns": [
        {"user": "[PERSIST] Read notes.md and fix the greeting in app.py.", "responses": [
            [{"thinking": "The notes should say what the greeting has to look like."},
             {"text": "Reading the notes first, so the fix follows what they ask for."},
             {"tool": "read_file", "input": {"path": "notes.md"}}],
            [{"text": "The notes want an exclamation mark at the end. Editing app.py."},
             {"tool": "edit_file", "input": {"path": "app.py", "old": "Hello, world.", "new": "Hello, world!"}}],
            [{"text": "Done: app.py now prints Hello, world! as the notes ask."}],
        ]},
        {"user": "Check the change against the rules, please.", "responses": [
            [{"text": "Reading the rules."}, {"tool": "read_file", "input": {"path": "rules.md"}}],
            [{"text": "The rules ask for the notes again."}, {"tool": "read_file", "input": {"path": "notes.md"}}],
            [{"tool": "read_file", "input": {"path": "app.py"}}],
            [{"text": "The change follows the rules: app.py prints one plain line ending in an exclamation mark."}],
        ]},
    ],
}


@pytest.fixture
def tui_script(tmp_path: Path) -> Path:
    folder = tmp_path / "script"
    (folder / "ws").mkdir(parents=True)
    (folder / "ws" / "notes.md").write_text(NOTES, encoding="utf-8")
    (folder / "ws" / "rules.md").write_text(RULES, encoding="utf-8")
    (folder / "ws" / "app.py").write_text('print("Hello, world.")\n', encoding="utf-8")
    path = folder / "tui-test.json"
    path.write_text(json.dumps(TUI_SCRIPT), encoding="utf-8")
    return path


@pytest.fixture
def script_launch(tmp_path: Path, tui_script: Path) -> Launch:
    """The test script, sent by hand (each message waits in the input box), tools approved in a modal."""
    return Launch(db=tmp_path / "live.db", script=str(tui_script), approval="ask")


def autoplay(launch: Launch, approval: str = "approve") -> Launch:
    return replace(launch, autoplay=True, approval=approval)  # type: ignore[arg-type]


class GatedProvider:
    """Passes another provider's stream through, holding it after ``after`` text chunks until released."""

    def __init__(self, inner: Provider, after: int, calls: int = 1) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "gated")
        self.after = after
        self.gated_call = calls
        self.calls = 0
        self.reached = threading.Event()
        self.release = threading.Event()

    async def count_tokens(self, request: ModelRequest) -> int | None:
        return await self.inner.count_tokens(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        chunks = 0
        async for item in self.inner.stream(request):
            yield item
            if isinstance(item, StreamDelta) and self.calls == self.gated_call:
                chunks += 1
                if chunks == self.after:
                    self.reached.set()
                    while not self.release.is_set():  # a poll, so that shutting down can cancel it
                        await asyncio.sleep(0.01)


SUMMARY_TEXT = ("## Summary\n\nThe user asked for a fix of the greeting in app.py. The notes require an "
                "exclamation mark; the agent read them, edited app.py and confirmed the new output.")


def summary_provider(gate: GatedProvider | None = None) -> Callable[[Session], Provider]:
    """A stand-in for the model as summariser: it streams :data:`SUMMARY_TEXT` (through ``gate``, if given)."""

    def make(session: Session) -> Provider:
        script = Script(name="summary", turns=[ScriptTurn(user="", responses=[[{"text": SUMMARY_TEXT}]])])
        inner = ScriptedProvider(script)
        if gate is None:
            return inner
        gate.inner = inner
        return gate  # type: ignore[return-value]

    return make
