"""Another process steers the session the app shows: the app shows it within a second or so, and a key
pressed on what the app showed before is refused instead of acting on stale state."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import claude_fixture
from textual.message import Message
from tui_fixtures import (
    SIZE,
    isolated_dirs,  # noqa: F401 - autouse: HOME is an empty temporary folder
    settle,
    until,
)

from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.store import Store
from workbench.tui import messages as msg
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.widgets.message_list import MessageList

pytestmark = pytest.mark.anyio
SHOWN_WITHIN = 3.0
"""The app looks every half second; slack for a loaded test machine."""


def stored(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "w.db"
    with Store(db) as store:
        return db, import_file(store, claude_fixture("short")).session.id


def pin(db: Path, session_id: str, position: int) -> None:
    done = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "pin", session_id, str(position)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def pinned(app: WorkbenchApp, position: int) -> bool:
    snapshot = app.main_screen.screen_state
    return snapshot is not None and "PERSIST" in snapshot.rows.row(position - 1).badges


async def test_a_change_by_another_process_shows_within_a_second_or_so(tmp_path: Path) -> None:
    db, session_id = stored(tmp_path)
    app = WorkbenchApp(Launch.open(db, session_id))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert not pinned(app, 2)
        pin(db, session_id, 2)
        await until(pilot, lambda: pinned(app, 2), timeout=SHOWN_WITHIN)


async def test_a_key_pressed_on_stale_state_is_refused_and_the_session_shown_again(tmp_path: Path) -> None:
    db, session_id = stored(tmp_path)
    seen: list[Message] = []
    app = WorkbenchApp(replace(Launch.open(db, session_id), interval=3600.0))  # the app does not look by itself
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        pin(db, session_id, 3)
        assert not pinned(app, 3), "not seen yet"
        messages = app.main_screen.query_one(MessageList)
        messages.focus()
        messages.cursor = 3
        await pilot.press("p")
        await settle(pilot)
        failed = [m for m in seen if isinstance(m, msg.CommandFailed)]
        assert failed and "changed by another program" in failed[0].text
        assert pinned(app, 3) and not pinned(app, 4), "shown as it is now, and the key did nothing"
        with Store(db) as store:
            assert len([e for e in store.load_overlay(session_id) if e.action == "pin"]) == 1


async def test_a_key_still_acts_when_another_process_only_added_messages(tmp_path: Path) -> None:
    """An agent working through the proxy appends messages all the time: that is not stale steering."""
    from workbench.engine.transcript.models import Message, TextPart
    from workbench.engine.transcript.tokens import TokenCounter

    db, session_id = stored(tmp_path)
    seen: list[Message] = []
    app = WorkbenchApp(replace(Launch.open(db, session_id), interval=3600.0))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        with Store(db) as store:
            count = store.message_count(session_id)
            store.save_messages([Message(id="appended", session_id=session_id, index=count, role="user",
                                         parts=[TextPart(text="one more question")])], TokenCounter())
        messages = app.main_screen.query_one(MessageList)
        messages.focus()
        messages.cursor = 3
        await pilot.press("p")
        await settle(pilot)
        assert not [m for m in seen if isinstance(m, msg.CommandFailed)]
        assert pinned(app, 4)
        snapshot = app.main_screen.screen_state
        assert snapshot is not None and len(snapshot.messages) == count + 1, "and the new message is shown"
