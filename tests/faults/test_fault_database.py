"""A corrupt or foreign database: a clear one-line message, exit 1, and the user's file left as it was.

``tests/test_store.py`` and ``tests/test_cli.py`` cover a text or binary file, a newer schema and a
directory at the store level and for ``import``. Added here, through the command line with several
commands each: a database truncated at many points (including one byte short, which SQLite itself
reads without complaint), a transcript given as ``--db`` by mistake, a newer schema, a read-only file
(reading still works, writing is refused), a read-only folder (with and without a database in it).

Running as root, "read-only" is made real by running the command with ``CAP_DAC_OVERRIDE`` and
``CAP_FOWNER`` dropped from its capability bounding set (``prctl``); otherwise ``chmod`` is enough.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fault_support import BIG_CLAUDE, CHILD, FIXTURES, SEED, child_env, in_process, integrity, one_line_error

from workbench.engine.transcript.db_recover import recover
from workbench.engine.transcript.migrations import SCHEMA_VERSION

SHORT = FIXTURES / "claude-code__marot__spotter__short.jsonl"



def state(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` with a digest of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("good") / "wb.db"
    result = in_process(["import", "--db", db, BIG_CLAUDE, "--json"])
    assert result.returncode == 0, result.stderr
    session_id = result.stdout.split('"session_id": "')[1].split('"')[0]
    return db, session_id


def commands(session_id: str) -> list[list[str | Path]]:
    return [["sessions"], ["inspect", session_id], ["import", SHORT], ["export", session_id], ["pin", session_id, "1"],
            ["run", "--session", session_id, "--scripted", "demo", "--yes"]]


def cuts(size: int) -> list[int]:
    page = 4096
    return sorted({50, 100, 1024, page, page + 1, 2 * page, size // 3, size // 2, size - page, size - 1})


def test_a_truncated_database_is_refused_and_left_as_it_was(good_db: tuple[Path, str], tmp_path: Path) -> None:
    db, session_id = good_db
    data = db.read_bytes()
    assert not Path(f"{db}-wal").exists(), "the template was closed cleanly"
    for cut in cuts(len(data)):
        folder = tmp_path / f"cut{cut}"
        folder.mkdir()
        damaged = folder / "wb.db"
        damaged.write_bytes(data[:cut])
        before = state(folder)
        for args in commands(session_id):
            result = in_process([args[0], "--db", damaged, *args[1:]])
            one_line_error(result.returncode, result.stderr)
            assert str(damaged) in result.stderr
            assert any(word in result.stderr for word in ("truncated", "not a workbench database")), result.stderr
            assert state(folder) == before, f"cut at {cut}: {args[0]} changed the folder"


@pytest.mark.parametrize("kind", ["transcript", "newer-schema", "sqlite-but-not-ours", "not-ours-rollback-journal"])
def test_a_foreign_database_is_refused_and_left_as_it_was(kind: str, good_db: tuple[Path, str],
                                                          tmp_path: Path) -> None:
    _, session_id = good_db
    db = tmp_path / "wb.db"
    if kind == "transcript":  # `--db session.jsonl` by mistake
        shutil.copy(SHORT, db)
    else:
        conn = sqlite3.connect(db)
        if kind != "not-ours-rollback-journal":  # switching it to WAL would rewrite its header
            conn.execute("PRAGMA journal_mode = WAL")
        if kind == "newer-schema":
            conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 3,))
        else:  # another program's database that has a `sessions` table of its own
            conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, payload TEXT)")
        conn.execute("INSERT INTO sessions VALUES ('theirs', 'keep me')" if kind != "newer-schema"
                     else "CREATE TABLE sessions (id TEXT PRIMARY KEY, payload TEXT)")
        conn.commit()
        conn.close()
    before = state(tmp_path)
    for args in commands(session_id):
        result = in_process([args[0], "--db", db, *args[1:]])
        one_line_error(result.returncode, result.stderr)
        assert state(tmp_path) == before, f"{args[0]} changed the folder"
        if kind == "newer-schema":
            assert "newer workbench" in result.stderr


# --- read-only ------------------------------------------------------------------------------


_libc = ctypes.CDLL(None, use_errno=True)
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3


def _drop_privileges() -> None:
    """In the child, before exec: root without the capabilities that let it ignore file modes."""
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def unprivileged(*commands: list[str | Path]) -> list[subprocess.CompletedProcess[str]]:
    """Each command in a child that cannot override file modes, three at a time."""
    preexec: Callable[[], None] | None = _drop_privileges if os.geteuid() == 0 else None

    def run(args: list[str | Path]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(CHILD), *map(str, args)], env=child_env(), capture_output=True,
                              text=True, timeout=120, preexec_fn=preexec)

    with ThreadPoolExecutor(3) as pool:
        return list(pool.map(run, commands))


@pytest.fixture
def read_only(tmp_path: Path) -> Callable[[Path, int], None]:
    """``chmod`` that is undone after the test, so the temporary folder can be removed."""
    changed: list[tuple[Path, int]] = []

    def chmod(path: Path, mode: int) -> None:
        changed.append((path, path.stat().st_mode & 0o7777))
        path.chmod(mode)

    yield chmod  # type: ignore[misc]
    for path, mode in reversed(changed):
        path.chmod(mode)


@pytest.mark.skipif(sys.platform != "linux", reason="uses Linux capabilities when run as root")
def test_a_read_only_database_file_can_be_read_but_not_written(good_db: tuple[Path, str], tmp_path: Path,
                                                               read_only: Callable[[Path, int], None]) -> None:
    db, session_id = good_db
    folder = tmp_path / "ro"
    folder.mkdir()
    copy = Path(shutil.copy(db, folder / "wb.db"))
    read_only(copy, 0o444)
    original = hashlib.sha256(copy.read_bytes()).hexdigest()
    reads, *writes = unprivileged(["inspect", "--db", copy, session_id, "--json"],
                                  ["import", "--db", copy, SHORT], ["pin", "--db", copy, session_id, "1"])
    assert reads.returncode == 0, reads.stderr
    for result in writes:
        one_line_error(result.returncode, result.stderr)
        assert "read-only" in result.stderr, result.stderr
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == original


@pytest.mark.skipif(sys.platform != "linux", reason="uses Linux capabilities when run as root")
@pytest.mark.parametrize("existing", [True, False], ids=["with-database", "new-database"])
def test_a_read_only_folder_is_a_clear_error(existing: bool, good_db: tuple[Path, str], tmp_path: Path,
                                             read_only: Callable[[Path, int], None]) -> None:
    db, _session_id = good_db
    folder = tmp_path / "ro"
    folder.mkdir()
    target = folder / "wb.db"
    if existing:
        shutil.copy(db, target)
    read_only(folder, 0o555)
    before = state(folder)
    listed, imported = unprivileged(["sessions", "--db", target], ["import", "--db", target, SHORT])
    if existing:  # read, read-only, with a notice
        assert listed.returncode == 0, listed.stderr
        notice = (f"workbench: warning: {target} is read-only (the file or its folder cannot be written): it is "
                  "opened for reading only, and changes to it are refused; use --db to pick a file that can be changed")
        assert [line for line in listed.stderr.splitlines() if line] == [notice]
    for result in ([imported] if existing else [listed, imported]):
        one_line_error(result.returncode, result.stderr)
        assert "read-only" in result.stderr or "cannot open" in result.stderr, result.stderr
    assert state(folder) == before


@pytest.mark.skipif(sys.platform != "linux", reason="uses Linux capabilities when run as root")
def test_a_read_only_file_in_a_read_only_folder_is_read_by_every_read_command(
        good_db: tuple[Path, str], tmp_path: Path, read_only: Callable[[Path, int], None]) -> None:
    db, session_id = good_db
    folder = tmp_path / "ro"
    folder.mkdir()
    target = Path(shutil.copy(db, folder / "wb.db"))
    read_only(target, 0o444)
    read_only(folder, 0o555)
    before = state(folder)
    reads = unprivileged(["sessions", "--db", target, "--json"], ["inspect", "--db", target, session_id, "--json"],
                         ["export", "--db", target, session_id, "--format", "markdown"],
                         ["history", "--db", target, session_id])
    writes = unprivileged(["pin", "--db", target, session_id, "1"], ["undo", "--db", target, session_id],
                          ["import", "--db", target, SHORT])
    for result in reads:
        assert result.returncode == 0, result.stderr
        assert "opened for reading only" in result.stderr and "internal error" not in result.stderr
    assert session_id in reads[0].stdout
    for result in writes:
        one_line_error(result.returncode, result.stderr)
        assert "read-only" in result.stderr, result.stderr
    assert state(folder) == before


# --- a damaged page -----------------------------------------------------------------------


READS = {"sessions", "inspect", "export"}


def test_a_damaged_page_is_reported_and_never_written(good_db: tuple[Path, str], tmp_path: Path) -> None:
    """One 4 KiB page overwritten with random bytes, at 20 random places of a real database: each command
    either fails with one line saying the file is damaged, or (reading) works and says it read a damaged
    file read-only; the folder is byte for byte as it was."""
    db, session_id = good_db
    data = db.read_bytes()
    page = 4096
    rng = random.Random(SEED)
    chosen = sorted(rng.sample(range(1, len(data) // page), 20))  # page 0 holds the header: see the tests above
    worked: dict[str, int] = {}
    for number in chosen:
        folder = tmp_path / f"page{number}"
        folder.mkdir()
        damaged = folder / "wb.db"
        damaged.write_bytes(data[:number * page] + rng.randbytes(page) + data[(number + 1) * page:])
        before = state(folder)
        for args in commands(session_id):
            result = in_process([args[0], "--db", damaged, *args[1:]])
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            if result.returncode == 0:
                assert args[0] in READS, f"page {number}: {args[0]} succeeded on a damaged database"
                assert lines[-1:] == [line for line in lines if line.startswith("workbench: warning: ")], lines
                assert "is damaged" in lines[-1] and "workbench db recover" in lines[-1], lines
                worked[args[0]] = worked.get(args[0], 0) + 1
            else:
                one_line_error(result.returncode, result.stderr)
                assert "is damaged" in result.stderr and "workbench db recover" in result.stderr, result.stderr
            assert state(folder) == before, f"page {number}: {args[0]} changed the folder"
    assert worked.get("sessions", 0) > 0, "a damaged database can still be listed read-only"


def test_recover_copies_what_can_be_read(good_db: tuple[Path, str], tmp_path: Path) -> None:
    db, session_id = good_db
    data = bytearray(db.read_bytes())
    page = 4096
    middle = len(data) // page // 2
    data[middle * page:(middle + 1) * page] = random.Random(SEED).randbytes(page)
    damaged = tmp_path / "wb.db"
    damaged.write_bytes(bytes(data))
    before = state(tmp_path)
    recovered = tmp_path / "recovered" / "wb.db"
    recovered.parent.mkdir()
    result = in_process(["db", "recover", damaged, recovered])
    assert result.returncode == 0, result.stderr
    assert state(tmp_path) == before
    assert in_process(["db", "check", recovered]).returncode == 0
    listed = in_process(["sessions", "--db", recovered, "--json"])
    assert listed.returncode == 0 and session_id in listed.stdout and "warning" not in listed.stderr, listed
    assert in_process(["pin", "--db", recovered, session_id, "1"]).returncode == 0, "the copy can be written"


@pytest.mark.parametrize("shell", [True, False], ids=["sqlite3-recover", "row-by-row"])
def test_both_recovery_methods_keep_the_readable_sessions(good_db: tuple[Path, str], tmp_path: Path,
                                                          shell: bool) -> None:
    """SQLite's own ``.recover`` where the ``sqlite3`` program is installed, the row-by-row copy elsewhere: each
    gives a database the workbench opens, with the session the damage did not reach."""
    db, session_id = good_db
    data = bytearray(db.read_bytes())
    page = 4096
    last = len(data) // page - 1
    data[last * page:] = random.Random(SEED).randbytes(len(data) - last * page)  # the last page: damage, not loss
    damaged = tmp_path / "wb.db"
    damaged.write_bytes(bytes(data))
    out = tmp_path / "out.db"
    result = recover(damaged, out, use_sqlite_shell=shell)
    # A sqlite3 program whose .recover does not work (builds without the dbpage table, as Debian's 3.40) is
    # passed over for the row-by-row copy.
    assert result.method == ("sqlite3 .recover" if shell and _shell_recovers(tmp_path) else "row by row")
    assert result.rows.get("sessions", 0) >= 1
    assert in_process(["db", "check", out]).returncode == 0
    listed = in_process(["sessions", "--db", out, "--json"])
    assert listed.returncode == 0 and session_id in listed.stdout, listed


def _shell_recovers(tmp_path: Path) -> bool:
    """Whether this machine's ``sqlite3`` program can ``.recover`` even a sound one-table database."""
    program = shutil.which("sqlite3")
    if program is None:
        return False
    probe = tmp_path / "probe.db"
    with sqlite3.connect(probe) as conn:
        conn.execute("CREATE TABLE t (x)")
    return subprocess.run([program, str(probe), ".recover"], capture_output=True, check=False).returncode == 0


