"""Concurrent use of one database: every write lands, and "database is locked" never reaches a user.

All of these start at the same moment on a database file that does not exist yet (so they also race
to create its schema), and each child holds every write transaction open a little longer than it
would (``FAULT_PAUSE``) to make them collide:

* a headless ``workbench run`` (a three-turn scripted session with tools, an offload and automatic
  strategies);
* ``workbench watch TRANSCRIPT --json`` following a Claude Code transcript that a thread of this test
  appends to, as Claude Code would (``watch`` reads the transcript, not the database: it is here to
  show it keeps up while the others write);
* ``workbench import TRANSCRIPT`` again and again as the transcript grows (one large transaction each);
* ``workbench pin SESSION N`` in a loop on the imported session;
* a thread of this process doing what the TUI does: ``SessionContext.load``, a pin or prune plan,
  ``apply``, now and then ``undo``, on the running session and on the imported one.

Then: every child exited 0 and none printed "locked", a traceback or an internal error; every message
the run announced is stored; the imported session has every message of the final transcript; every
plan the thread and the ``pin`` commands applied is in the overlay; ``watch`` reported every message of
the transcript; ``PRAGMA integrity_check`` passes.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fault_support import BIG_CLAUDE, CHILD, SEED, child_env, integrity, make_workspace, missing_messages, turn_script

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import undo
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.settings.config import Config
from workbench.engine.transcript.importers import import_file, parse_file
from workbench.engine.transcript.store import Store

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

PAUSE = "0.01"
IMPORTS = 4
PINS = 4


def spawn(args: list[Any], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CHILD), *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def user_errors(stderr: str) -> list[str]:
    """Lines a user would read as a failure (the child's own fault-trace lines left out)."""
    return [line for line in stderr.splitlines()
            if not line.startswith("fault-trace: ")
            and any(bad in line.lower() for bad in ("locked", "traceback", "internal error", "error:"))]


class Transcript:
    """Lines of a real Claude Code transcript, written out a few at a time."""

    def __init__(self, path: Path, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.written = 0
        path.write_text("")

    def grow(self, count: int) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            for line in self.lines[self.written : self.written + count]:
                fh.write(line)
        self.written = min(len(self.lines), self.written + count)


def tui_like_writer(db: Path, session_ids: list[str], stop: threading.Event, applied: list[str],
                    problems: list[str]) -> None:
    """Pins and prunes the way the TUI applies them: load, plan, apply (and sometimes undo)."""
    rng = random.Random(SEED)
    with Store(db) as store:
        while not stop.is_set():
            for session_id in list(session_ids):
                try:
                    ctx = SessionContext.load(store, session_id, Config())
                    if not ctx.messages:
                        continue
                    message = rng.choice(ctx.messages)
                    plan = measure(ctx, plan_action(ctx, rng.choice(["pin", "prune"]), message,
                                                    ctx.config.strategies))
                    apply(store, ctx, plan)
                    if plan.items:
                        applied.append(plan.plan_id)
                    if rng.random() < 0.2 and applied:
                        entry = undo(store, ctx)
                        if entry.plan_id in applied:
                            applied.remove(entry.plan_id)
                except WorkbenchError as exc:
                    if "locked" in str(exc) or "read-only" in str(exc):
                        problems.append(f"tui-like writer: {exc}")
                except Exception as exc:  # noqa: BLE001 - reported as a failure of the test
                    problems.append(f"tui-like writer: {type(exc).__name__}: {exc}")
            time.sleep(0.02)


def test_a_run_a_watch_imports_pins_and_a_tui_share_one_database(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    assert not db.exists()
    env = child_env(FAULT_PAUSE=PAUSE)
    script = tmp_path / "three-turns.json"
    turns = [turn_script(k)["turns"][0] for k in (1, 2, 3)]
    script.write_text(json.dumps({**turn_script(1), "turns": turns}))
    workspace = make_workspace(tmp_path / "ws")
    source = BIG_CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)[:400]
    transcript = Transcript(tmp_path / "live.jsonl", source)
    transcript.grow(100)

    run = spawn(["run", "--db", db, "--scripted", script, "--yes", "--json", "--workspace", workspace], env)
    watch = spawn(["watch", transcript.path, "--json", "--interval", "0.05"], env)
    finished: list[subprocess.CompletedProcess[str]] = []
    pinned: list[int] = []
    """Positions the pin commands pinned (a message already pinned is "nothing to do")."""
    imported: list[str] = []

    def importer() -> None:
        for _ in range(IMPORTS):
            result = subprocess.run([sys.executable, str(CHILD), "import", "--db", str(db), str(transcript.path),
                                     "--json"], env=env, capture_output=True, text=True, timeout=120)
            finished.append(result)
            if result.returncode == 0 and not imported:
                imported.append(json.loads(result.stdout)["session_id"])
            transcript.grow(100)

    def pinner() -> None:
        while not imported:
            time.sleep(0.05)
        for n in range(1, PINS + 1):
            result = subprocess.run([sys.executable, str(CHILD), "pin", "--db", str(db), imported[0], str(n * 7),
                                     "--json"], env=env, capture_output=True, text=True, timeout=120)
            finished.append(result)
            if result.returncode == 0 and json.loads(result.stdout)["plans"][0]["items"]:
                pinned.append(n * 7)

    threads = [threading.Thread(target=importer), threading.Thread(target=pinner)]
    for thread in threads:
        thread.start()
    # The TUI-like writer, once there are sessions to work on.
    sessions: list[str] = []
    stop = threading.Event()
    applied: list[str] = []
    problems: list[str] = []
    deadline = time.monotonic() + 60
    while not (db.exists() and imported) and time.monotonic() < deadline:
        time.sleep(0.02)
    sessions.extend(imported)
    tui = threading.Thread(target=tui_like_writer, args=(db, sessions, stop, applied, problems))
    tui.start()
    run_out, run_err = run.communicate(timeout=120)
    for thread in threads:
        thread.join(120)
    run_session = json.loads(run_out.splitlines()[0])["session_id"]
    sessions.append(run_session)
    time.sleep(0.3)
    stop.set()
    tui.join(60)
    time.sleep(0.3)  # let watch read the last lines
    watch.send_signal(signal.SIGINT)
    watch_out, watch_err = watch.communicate(timeout=30)

    # Nobody saw a lock, a traceback or an error.
    assert run.returncode == 0, run_err
    assert watch.returncode == 0, watch_err
    for result in finished:
        assert result.returncode == 0, result.stderr
    complaints = user_errors(run_err) + user_errors(watch_err) + [e for r in finished for e in user_errors(r.stderr)]
    assert complaints == [] and problems == [], complaints + problems
    assert len(finished) == IMPORTS + PINS
    # Every write landed.
    assert integrity(db) == []
    announced = [json.loads(line)["message_id"] for line in run_out.splitlines()
                 if json.loads(line)["type"] == "message"]
    assert missing_messages(db, announced) == []
    with Store(db) as store:
        run_messages = store.load_messages(run_session)
        assert run_messages[-1].text == "Turn 3 done."
        events = {e.plan_id for e in store.load_overlay(imported[0])} | {
            e.plan_id for e in store.load_overlay(run_session)}
        assert set(applied) <= events, "a plan the TUI-like writer applied is missing"
        messages = store.load_messages(imported[0])
        pins = {e.message_id for e in store.load_overlay(imported[0]) if e.action == "pin"}  # undone ones too
        assert pinned and {messages[n - 1].id for n in pinned} <= pins
        final_import = parse_file(transcript.path)
        stored_ids = {m.id for m in store.load_messages(imported[0])}
        assert {m.id for m in final_import.messages} <= stored_ids
    # watch kept up with the transcript.
    seen = {i for line in watch_out.splitlines() for i in json.loads(line).get("new", [])}
    assert {m.id for m in final_import.messages} <= seen
    assert applied, "the TUI-like writer applied nothing"


def _open(path: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        Store(path).close()
    except Exception as exc:  # noqa: BLE001 - the parent reports it
        results.put(f"{type(exc).__name__}: {exc}")
    else:
        results.put(None)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_processes_creating_the_same_new_database_at_once(tmp_path: Path) -> None:
    """Four processes open a database that does not exist yet, at the same instant, ten times over."""
    fork = multiprocessing.get_context("fork")
    failures: list[str] = []
    for n in range(10):
        path = str(tmp_path / f"new{n}.db")
        barrier, results = fork.Barrier(4), fork.Queue()
        processes = [fork.Process(target=_open, args=(path, barrier, results)) for _ in range(4)]
        for process in processes:
            process.start()
        failures += [r for r in (results.get(timeout=60) for _ in processes) if r]
        for process in processes:
            process.join(30)
        with Store(path) as store:
            assert store.integrity_check() == "ok"
    assert failures == []


def test_a_write_waits_for_a_lock_held_elsewhere(tmp_path: Path) -> None:
    """A writer holding the lock for a second (as a long import would) delays a pin; it does not fail it."""
    db = tmp_path / "wb.db"
    with Store(db) as store:
        session_id = import_file(store, BIG_CLAUDE).session.id
    holder = Store(db)
    holder._conn.execute("BEGIN IMMEDIATE")
    threading.Timer(1.0, holder._conn.commit).start()
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(CHILD), "pin", "--db", str(db), session_id, "3"], env=child_env(),
                            capture_output=True, text=True, timeout=60)
    holder.close()
    assert result.returncode == 0, result.stderr
    assert "locked" not in result.stderr
    assert time.monotonic() - started >= 1.0
