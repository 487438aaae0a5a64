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

from workbench.engine.store import Store  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_workbench_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the data dir and the config file at a fresh temporary directory.

    Any other ``WORKBENCH_*`` variable from the developer's shell (settings read
    by pydantic-settings) is removed so it cannot change a test's outcome.
    """
    home = tmp_path_factory.mktemp("workbench-home")
    for name in list(os.environ):
        if name.startswith("WORKBENCH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("WORKBENCH_CONFIG", str(home / "config.toml"))
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
