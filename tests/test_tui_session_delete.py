"""Deleting a stored session from the session picker: d asks first, y deletes, n keeps; never the open one."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import store_short_session
from textual.pilot import Pilot
from tui_fixtures import SIZE, demo_launch, isolated_dirs, record_toasts, settle, until  # noqa: F401

from workbench.engine.sources.session_list import ListedSession
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.confirm import ConfirmScreen
from workbench.tui.screens.sessions import SessionPicker


def _ids(db: Path) -> set[str]:
    with Store(db) as store:
        return {s.id for s, _ in store.list_sessions()}


async def _picker(pilot: Pilot[None]) -> SessionPicker:
    await pilot.press("ctrl+o")
    await until(pilot, lambda: isinstance(pilot.app.screen, SessionPicker))
    screen = pilot.app.screen
    assert isinstance(screen, SessionPicker)
    return screen


def _row_of(picker: SessionPicker, session_id: str) -> int:
    return next(i for i, e in enumerate(picker.entries) if isinstance(e, ListedSession) and e.session.id == session_id)


@pytest.mark.anyio
async def test_d_asks_then_deletes_the_session_and_its_sub_agents(demo_launch: Launch) -> None:
    db = demo_launch.db
    assert db is not None
    with Store(db) as store:
        store_short_session(store, "doomed")
        child = store_short_session(store, "doomed-child")
        store.save_session(child.model_copy(update={"metadata": {"parent_session": "doomed"}}))
        store_short_session(store, "kept")
    app = WorkbenchApp(demo_launch)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        current = app.main_screen.screen_state.session.id  # type: ignore[union-attr]
        picker = await _picker(pilot)
        picker.table.move_cursor(row=_row_of(picker, "doomed"))

        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # changed their mind
        await until(pilot, lambda: app.screen is picker)
        await settle(pilot)
        assert "doomed" in _ids(db)

        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await settle(pilot)
        assert _ids(db) == {current, "kept"}
        assert app.screen is picker
        listed = [e.session.id for e in picker.entries if isinstance(e, ListedSession)]
        assert "doomed" not in listed and "doomed-child" not in listed and "kept" in listed
        assert picker.table.row_count == len(picker.entries)
        assert any(n.startswith("Deleted doomed (a session): 6 messages and 1 sub-agent session")
                   for n in said)


@pytest.mark.anyio
async def test_the_open_session_is_not_deleted(demo_launch: Launch) -> None:
    db = demo_launch.db
    assert db is not None
    app = WorkbenchApp(demo_launch)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        current = app.main_screen.screen_state.session.id  # type: ignore[union-attr]
        picker = await _picker(pilot)
        picker.table.move_cursor(row=_row_of(picker, current))
        await pilot.press("d")
        await pilot.pause()
        assert app.screen is picker  # nothing to confirm
        assert any("This session is open" in n for n in said)
        app.remove_session(current)  # the engine refuses it too, whoever asks
        await settle(pilot)
        assert current in _ids(db)
        assert any("not deleted" in n for n in said)
