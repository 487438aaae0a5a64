"""Fixtures for the TUI tests: sessions in a temporary database, never the user's data dir."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workbench.cli import demo_path
from workbench.engine.context import SessionContext
from workbench.engine.importers import import_file
from workbench.engine.models import Message, Session, TextPart
from workbench.engine.store import Store

FIXTURES = Path("/work/shared/fixtures")
COMPACTED_FIXTURE = FIXTURES / "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"
BIG_SESSION_SIZE = 100_000

Loader = Callable[[], SessionContext]


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the data dir and config at the test's temporary directory."""
    data = tmp_path / "data"
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(data))
    monkeypatch.setenv("WORKBENCH_CONFIG", str(tmp_path / "no-config.toml"))
    yield data


def import_and_load(db: Path, path: Path) -> SessionContext:
    with Store(db) as store:
        parsed = import_file(store, path)
        return SessionContext.load(store, parsed.session.id)


def file_loader(db: Path, path: Path) -> Loader:
    """A loader like the CLI's: import into ``db``, then load, all inside the app's worker."""
    return lambda: import_and_load(db, path)


@pytest.fixture
def demo_loader(tmp_path: Path) -> Loader:
    return file_loader(tmp_path / "t.db", demo_path())


@pytest.fixture
def demo_context(tmp_path: Path) -> SessionContext:
    """The demo as the app will see it, loaded here for the assertions."""
    return import_and_load(tmp_path / "expected.db", demo_path())


@pytest.fixture
def compacted_loader(tmp_path: Path) -> Loader:
    if not COMPACTED_FIXTURE.exists():
        pytest.skip(f"fixture {COMPACTED_FIXTURE.name} is not available")
    return file_loader(tmp_path / "t.db", COMPACTED_FIXTURE)


@pytest.fixture
def empty_loader() -> Loader:
    session = Session(id="empty-session", title="An empty session", source_format="engine")
    return lambda: SessionContext(session, [], events=[])


def synthetic_context(count: int) -> SessionContext:
    """``count`` short alternating user/assistant messages, built directly (no database)."""
    session = Session(id="synthetic", title=f"Synthetic session, {count:,} messages", model="claude-sonnet-4-5")
    messages = [
        Message(
            id=f"m{i}",
            session_id=session.id,
            index=i,
            role="user" if i % 2 == 0 else "assistant",
            parts=[TextPart(text=f"message {i + 1}: the quick brown fox jumps over the lazy dog")],
        )
        for i in range(count)
    ]
    return SessionContext(session, messages, events=[])


@pytest.fixture(scope="module")
def big_context() -> SessionContext:
    """100,000 messages; built once per module because the engine needs a few seconds for it."""
    return synthetic_context(BIG_SESSION_SIZE)
