"""Test-wide fixtures: keep every test away from the user's own data and config."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:  # ``from helpers import ...`` works however pytest imports the tests
    sys.path.insert(0, _TESTS_DIR)

TERMINAL_ENV = {"TERM": "xterm-256color", "COLORTERM": "truecolor", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
"""The terminal every test runs in, whatever the developer's own is: colours, size and locale change what the
app draws (syntax line numbers are dimmed on a 16-colour terminal, ``NO_COLOR`` turns every snapshot grey)."""
TERMINAL_ENV_UNSET = ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES", "LANGUAGE")

# pytest-textual-snapshot hands its report folder to pytest-xdist's workers in TEXTUAL_SNAPSHOT_TEMPDIR: kept.
_TEXTUAL_SET = [name for name in os.environ if name.startswith("TEXTUAL") and not name.startswith("TEXTUAL_SNAPSHOT")]
for _name in [*TERMINAL_ENV_UNSET, *_TEXTUAL_SET]:
    os.environ.pop(_name, None)
os.environ.update(TERMINAL_ENV)  # before Textual or Rich reads it: both read the environment as they load

from loopback_api import LoopbackAPI

from workbench.engine.transcript import credentials
from workbench.engine.transcript.store import Store

ANTHROPIC_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")
WORKSPACE_APP = "def add(a, b):\n    return a - b\n"
"""The one file of the default agent workspace: a bug for the scripted agent to find."""


@pytest.fixture(autouse=True)
def _isolated_workbench_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the data dir and the config file at a fresh temporary directory.

    Any other ``WORKBENCH_*`` variable from the developer's shell (settings read
    by pydantic-settings) is removed so it cannot change a test's outcome, and so
    are the developer's own Anthropic key and endpoint: no test reaches the real API.
    """
    home = tmp_path_factory.mktemp("workbench-home")
    for name in list(os.environ):
        if name.startswith("WORKBENCH_") or name in ANTHROPIC_ENV:
            monkeypatch.delenv(name)
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("WORKBENCH_CONFIG", str(home / "config.toml"))
    monkeypatch.setenv("WORKBENCH_TOOL_OUTPUTS", str(home / "tool-outputs"))
    credentials.forget()  # a key an earlier test's client took out of the environment
    return home


@pytest.fixture
def workbench_home(_isolated_workbench_env: Path) -> Path:
    """The temporary directory holding this test's data dir and config file."""
    return _isolated_workbench_env


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "workbench.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    """A real SQLite store in a temporary file."""
    with Store(db_path) as s:
        yield s


@pytest.fixture
def api() -> Iterator[LoopbackAPI]:
    """A local server speaking the Messages API, for the real ``anthropic`` SDK to talk to."""
    with LoopbackAPI() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The agent's workspace: a folder with one small Python file."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text(WORKSPACE_APP)
    return ws


@pytest.fixture(scope="session")
def claude() -> Path:
    """Real Claude Code, installed once for the session (pinned in tests/e2e); skipped without node and npm."""
    from claude_code_agent import install_claude

    found = install_claude()
    if found is None:
        pytest.skip("needs node and npm to install Claude Code")
    return found


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, as Textual does (not on every backend anyio could find)."""
    return "asyncio"
