"""The loading screen: its text at once, its spinner and its keys only once an open has taken a second (a
spinner's frames, and drawing keys that are replaced a moment later, compete with the load for the interpreter),
and neither once the session is shown."""

from __future__ import annotations

import time

import pytest
from tui_fixtures import footer_reads, settle, until

from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.models import Message, Session, TextPart
from workbench.tui.app import WorkbenchApp
from workbench.tui.handlers import LOADING_AFTER
from workbench.tui.screens.main import MainScreen
from workbench.tui.widgets.key_footer import KeyFooter

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
    reads = footer_reads(monkeypatch)
    app = WorkbenchApp(_context)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.main_screen
        assert _shown(screen) == {"#status": False, "#spinner": False, "#top": True, "#body": True}
        assert (True, "session") not in asked
        keys = tuple(entry.key for entry in screen.query_one(KeyFooter).entries)
        assert {"p", "q"} <= set(keys)
        assert set(reads) == {keys}, "the session's keys, never the loading screen's"


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
        assert not screen.query_one(KeyFooter).entries
        await until(pilot, lambda: bool(screen.query_one("#spinner").display))  # before the load ends
        assert _shown(screen) == {"#status": True, "#spinner": True, "#top": False, "#body": False}
        footer = screen.query_one(KeyFooter)
        await until(pilot, lambda: bool(footer.entries))  # quitting, the sessions: while the user waits
        assert "q" in [entry.key for entry in footer.shown()]
        await settle(pilot)
        assert _shown(screen) == {"#status": False, "#spinner": False, "#top": True, "#body": True}


@pytest.mark.anyio
async def test_the_session_shows_with_its_selected_message_in_the_same_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """The detail is filled as the session shows, not when the list's Highlighted message comes round (that
    waited behind the footer's rebuild, and a frame went out without it)."""
    from workbench.tui.widgets.message_detail import MessageDetail
    from workbench.tui.widgets.message_list import MessageList

    post = MessageList.post_message

    def without_highlights(self: MessageList, message: object) -> bool:
        return True if isinstance(message, MessageList.Highlighted) else post(self, message)  # type: ignore[arg-type]

    monkeypatch.setattr(MessageList, "post_message", without_highlights)
    app = WorkbenchApp(_context)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        detail = app.main_screen.query_one(MessageDetail)
        assert detail.border_title == "Message #1"  # a read-only session opens at its first message
