"""A long session opened before shows its stored picture while it loads; then the session takes its place.

The load is held at a gate (the real load, started late) so each test can look at the screen while
the picture is up: it must show what the loaded session shows, keys pressed meanwhile must take
effect once the session has loaded, and a picture that no longer describes the session is never shown.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message as TextualMessage
from textual.pilot import Pilot
from tui_fixtures import (  # noqa: F401  (fixtures are found by name)
    SIZE,
    HeldLoad,
    flat,
    held,
    isolated_dirs,
    picture_up,
    settle,
    stored,
    text_of,
    until,
)

from workbench.cli import demo_path
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.pictures import load_picture, session_revision
from workbench.engine.transcript.store import Store
from workbench.tui import messages as msg
from workbench.tui import picture as pictures
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.picture import PictureRows, picture_key
from workbench.tui.screen_state import ScreenState
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.rows import MessageRows


@pytest.fixture
def demo_id(tmp_path: Path) -> str:
    with Store(tmp_path / "t.db") as store:
        return import_file(store, demo_path()).session.id


def launch(tmp_path: Path, session_id: str) -> Launch:
    """The stored demo by id (as the session picker opens it), with a picture however short it is."""
    return Launch(db=tmp_path / "t.db", target=session_id, picture_min=0)


def workbench(pilot: Pilot[None]) -> WorkbenchApp:
    assert isinstance(pilot.app, WorkbenchApp)
    return pilot.app


def detail_text(app: WorkbenchApp) -> str:
    return text_of(app.main_screen.query_one(MessageDetail).query_one("#detail-body"))


def rows_id(app: WorkbenchApp, index: int) -> str:
    rows = app.main_screen.query_one(MessageList).rows
    assert rows is not None
    return rows.message_id(index)


async def first_open(tmp_path: Path, session_id: str, held: HeldLoad | None = None) -> None:
    """Open the session once (``held``: with its gate open for that), so that it has a picture."""
    if held is not None:
        held.release.set()
    app = WorkbenchApp(launch(tmp_path, session_id))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
    if held is not None:
        held.release.clear()


@asynccontextmanager
async def reopened(tmp_path: Path, session_id: str, held: HeldLoad, **run: Any) -> AsyncIterator[Pilot[None]]:
    """The session opened a second time, its load held: the picture is up, with the detail pane."""
    await first_open(tmp_path, session_id, held)
    app = WorkbenchApp(launch(tmp_path, session_id))
    async with app.run_test(size=SIZE, **run) as pilot:
        await picture_up(pilot)
        yield pilot


def current_picture(tmp_path: Path, session_id: str) -> pictures.Picture | None:
    with Store(tmp_path / "t.db") as store:
        return pictures.load(store, store.get_session(session_id), Config())


@pytest.mark.anyio
async def test_the_first_open_stores_a_picture_of_what_it_shows(tmp_path: Path, demo_id: str) -> None:
    assert current_picture(tmp_path, demo_id) is None
    app = WorkbenchApp(launch(tmp_path, demo_id))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        snapshot = app.main_screen.screen_state
        assert snapshot is not None
    picture = current_picture(tmp_path, demo_id)
    assert picture is not None and picture.matches(snapshot)


@pytest.mark.anyio
async def test_a_short_session_gets_no_picture(tmp_path: Path, demo_id: str) -> None:
    app = WorkbenchApp(Launch(db=tmp_path / "t.db", target=demo_id))  # the default: long sessions only
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
    assert current_picture(tmp_path, demo_id) is None


@pytest.mark.anyio
async def test_the_next_open_draws_the_picture_then_the_loaded_session_the_same(
    tmp_path: Path, demo_id: str, held: HeldLoad
) -> None:
    seen: list[TextualMessage] = []
    async with reopened(tmp_path, demo_id, held, message_hook=seen.append) as pilot:
        app = workbench(pilot)
        main = app.main_screen
        assert main.has_class("-loaded") and main.has_class("-picture") and main.screen_state is None
        assert isinstance(main.query_one(MessageList).rows, PictureRows)
        await pilot.press("down", "down", "down")
        await until(pilot, lambda: main.query_one(MessageDetail).border_title == "Message #4")
        shown = {"list": text_of(main.query_one(MessageList)), "budget": text_of(main.query_one(BudgetPanel)),
                 "detail": detail_text(app)}
        assert "loading" in shown["list"] and main.query_one(MessageDetail).border_title == "Message #4"
        assert rows_id(app, 3) in shown["detail"] and "in context" in shown["detail"]

        held.release.set()
        await settle(pilot)
        assert main.screen_state is not None and main.picture is None and not main.has_class("-picture")
        assert isinstance(main.query_one(MessageList).rows, MessageRows)
        assert main.query_one(MessageList).cursor == 3  # where the user moved it meanwhile
        title, *lines = text_of(main.query_one(MessageList)).splitlines()
        assert lines == shown["list"].splitlines()[1:]  # every row as the picture drew it
        assert flat(title) + " · loading" == flat(shown["list"].splitlines()[0])
        assert text_of(main.query_one(BudgetPanel)) == shown["budget"]
        assert detail_text(app) == shown["detail"]
    kinds = [type(m) for m in seen if isinstance(m, msg.SessionPreviewed | msg.SessionOpened)]
    assert kinds == [msg.SessionPreviewed, msg.SessionOpened]


@pytest.mark.anyio
async def test_keys_pressed_while_it_loads_act_once_it_has_loaded(
    tmp_path: Path, demo_id: str, held: HeldLoad
) -> None:
    async with reopened(tmp_path, demo_id, held) as pilot:
        app = workbench(pilot)
        main = app.main_screen
        rows = main.query_one(MessageList).rows
        assert rows is not None
        target = next(i for i in range(4, len(rows)) if rows.row(i).role == "user" and not rows.row(i).pinned)
        main.query_one(MessageList).cursor = target
        await pilot.press("p")  # pin: queued behind the load
        await pilot.press("slash", *"role:assistant", "enter")  # a filter: applied once the rows are there
        assert main.screen_state is None
        assert "loading (then: role:assistant)" in str(main.query_one(MessageList).border_title)
        held.release.set()
        await settle(pilot)
        pinned_id = rows.message_id(target)
        assert pinned_id in stored(app).overlay.pinned
        shown = main.query_one(MessageList)
        assert 0 < shown.row_count < len(rows)
        assert all(shown.rows.row(shown.transcript_index(i)).role == "assistant"  # type: ignore[union-attr]
                   for i in range(shown.row_count))


@pytest.mark.anyio
async def test_a_picture_the_session_has_moved_past_is_not_shown_and_is_replaced(
    tmp_path: Path, demo_id: str
) -> None:
    await first_open(tmp_path, demo_id)
    with Store(tmp_path / "t.db") as store:  # another program pins a message meanwhile
        ctx = SessionContext.load(store, demo_id)
        from workbench.engine.plans.measure import apply
        from workbench.tui.steering import plan_for_key

        user = next(m for m in ctx.messages if m.role == "user" and m.index > 3 and m.id not in ctx.overlay.pinned)
        apply(store, ctx, plan_for_key(ctx, "pin", user.id, ctx.config.strategies))
    assert current_picture(tmp_path, demo_id) is None
    seen: list[TextualMessage] = []
    app = WorkbenchApp(launch(tmp_path, demo_id))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(pilot)
        snapshot = app.main_screen.screen_state
    assert not any(isinstance(m, msg.SessionPreviewed) for m in seen)
    picture = current_picture(tmp_path, demo_id)
    assert picture is not None and snapshot is not None and picture.matches(snapshot)
    assert any("PERSIST" in picture.rows.badges(i) for i in range(len(picture.rows)))


@pytest.mark.anyio
async def test_steering_then_leaving_the_session_keeps_its_picture_current(tmp_path: Path, demo_id: str) -> None:
    second = tmp_path / "second.jsonl"
    second.write_text(demo_path().read_text(encoding="utf-8").replace("logsift", "logsieve"), encoding="utf-8")
    with Store(tmp_path / "t.db") as store:
        other = import_file(store, second).session.id
    app = WorkbenchApp(launch(tmp_path, demo_id))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        before = current_picture(tmp_path, demo_id)
        assert before is not None
        messages = app.main_screen.query_one(MessageList)
        rows = messages.rows
        assert rows is not None
        messages.cursor = next(i for i in range(4, len(rows)) if rows.row(i).role == "user" and not rows.row(i).pinned)
        pinned_id = rows.message_id(messages.cursor)
        await pilot.press("p")
        await settle(pilot)
        assert current_picture(tmp_path, demo_id) is None  # the pin moved the revision on
        app.open_session(other)  # leaving the session stores its picture again
        await settle(pilot)
    picture = current_picture(tmp_path, demo_id)
    assert picture is not None
    assert "PERSIST" in picture.rows.badges(picture.rows.index_of(pinned_id) or 0)
    with Store(tmp_path / "t.db") as store:
        assert picture.revision == session_revision(store, demo_id)
        fresh = ScreenState.compute(SessionContext.load(store, demo_id))
        assert picture.matches(fresh)
        key = picture_key(store.get_session(demo_id), Config())
        assert load_picture(store, demo_id, key) is not None


@pytest.mark.anyio
async def test_a_message_that_cannot_be_read_meanwhile_says_so_in_the_detail_pane(
    tmp_path: Path, demo_id: str, held: HeldLoad
) -> None:
    async with reopened(tmp_path, demo_id, held) as pilot:
        app = workbench(pilot)
        rows = app.main_screen.query_one(MessageList).rows
        assert rows is not None
        gone = rows.message_id(4)
        with sqlite3.connect(tmp_path / "t.db") as other_program:  # deleted after the picture was read
            other_program.execute("DELETE FROM messages WHERE session_id = ? AND id = ?", (demo_id, gone))
        other_program.close()
        await pilot.press("down", "down", "down", "down")
        detail = app.main_screen.query_one(MessageDetail)
        await until(pilot, lambda: detail.border_title == "Message #5")
        await until(pilot, lambda: "This message is not stored any more" in flat(detail_text(app)))
        held.release.set()
        await settle(pilot)
        assert app.main_screen.screen_state is not None and len(app.main_screen.screen_state.rows) == len(rows) - 1


@pytest.mark.anyio
async def test_a_transcript_file_opened_again_unchanged_shows_its_picture(tmp_path: Path, held: HeldLoad) -> None:
    by_file = replace(Launch.open(tmp_path / "t.db", str(demo_path())), picture_min=0)
    held.release.set()
    app = WorkbenchApp(by_file)  # imported, loaded, pictured
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
    held.release.clear()
    seen: list[TextualMessage] = []
    app = WorkbenchApp(by_file)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await picture_up(pilot)  # not imported again: the stored session and its picture are current
        held.release.set()
        await settle(pilot)
    assert [type(m) for m in seen if isinstance(m, msg.SessionPreviewed)] == [msg.SessionPreviewed]
