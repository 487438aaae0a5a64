"""``workbench open`` of a stored session in a pseudo-terminal: seconds from the process's start to its first
full frame, and to keys acting (the session loaded).

The child is the real command line (``workbench.cli.main``) on a real terminal driver, wrapped only to stamp
the wall-clock time of those two frames into a file; the parent starts it on a pty of the bench's size,
reads (and throws away) what it draws, and stops it once both stamps are in. Beside it, the same for a bare
Textual app (a line of text and Textual's footer): the floor under any Textual program on the machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any, ClassVar

ROWS, COLUMNS = 45, 140


def measure(db: Path, session_id: str, timeout: float = 90.0) -> dict[str, float]:
    """Wall seconds from starting ``workbench open`` to its first full frame (``frame``) and to keys acting
    (``ready``)."""
    return _in_pty(["--db", str(db), "--session", session_id], db.with_suffix(".marks"), "workbench open", timeout)


def measure_bare(folder: Path, timeout: float = 60.0) -> float:
    """Wall seconds from starting a bare Textual app (a line of text and Textual's footer) to its first frame, on
    a pty of the same size: the floor under any Textual program on this machine (Python, Textual's imports and
    first screen), for comparing ``workbench open`` with."""
    return _in_pty(["--bare"], folder / "bare.marks", "the bare Textual app", timeout)["frame"]


def _in_pty(args: list[str], marks: Path, what: str, timeout: float) -> dict[str, float]:
    """Start this module's child with ``args`` on a pty of the bench's size and return the wall seconds from its
    start to each mark it writes into ``marks`` (two: ``frame`` and ``ready``)."""
    from tests.bench.common import REPO_ROOT  # here, not in the child: what it loads is the program's alone

    marks.unlink(missing_ok=True)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    start = time.time()
    child = subprocess.Popen([sys.executable, "-m", "tests.bench.tui_pty", *args, "--marks", str(marks)],
                             cwd=REPO_ROOT, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    try:
        deadline = time.monotonic() + timeout
        found: dict[str, float] = {}
        while time.monotonic() < deadline and len(found) < 2:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
            if marks.exists():
                try:
                    found = json.loads(marks.read_text() or "{}")
                except json.JSONDecodeError:  # read while the child was writing it
                    continue
            if child.poll() is not None and len(found) < 2:
                raise RuntimeError(f"{what} ended ({child.returncode}) before its first full frame")
        if len(found) < 2:
            raise RuntimeError(f"no full frame from {what} within {timeout:.0f} s")
        return {name: stamp - start for name, stamp in found.items()}
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        os.close(master)
        marks.unlink(missing_ok=True)


def _child(db: str, session_id: str, marks: Path) -> int:
    """``workbench open --db DB SESSION``, its app stamping the two frames into ``marks``. The stamping is
    put in as the command starts the app: importing the app's modules first, to patch it, would change the
    order the command does its work in (it checks the database while those modules load)."""
    from workbench import cli
    from workbench.commands import app as command

    start_app = command.run

    def stamping(launch: Any) -> int:
        _stamp_frames(marks)
        return start_app(launch)

    command.run = stamping
    return cli.main(["open", "--db", db, session_id])


def _bare_child(marks: Path) -> int:
    """A Textual app with nothing of the workbench's: a line of text and Textual's footer."""
    from textual.app import App, ComposeResult
    from textual.binding import BindingType
    from textual.widgets import Footer, Static

    class Bare(App[None]):
        BINDINGS: ClassVar[list[BindingType]] = [("q", "quit", "Quit")]

        def compose(self) -> ComposeResult:
            yield Static("a bare Textual app")
            yield Footer()

        def _display(self, screen: Any, renderable: Any) -> None:
            super()._display(screen, renderable)
            stamp = time.time()
            marks.write_text(json.dumps({"frame": stamp, "ready": stamp}))

    Bare().run()
    return 0


def _stamp_frames(marks: Path) -> None:
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens.main import MainScreen
    from workbench.tui.widgets.message_detail import MessageDetail
    from workbench.tui.widgets.timeline import Timeline

    stamps: dict[str, float] = {}
    display = WorkbenchApp._display

    def stamped(self: Any, screen: Any, renderable: Any) -> None:
        display(self, screen, renderable)
        if len(stamps) == 2 or not isinstance(screen, MainScreen) or not screen.has_class("-loaded"):
            return
        timelines = screen.query(Timeline)
        full = (screen.query_one(MessageDetail).border_title != "Message" and bool(timelines)
                and timelines.first().data is not None)
        if full and "frame" not in stamps:
            stamps["frame"] = time.time()
        if "frame" in stamps and screen.screen_state is not None:
            stamps["ready"] = time.time()
        marks.write_text(json.dumps(stamps))

    WorkbenchApp._display = stamped  # type: ignore[method-assign]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.bench.tui_pty")
    parser.add_argument("--db")
    parser.add_argument("--session")
    parser.add_argument("--bare", action="store_true", help="a bare Textual app instead of workbench open")
    parser.add_argument("--marks", type=Path, required=True)
    args = parser.parse_args()
    sys.exit(_bare_child(args.marks) if args.bare else _child(args.db, args.session, args.marks))
