"""The proxy as a real process on a real database, while storage falters: another program holds the write
lock for 20 s, the database turns read-only, the proxy is stopped with writes queued, two proxies share the
database. Every request whose answer reached the client is stored and readable afterwards, or is named in a
line that said it was not; ``workbench db check`` finds no damage and ``workbench requests`` reads them all.

Running as root, read-only is made real by running the proxy without ``CAP_DAC_OVERRIDE`` / ``CAP_FOWNER``
(as ``test_fault_database`` does). The proxy is stopped with SIGINT here: draining on SIGTERM and SIGHUP is
the server's part; :func:`test_closing_stores_every_queued_write` drives :meth:`Recorder.close` directly.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from fault_support import CHILD, child_env, cli
from loopback_api import LoopbackAPI, Reply, text
from test_fault_database import _drop_privileges

from workbench.engine.transcript.store import Store
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import Answer

AGENT = "ffffffff-2222-3333-4444-555555555555"
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="drops Linux capabilities when run as root")


def body(last: str, session: str | None = AGENT) -> dict[str, Any]:
    meta = {"metadata": {"user_id": json.dumps({"session_id": session})}} if session else {}
    return {"model": "claude-opus-4-6", "max_tokens": 64, **meta, "messages": [
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": [text("hi")]},
        {"role": "user", "content": last}]}


@dataclass
class ProxyProcess:
    process: subprocess.Popen[str]
    url: str
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    def send(self, last: str, session: str | None = AGENT) -> int:
        answer = httpx2.post(f"{self.url}/v1/messages", json=body(last, session), timeout=60,
                            headers={"x-api-key": "sk-test", "anthropic-version": "2023-06-01"})
        return answer.status_code

    def stop(self) -> int:
        """Stopped with Ctrl-C; 0 once the server's own signal handling says stopping is a success, 130 before."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(120)
        return 0 if code == 130 else code


