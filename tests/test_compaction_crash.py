"""Crash safety: a process applying a compaction is killed (SIGKILL) at random points, many times.

Each time the database must open, pass ``PRAGMA integrity_check``, and hold the session either
fully before the compaction or fully after it: marker, summary, overlay events and snapshot all
there or all absent, and the projection equal to one of the two. The child sleeps briefly between
its writes so that many kills land inside the transaction, not only before or after it.

``WORKBENCH_CRASH_RUNS`` sets how many kills (default 30); ``WORKBENCH_CRASH_SEED`` the seed.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import shutil
import signal
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from compaction_helpers import fingerprint, load, long_session, preview
from helpers import sqlite_db

from workbench.engine.plans import compaction as compaction_module
from workbench.engine.plans.compaction import CompactionPreview, Compactor
from workbench.engine.transcript.store import Store

RUNS = int(os.environ.get("WORKBENCH_CRASH_RUNS", "30"))
SEED = int(os.environ.get("WORKBENCH_CRASH_SEED", "20250601"))
PAUSE = 0.004
"""Seconds the child sleeps around each write of the apply, widening the window a kill can hit."""

pytestmark = pytest.mark.skipif(sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods(),
                                reason="needs fork and SIGKILL")


def _slowed(function: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        time.sleep(PAUSE)
        result = function(*args, **kwargs)
        time.sleep(PAUSE)
        return result

    return wrapper


def _apply_in_child(db: str, session_id: str, plan_json: str, conn: Connection) -> None:
    """The child: load the session, say ready, apply the plan (slowly), say done."""
    Store.save_messages = _slowed(Store.save_messages)  # type: ignore[method-assign]
    Store.add_overlay_events = _slowed(Store.add_overlay_events)  # type: ignore[method-assign]
    compaction_module.save_checkpoint = _slowed(compaction_module.save_checkpoint)  # type: ignore[attr-defined]
    store = Store(db)
    ctx = load(store, session_id)
    plan = CompactionPreview.model_validate_json(plan_json)
    conn.send("ready")
    asyncio.run(Compactor(store, ctx).apply(plan))
    conn.send("done")


def _state(db: Path, session_id: str, plan: CompactionPreview) -> tuple[str, tuple[Any, ...]]:
    """"before" or "after", after checking the database is whole and the session consistent."""
    with Store(db) as store:
        assert store.integrity_check() == "ok"
        events = [e for e in store.load_overlay(session_id) if e.plan_id == plan.plan_id]
        ids = {m.id for m in store.load_messages(session_id)}
        written = {f"{plan.plan_id}-marker", f"{plan.plan_id}-summary"} & ids
        snapshots = sqlite_db(store).execute("SELECT COUNT(*) FROM snapshots WHERE session_id = ?", [session_id]).fetchone()[0]
        parts = (len(events), len(written), snapshots)
        assert parts in ((0, 0, 0), (2 + len(plan.pair_pins), 2, 1)), f"half a compaction: {parts}"
        view = fingerprint(load(store, session_id).view())
    return ("after" if parts[0] else "before"), view


def test_a_killed_apply_leaves_the_session_before_or_after(tmp_path: Path) -> None:
    template = tmp_path / "template.db"
    with Store(template) as store:
        session_id = long_session(turns=30, words=200, pins=(3,)).save(store)
        ctx = load(store, session_id)
        before = fingerprint(ctx.view())
        plan = preview(store, ctx)
    plan_json = plan.model_dump_json()
    fork = multiprocessing.get_context("fork")

    def attempt(number: int, delay: float | None) -> tuple[str, float]:
        db = tmp_path / f"run{number}.db"
        shutil.copy(template, db)
        parent, child = fork.Pipe()
        process = fork.Process(target=_apply_in_child, args=(str(db), session_id, plan_json, child), daemon=True)
        process.start()
        assert parent.poll(60) and parent.recv() == "ready"
        started = time.perf_counter()
        if delay is None:  # the reference run: let it finish
            assert parent.poll(60) and parent.recv() == "done"
            process.join(30)
            return "done", time.perf_counter() - started
        time.sleep(delay)
        try:
            os.kill(process.pid or 0, signal.SIGKILL)
        except ProcessLookupError:  # it had already finished
            pass
        process.join(30)
        assert not process.is_alive()
        return "killed", delay

    _, duration = attempt(0, None)
    state, after = _state(tmp_path / "run0.db", session_id, plan)
    assert state == "after" and after != before
    rng = random.Random(SEED)
    outcomes: list[str] = []
    for number in range(1, RUNS + 1):
        # Spread the kills over the whole apply (and a little past it), at random points within each slice.
        delay = duration * 1.2 * (number - 1 + rng.random()) / RUNS
        attempt(number, delay)
        state, view = _state(tmp_path / f"run{number}.db", session_id, plan)
        assert view == (after if state == "after" else before), f"run {number}: the view is neither before nor after"
        outcomes.append(state)
    if RUNS >= 10:
        assert "before" in outcomes and "after" in outcomes, outcomes
