"""``workbench open`` checks the database's health once, not once in the command line and again in the app:
the check reads the whole file (up to a second on a big one). A damaged database is still checked by the app,
and opened read-only there."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from helpers import claude_fixture, sqlite_db
from tui_fixtures import SIZE, settle

from workbench.cli import main
from workbench.commands import app as app_command
from workbench.engine.transcript import db_health
from workbench.engine.transcript.store import Store
from workbench.tui import live
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the health check reads, in order."""
    seen: list[Path] = []
    real = db_health.quick_check

    def counted(conn: sqlite3.Connection, seconds: float) -> list[str] | None:
        seen.append(Path(conn.execute("PRAGMA database_list").fetchone()[2]))
        return real(conn, seconds)

    monkeypatch.setattr(db_health, "quick_check", counted)
    return seen


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[Launch]:
    """What ``workbench open`` hands the app, instead of running it."""
    seen: list[Launch] = []

    def run(launch: Launch) -> int:
        seen.append(launch)
        return 0

    monkeypatch.setattr(app_command, "run", run)
    return seen


def _stored(db: Path) -> str:
    assert main(["import", str(claude_fixture("short")), "--db", str(db)]) == 0
    with Store(db) as store:
        return str(sqlite_db(store).execute("SELECT id FROM sessions").fetchone()[0])


def _open_in_app(launch: Launch) -> live.Opened:
    """Open the session as the app does on its engine thread."""
    return live.open_session(launch, approve=lambda *_: None, on_event=lambda _: None)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["session id", "most recent"])
def test_a_healthy_database_is_checked_once_from_the_command_line_to_the_app(
    how: str, tmp_path: Path, checks: list[Path], launched: list[Launch]
) -> None:
    db = tmp_path / "wb.db"
    session_id = _stored(db)
    checks.clear()
    argv = ["open", session_id] if how == "session id" else []
    assert main([*argv, "--db", str(db)]) == 0
    assert len(checks) == 1 and launched[-1].db_checked
    opened = _open_in_app(launched[-1])
    try:
        assert len(checks) == 1  # the app's own open trusts the command line's check
        assert opened.ctx.session.id == session_id and opened.store is not None and opened.store.damage is None
    finally:
        assert opened.store is not None
        opened.store.close()


def test_a_damaged_database_is_checked_again_by_the_app_and_opened_read_only(
    tmp_path: Path, checks: list[Path], launched: list[Launch]
) -> None:
    db = tmp_path / "wb.db"
    session_id = _stored(db)
    data = bytearray(db.read_bytes())
    rng = random.Random(7)
    page = 4096
    damaged_page = len(data) // page - 1  # the last page: the header and the schema stay readable
    data[damaged_page * page:(damaged_page + 1) * page] = rng.randbytes(page)
    db.write_bytes(bytes(data))
    checks.clear()
    assert main(["open", session_id, "--db", str(db)]) == 0  # the session is still there to be read
    assert checks == [db] and not launched[-1].db_checked
    try:
        _open_in_app(launched[-1]).store.close()  # type: ignore[union-attr]
    except sqlite3.DatabaseError:
        pass  # the damaged page held what the open reads: the app says so (its error screen); the check came first
    assert checks == [db, db]  # the app checked again
    with Store(db, checked=launched[-1].db_checked) as store:  # as the app opens it: read-only, never written
        assert store.damage is not None and "is damaged" in store.damage


def test_the_check_on_a_thread_finds_what_the_check_in_line_finds(tmp_path: Path) -> None:
    """``workbench open`` checks on a thread while the app's modules load; its verdict is the same."""
    db = tmp_path / "wb.db"
    _stored(db)
    assert db_health.check_in_background(db)() is None is db_health.damage(db)
    data = bytearray(db.read_bytes())
    data[len(data) - 4096:] = random.Random(3).randbytes(4096)
    db.write_bytes(bytes(data))
    found = db_health.check_in_background(db)()
    assert found is not None and found == db_health.damage(db)
    with Store(db, checked=True, found=found) as store:  # what it found opens the store read-only, unchecked
        assert store.damage is not None and found in store.damage


def _damaged(db: Path) -> None:
    data = bytearray(db.read_bytes())
    page = 4096
    last = len(data) // page - 1  # the last page: the header and the schema stay readable
    data[last * page:(last + 1) * page] = random.Random(7).randbytes(page)
    db.write_bytes(bytes(data))


def test_an_app_started_on_its_own_checks_while_it_draws_and_opens_on_that_verdict(
    tmp_path: Path, checks: list[Path]
) -> None:
    """An app started without the command line's check (in process, as the benchmark and other programs do)
    starts the check as it loads; its open waits for that verdict and does not check again."""
    db = tmp_path / "wb.db"
    session_id = _stored(db)
    checks.clear()
    launch = Launch.open(db, session_id).checking()
    assert launch.db_check is not None and launch.checking() is launch
    opened = _open_in_app(launch)
    try:
        assert checks == [db] and opened.store is not None and opened.store.damage is None
        assert opened.ctx.session.id == session_id
    finally:
        assert opened.store is not None
        opened.store.close()
    assert Launch.open(db, session_id, db_checked=True).checking().db_check is None, "checked already: no check"
    assert Launch.open(tmp_path / "new.db", "x").checking().db_check is None, "no file yet: nothing to check"


def test_a_damage_found_by_the_app_s_own_check_opens_the_database_read_only(
    tmp_path: Path, checks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "wb.db"
    session_id = _stored(db)
    _damaged(db)
    checks.clear()
    stores: list[Store] = []

    def opening(path: Path, *, checked: bool = False, found: str | None = None) -> Store:
        stores.append(Store(path, checked=checked, found=found))
        return stores[-1]

    monkeypatch.setattr(live, "Store", opening)
    with pytest.raises(sqlite3.DatabaseError):  # the damaged page holds what the open reads: the app shows that
        _open_in_app(Launch.open(db, session_id).checking())
    assert checks == [db], "the one check, whose verdict the open used"
    assert len(stores) == 1 and stores[0].damage is not None and "is damaged" in stores[0].damage, "read-only"


@pytest.mark.anyio
async def test_another_session_of_a_healthy_database_opens_without_checking_it_again(
    tmp_path: Path, checks: list[Path]
) -> None:
    """Changing sessions (the picker, a sub-agent and back) reads the database the app found healthy; a damaged
    one is checked again at each open."""
    db = tmp_path / "wb.db"
    first = _stored(db)
    assert main(["import", str(claude_fixture("subagent")), "--db", str(db)]) == 0
    with Store(db) as store:
        second = next(s.id for s, _ in store.list_sessions() if s.id != first)
    checks.clear()
    app = WorkbenchApp(Launch.open(db, first))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert checks == [db] and app.host.ctx is not None and app.host.ctx.session.id == first
        app.open_session(second)
        await settle(pilot)
        assert app.host.ctx is not None and app.host.ctx.session.id == second
        assert checks == [db], "the session picker's open trusts the app's check"
        assert app.host.store is not None and app.host.store.damage is None
        app.host.store.damage = "damaged meanwhile"  # as SQLite reporting a malformed page would leave it
        app.open_session(first)
        await settle(pilot)
        assert checks == [db, db], "a database found damaged is checked again"