def test_a_session_whose_stored_json_is_damaged_is_listed_as_damaged_and_every_command_works(
        good_db: tuple[Path, str], tmp_path: Path) -> None:
    """Bytes changed inside one session's stored JSON (its metadata, one of its changes), SQLite's own structure
    intact: the session is listed as damaged, it opens, and it can be deleted; no command fails."""
    db, session_id = good_db
    copy = Path(shutil.copy(db, tmp_path / "wb.db"))
    assert in_process(["pin", "--db", copy, session_id, "2"]).returncode == 0
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE sessions SET metadata = substr(metadata, 1, 20) || X'ff01' || substr(metadata, 23) "
                     "WHERE id = ?", (session_id,))
        conn.execute("UPDATE overlay_events SET data = '{\"strategy\": \"pin' WHERE session_id = ?", (session_id,))
        conn.execute("UPDATE parts SET body = '{\"kind\": \"te' WHERE rowid = (SELECT min(rowid) FROM parts "
                     "WHERE session_id = ?)", (session_id,))
        conn.execute("UPDATE parts SET body = X'78da0102' WHERE rowid = (SELECT max(rowid) FROM parts "
                     "WHERE session_id = ?)", (session_id,))  # a compressed body cut short
    conn.close()
    listed = in_process(["sessions", "--db", copy, "--json"])
    assert listed.returncode == 0, listed.stderr
    [row] = [r for r in json.loads(listed.stdout) if r["session_id"] == session_id]
    assert row["damaged"] and "metadata cannot be read" in row["damaged"]
    text = in_process(["sessions", "--db", copy])
    assert text.returncode == 0 and "[damaged: " in text.stdout, text.stderr
    for args in (["inspect", "--db", copy, session_id], ["history", "--db", copy, session_id],
                 ["export", "--db", copy, session_id]):
        result = in_process(args)
        assert result.returncode == 0, (args[0], result.stderr)
        assert "internal error" not in result.stderr
    exported = in_process(["export", "--db", copy, session_id, "--format", "jsonl"])
    assert exported.stdout.count("could not be read from the database") == 2, "each damaged part, said so"
    deleted = in_process(["sessions", "--db", copy, "--delete", session_id])

    assert deleted.returncode == 0 and not deleted.stderr.strip(), deleted.stderr
    assert integrity(copy) == []
