"""The loading screen: its text at once, its spinner only once an open has taken a second (a spinner's frames
compete with the load for the interpreter), and neither once the session is shown."""

from __future__ import annotations

import time

import pytest
from tui_fixtures import settle, until

from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.models import Message, Session, TextPart
from workbench.tui.app import WorkbenchApp
from workbench.tui.handlers import LOADING_AFTER
from workbench.tui.screens.main import MainScreen

SIZE = (120, 32)


def _context() -> SessionContext:
    session = Session(id="s", title="loading")
    messages = [Message(id=f"m{i}", session_id="s", index=i, role="user" if i % 2 == 0 else "assistant",
                        parts=[TextPart(text=f"message {i}")]) for i in range(4)]
    return SessionContext(session, messages, [])


def _shown(screen: MainScreen) -> dict[str, bool]:
    return {part: bool(screen.query_one(part).display) for part in ("#status", "#spinner", "#top", "#body")}


@pytest.mark.anyio
async def test_a_quick_open_shows_the_session_without_ever_starting_the_spinner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[bool, str]] = []
    real = MainScreen.set_busy

    def recorded(self: MainScreen, busy: bool, pane: str = "list") -> None:
        asked.append((busy, pane))
        real(self, busy, pane)

    monkeypatch.setattr(MainScreen, "set_busy", recorded)
    app = WorkbenchApp(_context)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.main_screen
        assert _shown(screen) == {"#status": False, "#spinner": False, "#top": True, "#body": True}
        assert (True, "session") not in asked


@pytest.mark.anyio
async def test_a_slow_open_starts_the_spinner_after_a_second_and_hides_it_with_the_loading_screen() -> None:
    def slow() -> SessionContext:
        time.sleep(LOADING_AFTER + 1.0)  # on the engine thread: the UI goes on meanwhile
        return _context()

    app = WorkbenchApp(slow)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.main_screen
        await pilot.pause(LOADING_AFTER / 2)
        assert _shown(screen) == {"#status": True, "#spinner": False, "#top": False, "#body": False}
        await until(pilot, lambda: bool(screen.query_one("#spinner").display))  # before the load ends
        assert _shown(screen) == {"#status": True, "#spinner": True, "#top": False, "#body": False}
        await settle(pilot)
        assert _shown(screen) == {"#status": False, "#spinner": False, "#top": True, "#body": True}
