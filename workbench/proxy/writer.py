"""The proxy's one writer: what it has to store waits here, in order, until the database takes it.

A request goes upstream whatever happens to storage. Writes wait in a bounded queue on one thread. While
another program holds the database's write lock, the writer keeps each write and tries again, saying so
once (a warning line, and :attr:`StoreWriter.notice` for the app): a lock of any length loses nothing.
When storage is gone for good (read-only, deleted, full), each write that cannot be made is given up with
its reason, said once in a line, and the caller marks what it lost. A full queue (storage far behind)
gives up the new write the same way instead of holding unbounded memory.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.store import Store

Warn = Callable[[str], None]
MAX_WAITING = 10_000
"""Writes held at most while storage is behind."""
MAX_WAITING_BYTES = 512 * 1024 * 1024
"""Bytes of request bodies held at most while storage is behind."""
LOCK_WAIT = 1.0
"""Seconds one attempt waits for another program's lock before the writer says it waits, and tries again."""
RETRY_PAUSE = 0.2


@dataclass
class Job:
    """One write: ``run`` writes it with the writer's store; ``lost`` hears why it never will be."""

    run: Callable[[Store], None]
    lost: Callable[[str], None]
    size: int = 0


def check_writable(path: Path) -> None:
    """Refuse, in one line, a database the proxy could not write: SQLite maps ``-shm``, and an unwritable one
    ended the process with SIGBUS instead of an error."""
    if str(path) == ":memory:":
        return
    folder = path.parent if path.parent.exists() else None
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and not os.access(file, os.R_OK | os.W_OK):
            raise WorkbenchError(f"cannot store proxied requests: {file} is not writable; make it writable "
                                 "or use --db to pick another database")
        if not file.exists() and folder is not None and not os.access(folder, os.W_OK | os.X_OK):
            raise WorkbenchError(f"cannot store proxied requests: the folder {folder} is not writable (the "
                                 f"database needs {file.name} beside it); use --db to pick another database")


def _locked(exc: BaseException) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


class StoreWriter:
    """One thread, one connection, a bounded queue; see the module docstring."""

    def __init__(self, db_path: Path, warn: Warn | None = None) -> None:
        self.db_path = db_path
        self.warn = warn
        self.notice: str | None = None
        """What the app shows about storage now (None: all is being stored)."""
        self.gone: str | None = None
        """Why storage refuses writes, while it does."""
        self._queue: deque[Job] = deque()
        self._bytes = 0
        self._busy = False
        self._closing = False
        self._changed = threading.Condition()
        self._store: Store | None = None
        self._inode = self._identity()
        self._thread = threading.Thread(target=self._run, name="workbench-proxy-store", daemon=True)
        self._thread.start()

    def _identity(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.db_path)
        except OSError:
            return None
        return stat.st_dev, stat.st_ino

    # --- from any thread ---------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Queue ``job``; when the queue is full or closed, it is lost at once (and said so)."""
        with self._changed:
            full = len(self._queue) >= MAX_WAITING or self._bytes + job.size > MAX_WAITING_BYTES
            if not (full or self._closing):
                self._queue.append(job)
                self._bytes += job.size
                self._changed.notify_all()
                return
            waiting = len(self._queue)
        reason = "the proxy is stopping" if not full else f"storage is {waiting:,} writes behind"
        self._say(f"not storing a request: {reason}")
        job.lost(reason)

    def waiting(self) -> int:
        with self._changed:
            return len(self._queue) + int(self._busy)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is written or given up (False: ``timeout`` passed first)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self, last: Callable[[Store], None] | None = None) -> None:
        """Write everything queued, then ``last``, then fold the WAL back into the database (it is left empty,
        not megabytes beside the file) and close."""
        if last is not None:
            self.submit(Job(run=last, lost=lambda _: None))
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join()
        if self._store is not None:
            try:
                self._store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:  # another reader keeps the WAL in use; SQLite folds it in later
                pass
            self._store.close()
            self._store = None

    # --- on the writer thread ------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queue) or self._closing)
                if not self._queue:
                    return
                job = self._queue.popleft()
                self._bytes -= job.size
                self._busy = True
            try:
                self._write(job)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _write(self, job: Job) -> None:
        waited = 0.0
        while True:
            problem = self._missing()
            if problem is None:
                try:
                    job.run(self._open())
                except (WorkbenchError, sqlite3.Error, OSError) as exc:
                    if _locked(exc):
                        waited = self._wait_for_lock(waited)
                        continue
                    problem = str(exc)
                except Exception as exc:  # noqa: BLE001 - a write that fails must not stop the writer; reported
                    problem = f"{type(exc).__name__}: {exc}"
                    job.lost(problem)
                    self._say(f"could not store a request: {problem}")
                    return
            if problem is not None:
                self._lost(job, problem)
                return
            self._stored(waited)
            return

    def _wait_for_lock(self, waited: float) -> float:
        if not waited:
            self.notice = "the database is locked by another program: requests wait to be stored"
            self._say(f"{self.db_path} is locked by another program; requests wait to be stored (nothing is lost)")
        time.sleep(RETRY_PAUSE)
        return waited + LOCK_WAIT + RETRY_PAUSE

    def _stored(self, waited: float) -> None:
        if waited:
            self._say(f"{self.db_path} is free again after {waited:.0f} s; storing the {self.waiting()} waiting "
                      "requests")
        if self.gone is not None:
            self._say(f"storing requests again in {self.db_path}")
        self.gone = None
        self.notice = None

    def _lost(self, job: Job, problem: str) -> None:
        if self.gone != problem:
            self._say(f"not storing requests ({problem}); they still go through, and their sessions are marked "
                      "incomplete")
        self.gone = problem
        self.notice = f"requests are not being stored: {problem}"
        if self._store is not None and "deleted" in problem:
            self._store.close()
            self._store = None
        job.lost(problem)

    def _missing(self) -> str | None:
        """Why the database cannot be written now, as far as the file shows it (None: it looks writable)."""
        identity = self._identity()
        if self._inode is not None and identity != self._inode:
            return f"{self.db_path} was deleted or replaced"
        if identity is not None and not os.access(self.db_path, os.W_OK):
            return f"{self.db_path} is read-only"
        return None

    def _open(self) -> Store:
        if self._store is None:
            self._store = Store(self.db_path)
            self._store.be_brief(LOCK_WAIT)
            if self._inode is None:
                self._inode = self._identity()
        return self._store

    def _say(self, text: str) -> None:
        if self.warn is not None:
            self.warn(text)
