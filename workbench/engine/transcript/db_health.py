"""Telling a damaged database from a healthy one, without writing to it.

A database is checked with ``PRAGMA quick_check`` when it is opened (cut short after
:data:`CHECK_SECONDS` on a big file: an unfinished check is no verdict) and again, in full, after
SQLite reports it malformed. A damaged database is opened read-only (see :func:`read_only_connection`)
and never written; :mod:`workbench.engine.transcript.db_recover` makes a usable copy of what can be read.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from workbench.engine.errors import StoreError

CHECK_SECONDS = 1.0
"""How long the check on opening may take; a bigger file is checked in part (SQLite reads ~1 GB/s)."""
FULL_CHECK_SECONDS = 30.0
"""How long the check may take once SQLite has said the database is malformed."""
SQLITE_HEADER = b"SQLite format 3\x00"
_TREE = re.compile(r"Tree (\d+) page (\d+)")


def is_damage(exc: BaseException) -> bool:
    """Whether SQLite's error says the file itself is damaged (not locked, not read-only, not foreign)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "corrupt" in text)


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.absolute()))}?{query}"


def read_only_connection(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path`` and leaves no files beside it: ``immutable`` when there is no
    write-ahead log to read (nothing else is looked at), else ``mode=ro`` over the log that is there."""
    wal = Path(f"{path}-wal")
    has_log = wal.exists() and wal.stat().st_size > 0
    uri = _uri(path, mode="ro") if has_log else _uri(path, mode="ro", immutable="1")
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    return conn


def quick_check(conn: sqlite3.Connection, seconds: float) -> list[str] | None:
    """What ``PRAGMA quick_check`` finds wrong (empty: nothing); None if it did not finish in ``seconds``.

    A timer interrupts it rather than a progress handler: a handler is Python called from SQLite a hundred
    times a check, each call waiting for the interpreter, which the app's first screen holds while a
    session opens (a 0.1 s check took up to 0.35 s that way)."""
    timer = threading.Timer(seconds, _interrupt, (conn,))
    timer.daemon = True
    timer.start()
    try:
        rows = conn.execute("PRAGMA quick_check(20)").fetchall()
    except sqlite3.OperationalError as exc:
        if "interrupt" in str(exc):
            return None
        raise
    finally:
        timer.cancel()
    found = [str(r[0]) for r in rows]
    return [] if found == ["ok"] else found


def _interrupt(conn: sqlite3.Connection) -> None:
    try:
        conn.interrupt()
    except sqlite3.ProgrammingError:  # closed meanwhile: the check had finished
        pass


def damage(path: Path, seconds: float = CHECK_SECONDS) -> str | None:
    """What is damaged in the database at ``path``, in one phrase; None if the check found nothing (or could
    not finish, or the file is not a database at all: the store says so in its own words)."""
    if str(path) == ":memory:" or not path.is_file():
        return None
    try:
        conn = read_only_connection(path)
    except sqlite3.Error:
        return None
    try:
        try:
            found = quick_check(conn, seconds)
        except sqlite3.DatabaseError as exc:
            return f"SQLite cannot read its structure: {exc}" if is_damage(exc) else None
        return _describe(conn, found) if found else None
    finally:
        conn.close()


def _describe(conn: sqlite3.Connection, found: list[str]) -> str:
    """``quick_check``'s findings as one phrase: which tables and how many problems, then the first one."""
    roots: dict[int, str] = {}
    try:
        roots = {int(r): str(n) for n, r in conn.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage")}
    except sqlite3.DatabaseError:
        pass  # the schema itself is unreadable: the page numbers are all there is to say
    found = [line.strip() for item in found for line in item.splitlines() if line.strip() and "***" not in line]
    names: list[str] = []
    for line in found:
        match = _TREE.search(line)
        if match:
            name = roots.get(int(match.group(1)), f"b-tree {match.group(1)}")
            if name not in names:
                names.append(name)
    first = found[0] if found else "no details"
    more = f"{len(found)} problems" if len(found) > 1 else "1 problem"
    where = f" in {', '.join(names[:4])}" if names else ""
    return f"{more}{where}; first: {first}"


def check_in_background(path: Path) -> Callable[[], str | None]:
    """Start :func:`damage` on ``path`` on a thread of its own and return what waits for its verdict. SQLite
    lets go of the interpreter while it reads the file, so the caller's own work (loading the app's modules,
    a few hundred milliseconds) goes on meanwhile instead of after it."""
    verdict: list[str | None] = []
    thread = threading.Thread(target=lambda: verdict.append(damage(path)), name="workbench-db-check", daemon=True)
    thread.start()

    def wait() -> str | None:
        thread.join()
        if not verdict:  # the check itself failed: no verdict, as when it cannot finish in time
            return None
        return verdict[0]

    return wait


def damaged_message(path: Path, what: str, *, opened: bool = True) -> str:
    """The one line a user reads about a damaged database: what, and how to get a usable copy."""
    state = "it is opened read-only and will not be written" if opened else "nothing was changed"
    return (f"{path} is damaged ({what}); {state}. Recover what can be read into a new file with "
            f"`workbench db recover {path} RECOVERED.db`, then use --db RECOVERED.db")


def header_problem(path: Path) -> str | None:
    """Why SQLite refused ``path``, read from its header, when the header says: a page size SQLite never
    writes is damage, not a foreign file. Only called once SQLite has refused the file: reading it with
    ``open()`` while a connection of this process held it would drop that connection's locks."""
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError:
        return None
    if len(header) < 100 or not header.startswith(SQLITE_HEADER):
        return None  # not SQLite: the store says so in its own words
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):  # a power of two from 512 to 65536, or the header is damaged
        return (f"{path} is damaged: its header gives a page size of {page:,} bytes, which SQLite never writes; "
                f"recover what can be read with `workbench db recover {path} RECOVERED.db`, or restore it "
                "from a backup")
    return None


def whole_pages(path: Path, conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn``, unless ``path`` is cut short of a whole page (then it is closed and the file refused): a
    truncated file is refused whether or not the check on opening also found damage in what is left."""
    try:
        check_size(path, conn)
    except StoreError:
        conn.close()
        raise
    return conn


def check_size(path: Path, conn: sqlite3.Connection) -> None:
    """Refuse a database file cut short of a whole page, which SQLite itself would read as zeros.

    The page size is asked of SQLite, not read from the file here: closing any descriptor of a file
    drops every POSIX lock this process holds on it, so reading the header with ``open()`` while
    another connection of this process had the database open (the proxy holds two) let another
    process take the database for unused and delete its write-ahead log under it."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if size < 100:
        return  # empty (a new database), or too short to be one: SQLite says which
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # reads the header: refuses a file that is not SQLite
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    except sqlite3.DatabaseError:
        problem = header_problem(path)  # SQLite refused the file: nothing here holds it open
        if problem is not None:
            raise StoreError(problem) from None
        return  # not SQLite (or locked): opening it says so
    if page and size % page:
        raise StoreError(f"{path} is truncated ({size:,} bytes is not a whole number of {page:,}-byte pages); "
                         "restore it from a backup or use --db to pick another file")
