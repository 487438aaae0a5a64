"""The real ``workbench demo``, and the bare ``workbench`` on an empty database, in a real terminal (tmux):
the demo plays by itself, keys work, q quits.

Skipped when tmux is missing (``apt-get install -y tmux``). The screen is read with
``tmux capture-pane -p``; the database and data dir are temporary.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workbench.engine.transcript.store import Store

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)")


def _command() -> list[str]:
    script = Path(sys.executable).parent / "workbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "workbench"]


class Terminal:
    def __init__(self, name: str) -> None:
        self.name = name

    def screen(self) -> str:
        done = subprocess.run([TMUX, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True,  # type: ignore[list-item]
                              check=False)
        return done.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([TMUX, "send-keys", "-t", self.name, *keys], check=True)  # type: ignore[list-item]

    def alive(self) -> bool:
        done = subprocess.run([TMUX, "has-session", "-t", self.name], capture_output=True, check=False)  # type: ignore[list-item]
        return done.returncode == 0

    def wait(self, condition: Callable[[str], bool], what: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if condition(screen):
                return screen
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{screen}")


def _open(tmp_path: Path, db: Path, args: list[str], size: tuple[int, int]) -> Terminal:
    name = f"wb-test-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_") and k != "ANTHROPIC_API_KEY"}
    env.update(WORKBENCH_DATA_DIR=str(tmp_path / "data"), WORKBENCH_CONFIG=str(tmp_path / "none.toml"),
               TERM="xterm-256color", WORKBENCH_DEMO_SPEED="inf")  # the demo without the pauses meant for watching
    command = " ".join([*_command(), "--db", str(db), *args])
    subprocess.run([TMUX, "new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-s", name, command],  # type: ignore[list-item]
                   check=True, env=env, cwd=tmp_path)
    return Terminal(name)


def _close(term: Terminal) -> None:
    if term.alive():
        subprocess.run([TMUX, "kill-session", "-t", term.name], check=False)  # type: ignore[list-item]


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, Path]]:
    db = tmp_path / "demo.db"
    term = _open(tmp_path, db, ["demo", "--chunk-delay", "0.005"], (160, 50))
    try:
        yield term, db
    finally:
        _close(term)


@pytest.fixture
def first_launch(tmp_path: Path) -> Iterator[tuple[Terminal, Path]]:
    """The bare ``workbench`` on an empty database, in the smallest terminal the layout is made for."""
    db = tmp_path / "empty.db"
    term = _open(tmp_path, db, [], (80, 24))
    try:
        yield term, db
    finally:
        _close(term)


BUDGET = re.compile(r"Context [\d,]+ of [\d,]+ · (\d+\.\d)%")


def test_the_first_launch_shows_the_product_at_work(first_launch: tuple[Terminal, Path]) -> None:
    """No key pressed: within a minute and a half (the demo plays at a pace a person can follow) a [PERSIST] pin
    and a compaction are on screen (at 80x24 the compaction pane takes the screen), and once the pane gives the
    screen back, a budget above half full; the first key pressed (?) opens the help, it is not typed into the
    message box."""
    term, db = first_launch

    def at_work(screen: str) -> bool:
        return "PERSIST" in screen and "Compaction · auto" in screen and "kept verbatim" in screen

    term.wait(at_work, "a PERSIST badge and a compaction", timeout=90)
    term.keys("Escape")

    def budget_shown(screen: str) -> bool:
        budget = BUDGET.search(screen)
        return budget is not None and float(budget.group(1)) > 50 and "scripted demo" in screen

    term.wait(budget_shown, "the budget above 50% once the pane is closed", timeout=30)
    term.keys("?")
    help_line = "Pin or unpin the selected message"
    term.wait(lambda s: "Keys" in s and help_line in s, "the help screen", timeout=10)
    term.keys("Escape")
    term.wait(lambda s: help_line not in s, "help to close", timeout=10)
    term.keys("q")
    deadline = time.monotonic() + 20
    while term.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    with Store(db) as store:
        [(session, count)] = store.list_sessions()
        typed = [m.text for m in store.load_messages(session.id) if m.role == "user" and m.text.strip() == "?"]
    assert session.title == "Scripted: demo" and count > 30 and not typed


def test_workbench_demo_plays_by_itself_in_a_terminal(terminal: tuple[Terminal, Path]) -> None:
    term, db = terminal
    term.wait(lambda s: "Context Workbench" in s and "demo " in s, "the app to start")
    # Nothing pressed: the scripted turns are sent, tools approved after the countdown, the context compacted.
    seen_approval = False
    deadline = time.monotonic() + 180
    screen = ""
    while time.monotonic() < deadline:
        screen = term.screen()
        seen_approval |= "approving by itself" in screen
        if "demo 3/3" in screen and "the demo has finished" in screen and "● idle" in screen:
            break
        time.sleep(0.25)
    else:
        raise AssertionError(f"the demo did not finish; the screen was:\n{screen}")
    assert seen_approval, "the approval countdown was never on screen"
    assert "Compaction · auto (by the agent)" in screen  # the pane opened by itself at the threshold
    assert "Transcript ·" in screen and "in context" in screen
    assert "Context per request" in screen

    term.keys("Escape")  # close the compaction pane
    term.wait(lambda s: "Compaction · auto" not in s and "Message #" in s, "the detail pane again")
    term.keys("?")
    term.wait(lambda s: "Pin or unpin the selected message" in s and "Keys" in s, "the help screen")
    term.keys("Escape")
    term.wait(lambda s: "Pin or unpin the selected message" not in s, "help to close")
    term.keys("q")
    deadline = time.monotonic() + 20
    while term.alive() and "$" not in term.screen() and time.monotonic() < deadline:
        time.sleep(0.2)

    with Store(db) as store:
        sessions = store.list_sessions()
    assert len(sessions) == 1
    session, count = sessions[0]
    assert session.title == "Scripted: demo" and count > 30