@contextmanager
def proxy_process(db: Path, upstream: str, *, unprivileged: bool = False) -> Iterator[ProxyProcess]:
    """``workbench proxy --headless`` in a child, on a free port; its lines are gathered as they come."""
    preexec: Callable[[], None] | None = _drop_privileges if unprivileged and os.geteuid() == 0 else None
    process = subprocess.Popen(
        [sys.executable, str(CHILD), "--db", str(db), "proxy", "--headless", "--port", "0", "--upstream", upstream],
        env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        preexec_fn=preexec)  # noqa: PLW1509 - only drops capabilities (prctl) before exec
    assert process.stdout is not None and process.stderr is not None
    ready = process.stdout.readline()
    assert ready.startswith("workbench proxy on "), ready + process.stderr.read()
    running = ProxyProcess(process, ready.split()[3])
    readers = [threading.Thread(target=lambda: running.out.extend(process.stdout or ()), daemon=True),
               threading.Thread(target=lambda: running.err.extend(process.stderr or ()), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for reader in readers:
            reader.join(10)


def replies(api: LoopbackAPI, n: int) -> None:
    api.queue(*[Reply([text("ok")]) for _ in range(n)])


def stored_lasts(db: Path) -> dict[str, list[str]]:
    """The last user message of every stored request, by session, each read back through ``requests``."""
    with Store(db) as store:
        sessions = [s.id for s, _ in store.list_sessions() if s.source_format == "proxy"]
        seqs = {s: [r[0] for r in store.connection.execute("SELECT seq FROM requests WHERE session_id = ? "
                                                             "ORDER BY seq", [s])] for s in sessions}
    out: dict[str, list[str]] = {}
    for session, numbers in seqs.items():
        for seq in numbers:
            shown = cli(["--db", db, "requests", session, str(seq)])
            assert shown.returncode == 0, shown.stderr
            out.setdefault(session, []).append(json.loads(shown.stdout)["messages"][-1]["content"])
    return out


def undamaged(db: Path) -> None:
    checked = cli(["--db", db, "db", "check"])
    assert checked.returncode == 0 and "no damage" in checked.stdout + checked.stderr, checked


def hold_lock(db: Path, seconds: float) -> threading.Thread:
    ready = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        ready.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
        conn.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    ready.wait(10)
    return holder


def test_a_write_lock_held_for_twenty_seconds_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    sent = [f"request {n}" for n in range(12)]
    with LoopbackAPI() as api, proxy_process(db, api.url) as proxy:
        replies(api, len(sent))
        assert proxy.send(sent[0]) == 200
        time.sleep(1.0)
        holder = hold_lock(db, 20.0)
        for last in sent[1:]:
            assert proxy.send(last) == 200, "answered while the lock is held"
            time.sleep(1.0)
        holder.join()
        assert proxy.stop() == 0
    said = "".join(proxy.err)
    assert "locked by another program" in said and "nothing is lost" in said, said
    assert not any("not stored" in line for line in proxy.out)
    undamaged(db)
    assert list(stored_lasts(db).values()) == [sent]


def test_a_database_made_read_only_says_what_is_not_stored_and_marks_the_session(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api, proxy_process(db, api.url, unprivileged=True) as proxy:
        replies(api, 9)
        for n in range(3):
            assert proxy.send(f"before {n}") == 200
        time.sleep(1.0)
        mode = db.stat().st_mode & 0o777
        db.chmod(0o444)
        try:
            for n in range(3):
                assert proxy.send(f"read-only {n}") == 200, "the request still goes through"
            time.sleep(1.0)
        finally:
            db.chmod(mode)
        for n in range(3):
            assert proxy.send(f"after {n}") == 200
        time.sleep(1.0)
        assert proxy.stop() == 0
    said = "".join(proxy.err)
    assert said.count("not storing requests") == 1 and "read-only" in said, said
    assert "storing requests again" in said
    not_stored = [line for line in proxy.out if "not stored" in line]
    assert len(not_stored) == 3, proxy.out
    undamaged(db)
    [(session, lasts)] = stored_lasts(db).items()
    assert lasts == ["before 0", "before 1", "before 2", "after 0", "after 1", "after 2"]
    with Store(db) as store:
        mark = store.get_session(session).metadata["incomplete"]
    assert mark["after_seq"] == 3 and "read-only" in mark["reason"]


def test_a_proxy_refuses_a_database_it_could_not_write_in_one_line(tmp_path: Path) -> None:
    """An unwritable ``-shm`` ended the proxy with SIGBUS; now it is refused before anything is served."""
    db = tmp_path / "proxy.db"
    Store(db).close()
    shm = db.with_name(db.name + "-shm")
    shm.write_bytes(b"")
    shm.chmod(0o444)
    preexec: Callable[[], None] | None = _drop_privileges if os.geteuid() == 0 else None
    done = subprocess.run([sys.executable, str(CHILD), "--db", str(db), "proxy", "--headless", "--port", "0"],
                          env=child_env(), capture_output=True, text=True, timeout=60, preexec_fn=preexec)
    assert done.returncode == 1, (done.returncode, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert "not writable" in line and str(shm) in line


def test_closing_stores_every_queued_write(tmp_path: Path) -> None:
    """200 requests queued behind another program's lock, then the proxy stops: all of them are stored."""
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    first = recorder.prepare(orjson.dumps(body("first")))
    recorder.finish(first, 200, Answer(blocks=[text("ok")], complete=True))
    recorder.flush()
    holder = hold_lock(db, 5.0)
    for n in range(200):
        exchange = recorder.prepare(orjson.dumps(body(f"queued {n}", session=None)))
        recorder.finish(exchange, 200, Answer(blocks=[text("ok")], complete=True))
    assert recorder.waiting() > 150
    recorder.close()
    holder.join()
    undamaged(db)
    with Store(db) as store:
        count = store.connection.execute("SELECT count(*) FROM requests").fetchone()[0]
    assert count == 201


def test_two_proxies_on_one_database_store_every_request_and_overwrite_none(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    per_proxy = 200
    with LoopbackAPI() as api, proxy_process(db, api.url) as one:
        replies(api, 2 * per_proxy + 1)
        assert one.send("first") == 200
        time.sleep(1.0)
        with proxy_process(db, api.url) as two:
            def drive(proxy: ProxyProcess, name: str) -> list[int]:
                return [proxy.send(f"{name} {n}") for n in range(per_proxy)]

            with ThreadPoolExecutor(2) as pool:
                statuses: list[Callable[[], list[int]]] = [pool.submit(drive, one, "one").result,
                                                           pool.submit(drive, two, "two").result]
                assert all(s == 200 for result in statuses for s in result())
            assert two.stop() == 0
        assert one.stop() == 0
    undamaged(db)
    [lasts] = stored_lasts(db).values()
    expected = ["first", *[f"{name} {n}" for name in ("one", "two") for n in range(per_proxy)]]
    assert sorted(lasts) == sorted(expected), "every request stored once, none overwritten"
