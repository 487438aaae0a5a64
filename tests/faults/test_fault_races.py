"""Changes to one session racing each other from separate processes: each lands once or is refused.

Every change (undo, apply, compact) is planned against the session as its process read it; the write
checks, inside its transaction, that the session is still at that revision. So when several processes
start the same change at once, every one that exits 0 made exactly one change, and every other one
says in one line that the session changed (nothing written). ``FAULT_PAUSE`` holds each transaction
open, so the processes read the session before the first of them has written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fault_support import BIG_CLAUDE, CHILD, child_env, in_process, integrity

from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")]

PROCESSES = 6
ROUNDS = 3
PAUSE = "0.4"
STALE = "the session changed"


def imported(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "races.db"
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(BIG_CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)[:300]))
    result = in_process(["import", "--db", db, transcript, "--json"])
    assert result.returncode == 0, result.stderr
    return db, str(json.loads(result.stdout)["session_id"])


def together(args: list[Any], count: int) -> list[subprocess.CompletedProcess[str]]:
    """``workbench ARGS`` in ``count`` processes started at once; each as it ended."""
    env = child_env(FAULT_PAUSE=PAUSE)
    processes = [subprocess.Popen([sys.executable, str(CHILD), *map(str, args)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(count)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=180)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def history(db: Path, session_id: str) -> dict[str, str]:
    result = in_process(["history", "--db", db, session_id, "--json"])
    assert result.returncode == 0, result.stderr
    return {e["plan_id"]: e["state"] for e in json.loads(result.stdout)["history"]}


def refused_cleanly(result: subprocess.CompletedProcess[str]) -> bool:
    """A failure that is the one-line refusal, nothing else."""
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("fault-trace: ")]
    return result.returncode != 0 and len(lines) == 1 and STALE in lines[0] and "internal error" not in lines[0]


def test_concurrent_undos_each_undo_one_plan_or_say_the_session_changed(tmp_path: Path) -> None:
    db, session_id = imported(tmp_path)
    for position in range(2, 2 + 2 * PROCESSES * ROUNDS, 2):
        assert in_process(["pin", "--db", db, session_id, str(position)]).returncode == 0
    assert list(history(db, session_id).values()).count("applied") >= PROCESSES * ROUNDS

    for _ in range(ROUNDS):
        before = history(db, session_id)
        results = together(["undo", "--db", db, session_id], PROCESSES)
        after = history(db, session_id)
        undone = [p for p, state in after.items() if state == "undone" and before[p] == "applied"]
        succeeded = [r for r in results if r.returncode == 0]
        assert all(r.returncode == 0 or refused_cleanly(r) for r in results), [r.stderr for r in results]
        assert len(succeeded) == len(undone) >= 1, (len(succeeded), len(undone), [r.stdout for r in results])
    assert integrity(db) == []


def test_concurrent_compactions_leave_one_summary_per_success(tmp_path: Path) -> None:
    db, session_id = imported(tmp_path)
    results = together(["compact", "--db", db, session_id, "--apply", "--summarizer", "heuristic", "--json"],
                       3)
    assert all(r.returncode == 0 or refused_cleanly(r) for r in results), [r.stderr for r in results]
    succeeded = [r for r in results if r.returncode == 0]
    listed = in_process(["compactions", "--db", db, session_id, "--json"])
    assert listed.returncode == 0, listed.stderr
    compactions = [c for c in json.loads(listed.stdout) if not c["undone"]]
    assert len(compactions) == len(succeeded) >= 1
    with Store(db) as store:
        view = SessionContext.load(store, session_id, Config()).view()
    summaries = [i.message_id for i in view.items if i.kind == "message" and str(i.message_id).endswith("-summary")]
    assert len(summaries) == 1, f"one summary in the model's view, never the same one twice: {summaries}"
    assert integrity(db) == []
