"""The watch view: the app follows a real transcript while lines are appended to it, and the session
picker lists (and opens, or follows) the sessions other agents left on this machine.

The lines come from a real Claude Code fixture, written in chunks while the app runs under Pilot;
what the view shows is compared with what the engine reads from the same bytes on its own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import UNSUPPORTED_FIXTURES, claude_fixture, fixture_path
from textual.message import Message
from tui_fixtures import (
    SIZE,
    flat,
    isolated_dirs,  # noqa: F401 - autouse: HOME is an empty temporary folder
    plant,
    record_toasts,
    settle,
    text_of,
    until,
)

from workbench.engine.context.budget import Budget
from workbench.engine.sources.watch import LiveSession
from workbench.tui import messages as msg
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.sessions import SessionPicker
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.message_list import MessageList

pytestmark = pytest.mark.anyio
FOLLOW_WAIT = 15.0
"""Seconds a test waits for new lines to show: a bound on a hang on a loaded machine, not a speed."""


def real_lines(key: str = "session-196820da") -> list[bytes]:
    return claude_fixture(key).read_bytes().splitlines(keepends=True)


def expected(tmp_path: Path, data: bytes) -> tuple[int, Budget]:
    """Messages and budget the engine reads from ``data`` on its own (a separate file, a fresh reader)."""
    path = tmp_path / f"expected-{len(data)}.jsonl"
    path.write_bytes(data)
    live = LiveSession(path)
    update = live.poll()
    assert update.budget is not None and not update.follow.more
    return len(live.follower.messages), update.budget


def _count(path: Path) -> int:
    live = LiveSession(path)
    live.poll()
    return len(live.follower.messages)


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


def shown(app: WorkbenchApp) -> int:
    snapshot = app.main_screen.screen_state
    return len(snapshot.messages) if snapshot is not None else -1


def notices(seen: list[Message]) -> list[msg.Notice]:
    return [m for m in seen if isinstance(m, msg.Notice)]


async def follows(pilot: object, app: WorkbenchApp, count: int) -> None:
    """Wait until the view shows ``count`` messages."""
    await until(pilot, lambda: shown(app) == count, timeout=FOLLOW_WAIT)  # type: ignore[arg-type]


async def test_watch_view_follows_appended_chunks_and_a_truncation(tmp_path: Path) -> None:
    lines = real_lines()
    path = tmp_path / "live.jsonl"
    first, second, third = 60, 140, len(lines)
    path.write_bytes(b"".join(lines[:first]))
    seen: list[Message] = []
    app = WorkbenchApp(Launch.watch(path))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        count, budget = expected(tmp_path, b"".join(lines[:first]))
        assert shown(app) == count > 0
        assert app.main_screen.query_one(MessageList).row_count == count
        info = flat(text_of(app.main_screen.query_one(InfoBar)))
        assert "following live.jsonl" in info and "watching" in info and "read-only" in info
        assert f"{budget.used:,}" in flat(text_of(app.main_screen.query_one(BudgetPanel)))

        # A chunk that ends in a half-written line: everything before it shows, the half line waits.
        half = lines[second][: len(lines[second]) // 2]
        append(path, b"".join(lines[first:second]) + half)
        count, budget = expected(tmp_path, b"".join(lines[:second]))
        await follows(pilot, app, count)
        assert app.main_screen.query_one(MessageList).row_count == count
        await until(pilot, lambda: f"{budget.used:,}" in flat(text_of(app.main_screen.query_one(BudgetPanel))))
        await pilot.pause(2.5 * app.launch.interval)  # several looks at the file with the half line still there
        assert shown(app) == count
        assert not [n for n in notices(seen) if "skipped" in n.text or n.severity == "error"], notices(seen)

        # The rest of the line, and the rest of the file.
        append(path, lines[second][len(half):] + b"".join(lines[second + 1:third]))
        count, budget = expected(tmp_path, b"".join(lines))
        await follows(pilot, app, count)
        messages = app.main_screen.query_one(MessageList)
        assert messages.row_count == count and messages.at_end, "the list follows the end"
        await until(pilot, lambda: f"{budget.used:,}" in flat(text_of(app.main_screen.query_one(BudgetPanel))))

        # Truncated (same file, fewer bytes): a notice, and the view starts again from what is left.
        before = len(notices(seen))
        path.write_bytes(b"".join(lines[:first]))
        count, _ = expected(tmp_path, b"".join(lines[:first]))
        await follows(pilot, app, count)
        await until(pilot, lambda: any("truncated" in n.text for n in notices(seen)[before:]))
        assert app.main_screen.query_one(MessageList).row_count == count

        # Steering is off, and says why.
        seen.clear()
        await pilot.press("p")
        await settle(pilot)
        failed = [m for m in seen if isinstance(m, msg.CommandFailed)]
        assert failed and "being followed, not stored" in failed[0].text


async def test_watching_a_missing_file_says_so_once(tmp_path: Path) -> None:
    lines = real_lines("short")
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(lines))
    seen: list[Message] = []
    app = WorkbenchApp(Launch.watch(path))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        count = shown(app)
        path.unlink()
        await until(pilot, lambda: any("does not exist" in n.text for n in notices(seen)))
        await pilot.pause(3 * app.launch.interval)
        assert sum("does not exist" in n.text for n in notices(seen)) == 1, "said once, not every half second"
        assert shown(app) == count, "what was read stays on screen"
        path.write_bytes(b"".join(lines))
        await until(pilot, lambda: any("replaced" in n.text for n in notices(seen)), timeout=FOLLOW_WAIT)


async def test_an_empty_file_fills_as_lines_arrive(tmp_path: Path) -> None:
    lines = real_lines("short")
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"")
    app = WorkbenchApp(Launch.watch(path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert shown(app) == 0 and app.main_screen.has_class("-loaded")
        append(path, b"".join(lines))
        count, _ = expected(tmp_path, b"".join(lines))
        await follows(pilot, app, count)
        snapshot = app.main_screen.screen_state
        assert snapshot is not None and snapshot.session.source_format == "claude-code"


async def test_a_file_that_cannot_be_followed_is_a_clear_error(tmp_path: Path) -> None:
    export = fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"])
    app = WorkbenchApp(Launch.watch(export))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        status = flat(text_of(app.screen.query_one("#status-text")))
        assert "only JSONL transcripts" in status and "Traceback" not in status
        assert app.host.watching is None


async def test_opening_another_session_stops_following(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(real_lines("short")))
    app = WorkbenchApp(Launch.watch(path, db=tmp_path / "t.db"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.host.watching is not None
        app.open_session(str(claude_fixture("short")))
        await settle(pilot)
        assert app.host.watching is None
        assert app.main_screen.query_one(InfoBar).following == ""


# --- the session picker: other agents' sessions on this machine ---------------------------------------


async def picker(pilot: object, app: WorkbenchApp) -> SessionPicker:
    await pilot.press("ctrl+o")  # type: ignore[attr-defined]
    await until(pilot, lambda: isinstance(app.screen, SessionPicker) and app.screen.discovered is not None)  # type: ignore[arg-type]
    screen = app.screen
    assert isinstance(screen, SessionPicker)
    return screen


def row_of(screen: SessionPicker, path: Path) -> int:
    return next(i for i, entry in enumerate(screen.entries) if getattr(entry, "path", None) == str(path))


async def test_picker_lists_and_opens_a_discovered_session(tmp_path: Path) -> None:
    found = plant(Path(os.environ["HOME"]), tmp_path)
    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(claude_fixture("subagent"))))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await picker(pilot, app)
        painted = flat(text_of(screen.query_one("#sessions-table")))
        assert "On this machine" in painted and "claude-code" in painted and "2026-03-14 09:30" in painted
        assert "claude-code · ~/.claude/projects/-home-use" in painted  # the agent's folder, and the file's name
        assert "55604662-cf2a-4331-851a-ec234028f8ca.jsonl" in painted
        assert str(tmp_path) not in painted
        assert "w watches" in str(screen.query_one("#sessions-box").border_subtitle)
        screen.query_one("#sessions-table").move_cursor(row=row_of(screen, found))  # type: ignore[attr-defined]
        await pilot.press("enter")
        await settle(pilot)
        snapshot = app.main_screen.screen_state
        assert snapshot is not None and snapshot.session.source_path == str(found)
        assert app.host.store is not None and app.host.watching is None, "imported and stored: steerable"
        assert shown(app) == _count(found)


async def test_picker_watches_a_discovered_session(tmp_path: Path) -> None:
    found = plant(Path(os.environ["HOME"]), tmp_path)
    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(claude_fixture("subagent"))))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await picker(pilot, app)
        screen.query_one("#sessions-table").move_cursor(row=0)  # type: ignore[attr-defined]
        await pilot.press("w")  # a stored session cannot be followed: the picker says so and stays
        assert isinstance(app.screen, SessionPicker)
        screen.query_one("#sessions-table").move_cursor(row=row_of(screen, found))  # type: ignore[attr-defined]
        await pilot.press("w")
        await settle(pilot)
        assert app.host.watching is not None and app.host.store is None
        assert "following 55604662" in flat(text_of(app.main_screen.query_one(InfoBar)))
        count = shown(app)
        append(found, b"".join(real_lines("subagent")[:6]))
        await until(pilot, lambda: shown(app) > count, timeout=FOLLOW_WAIT)

        # ctrl+o still lists the stored sessions while a followed one is open.
        screen = await picker(pilot, app)
        assert screen.sessions, "the stored sessions are listed"


async def test_picker_says_how_to_export_an_opencode_database_session(tmp_path: Path) -> None:
    """Sessions in OpenCode's database cannot be read directly: Enter shows the export command instead."""
    import sqlite3

    folder = Path(os.environ["HOME"]) / ".local" / "share" / "opencode"
    folder.mkdir(parents=True)
    with sqlite3.connect(folder / "opencode.db") as conn:  # the columns discovery reads from OpenCode's own table
        conn.execute("CREATE TABLE session (id TEXT, title TEXT, time_updated INTEGER)")
        conn.execute("INSERT INTO session VALUES ('ses_1', 'Refactor the parser', 1773480600000)")
    conn.close()
    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(claude_fixture("short"))))
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await picker(pilot, app)
        row = next(i for i, entry in enumerate(screen.entries) if getattr(entry, "format", None) == "opencode")
        assert "export first" in flat(text_of(screen.query_one("#sessions-table")))
        screen.query_one("#sessions-table").move_cursor(row=row)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, SessionPicker), "nothing to open: the picker stays"
        toasts = list(said)
        assert len([t for t in toasts if "must be exported first: opencode export ses_1" in t]) == 2
