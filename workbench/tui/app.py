"""The Textual application: loads one session in a worker and shows it.

The loader does blocking I/O (import, SQLite, token counting), so it runs in a
thread worker that reports back with ``post_message``; handlers on the UI
thread own every widget change.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen

from workbench import locations
from workbench.engine.context import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.tui.screens.help import HelpScreen
from workbench.tui.screens.main import LoadedSession, MainScreen

log = logging.getLogger("workbench.tui")

Loader = Callable[[], SessionContext]


def write_crash_log(details: str) -> Path | None:
    """Append ``details`` to the workbench log; None when even that fails."""
    path = locations.log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(details)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)
        return None
    return path


class WorkbenchApp(App[None]):
    """See what an agent has in its context window."""

    TITLE = "Context Workbench"
    CSS_PATH = [locations.styles_dir() / "app.tcss"]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "help", "Help", key_display="?", id="app.help"),
    ]

    @dataclass
    class SessionLoaded(Message):
        """The loader finished."""

        loaded: LoadedSession

    @dataclass
    class LoadFailed(Message):
        """The loader raised; ``message`` is fit to show, ``log`` holds a traceback if it was a bug."""

        message: str
        log: Path | None = None

    def __init__(self, loader: Loader) -> None:
        super().__init__()
        self._loader = loader
        self.loaded: LoadedSession | None = None

    def get_default_screen(self) -> Screen[None]:
        return MainScreen()

    def on_mount(self) -> None:
        self.load_session()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_session(self) -> None:
        """Run the loader and the projection off the UI thread; report with a message either way."""
        try:
            loaded = LoadedSession.compute(self._loader())
        except WorkbenchError as exc:
            self.post_message(self.LoadFailed(str(exc)))
            return
        except Exception as exc:  # a bug, not a user error: say so, keep the traceback in the log
            where = write_crash_log(traceback.format_exc())
            self.post_message(self.LoadFailed(f"Internal error: {type(exc).__name__}: {exc}", where))
            return
        self.post_message(self.SessionLoaded(loaded))

    @property
    def main_screen(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    @on(SessionLoaded)
    def _loaded(self, event: SessionLoaded) -> None:
        self.loaded = event.loaded
        self.main_screen.show_session(event.loaded)

    @on(LoadFailed)
    def _failed(self, event: LoadFailed) -> None:
        self.main_screen.show_error(event.message, event.log)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Show every key the workbench answers to", self.action_help)
