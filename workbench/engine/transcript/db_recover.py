"""``workbench db recover PATH OUT``: what can still be read from a damaged database, into a new file.

The damaged file is never opened for writing: it is copied first (with its write-ahead log), and the
copy is read. SQLite's own recovery (the ``sqlite3`` shell's ``.recover``, which reads page by page
and keeps rows whose tree is broken) is used where that program is installed; otherwise each table is
copied in windows of rows, and a window that cannot be read is skipped.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from workbench.engine.errors import StoreError
from workbench.engine.transcript.db_health import read_only_connection

WINDOW = 500
MAX_SKIPS = 400
RECOVER_TIMEOUT = 3600.0


@dataclass
class Recovered:
    method: str
    rows: dict[str, int] = field(default_factory=dict)
    skipped_windows: int = 0


def recover(path: Path, out: Path, *, use_sqlite_shell: bool = True) -> Recovered:
    if not path.is_file():
        raise StoreError(f"{path}: no such database file")
    if out.exists():
        raise StoreError(f"{out} already exists; give the name of a new file")
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    shell = shutil.which("sqlite3") if use_sqlite_shell else None
    with tempfile.TemporaryDirectory(prefix="workbench-recover-") as tmp:
        copy = Path(tmp) / "damaged.db"
        shutil.copyfile(path, copy)
        for suffix in ("-wal",):
            if Path(f"{path}{suffix}").is_file():
                shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
        result = _with_shell(shell, copy, partial) if shell else None
        if result is None:  # no sqlite3 shell, or one whose .recover does not work (some builds lack it)
            partial.unlink(missing_ok=True)
            result = _by_windows(copy, partial)
    result.rows = _counts(partial)
    partial.replace(out)
    return result


def _with_shell(shell: str, copy: Path, partial: Path) -> Recovered | None:
    """SQLite's ``.recover``; None if it failed (the caller then copies row by row)."""
    try:
        dump = subprocess.run([shell, str(copy), ".recover"], capture_output=True, timeout=RECOVER_TIMEOUT,
                              check=False)
        if dump.returncode != 0 or b"sql error" in dump.stdout[:4096].lower() or b"error" in dump.stderr.lower():
            return None
        load = subprocess.run([shell, str(partial)], input=dump.stdout, capture_output=True,
                              timeout=RECOVER_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if load.returncode != 0 or not partial.is_file() or "sessions" not in _counts(partial):
        return None
    return Recovered(method="sqlite3 .recover")


def _by_windows(copy: Path, partial: Path) -> Recovered:
    from workbench.engine.transcript.store import Store  # the new file gets the current schema

    Store(partial).close()
    source = read_only_connection(copy)
    target = sqlite3.connect(partial)
    result = Recovered(method="row by row")
    try:
        target.execute("PRAGMA foreign_keys = OFF")  # a message may be lost while its parts were read
        tables = [r[0] for r in target.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name != 'schema_version'")]
        for table in tables:
            result.skipped_windows += _copy_table(source, target, table)
        target.commit()
    finally:
        source.close()
        target.close()
    return result


def _copy_table(source: sqlite3.Connection, target: sqlite3.Connection, table: str) -> int:
    wanted = [r[1] for r in target.execute(f'PRAGMA table_info("{table}")')]
    try:
        present = {r[1] for r in source.execute(f'PRAGMA table_info("{table}")')}
    except sqlite3.DatabaseError:
        return 1
    columns = [c for c in wanted if c in present]
    if not columns:
        return 0
    names = ", ".join(f'"{c}"' for c in columns)
    insert = f'INSERT OR IGNORE INTO "{table}" (rowid, {names}) VALUES ({", ".join("?" * (len(columns) + 1))})'
    last, jump, skips = -(2**63), 1, 0
    while skips < MAX_SKIPS:
        try:
            rows = source.execute(f'SELECT rowid, {names} FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT ?',
                                  (last, WINDOW)).fetchall()
        except sqlite3.DatabaseError:
            skips += 1
            last = max(last, 0) + jump  # past the damaged part, further each time
            jump = min(jump * 4, 2**40)
            continue
        if not rows:
            break
        target.executemany(insert, rows)
        last, jump = rows[-1][0], 1
    return skips


def _counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%'")]
        return {t: int(conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]) for t in tables}
    finally:
        conn.close()
