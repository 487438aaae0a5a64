"""Crash consistency: the real command line is SIGKILLed at random moments, and nothing is lost.

Four commands are killed, each in a child process on its own copy of a database:

* ``workbench run --scripted TURN.json --session ID`` — mid-stream, mid tool run, mid
  offload, mid automatic strategy or compaction (the turns fill a small context window);
* ``workbench apply SESSION --strategy offload|archive`` — mid plan apply;
* ``workbench compact SESSION --apply`` — mid compaction;
* ``workbench import BIG.jsonl`` — mid import (a 2.7 MB Claude Code transcript).

After every kill: ``PRAGMA integrity_check`` and ``foreign_key_check`` pass; every message the child
announced (a ``message`` event, printed after its commit) is stored with its parts; a plan,
compaction or import is there completely or not at all. Then the same command runs again to the end
(through the same ``workbench`` entry point, in the test process: it saves a start-up per kill), and
the session loads (its compaction snapshot and a full replay agree) and a next user message makes a
request the Messages API accepts (``check_wire_messages``).

The kills are timed three ways: inside the n-th store transaction (the child traces BEGIN and COMMIT
on stderr and sleeps in both, ``FAULT_PAUSE``), during the work after the first output, or from the
start. The summary's "kills landed" line counts where they hit.

**Resuming a scripted run.** A scripted run replays its whole script, so the session is driven one
turn per process: turn *k* is a one-turn script of its own (read, list, grep, an error, a large
read that is offloaded, a shell command, a write, a final "Turn k done."), independent of what the
earlier turns left. A kill interrupts turn *k*; resuming runs turn *k* again with ``--session``, as a
user would re-send an interrupted request. Whatever the killed run stored stays in the transcript; a
tool call it left without a result is answered with an "interrupted" error result before the new
message (the agent does this on every ``send``), so the resumed request is valid.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fault_support import (
    BIG_CLAUDE,
    COUNTERS,
    SCRIPTED_CONFIG,
    SEED,
    Killed,
    assert_resumable,
    child_env,
    in_process,
    integrity,
    kills,
    make_workspace,
    missing_messages,
    run_and_kill,
    startup_seconds,
    timed,
    turn_script,
)

from workbench.engine.transcript.store import Store

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL"),
]

TURNS = 4
WORKERS = 2
TURN_TRANSACTIONS = 16
"""About how many store transactions one scripted turn makes (messages, usage, blobs, overlay events)."""


# --- the scripted session -------------------------------------------------------------


@dataclass
class Reference:
    """The uninterrupted turns: the database before each, and how long each one's work took."""

    root: Path
    scripts: list[Path]
    before: list[Path | None]
    """Index k-1: the database turn k starts from (None: a new database)."""
    work: list[float]
    """Seconds each turn took, start-up left out."""
    session_id: str
    startup: float


@pytest.fixture(scope="module")
def startup() -> float:
    return startup_seconds()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, startup: float) -> Reference:
    root = tmp_path_factory.mktemp("crash-run")
    scripts = []
    for k in range(1, TURNS + 1):
        path = root / f"turn{k}.json"
        path.write_text(json.dumps(turn_script(k)))
        scripts.append(path)
    workspace = make_workspace(root / "ws")
    db = root / "reference.db"
    before: list[Path | None] = []
    work = []
    session_id = ""
    kinds: set[str] = set()
    config = root / "scripted.toml"
    config.write_text(SCRIPTED_CONFIG, encoding="utf-8")
    for k, script in enumerate(scripts, start=1):
        before.append(None if k == 1 else shutil.copy(db, root / f"before{k}.db"))
        args = ["run", "--db", db, "--config", config, "--scripted", script, "--yes", "--json", "--workspace",
                workspace]
        started = time.monotonic()
        result = in_process([*args, *(["--session", session_id] if session_id else [])])
        work.append(time.monotonic() - started)
        assert result.returncode == 0, result.stderr
        events = [json.loads(line) for line in result.stdout.splitlines()]
        session_id = session_id or events[0]["session_id"]
        kinds |= {e["type"] for e in events}
        assert not [e for e in events if e["type"] == "error"]
    # The turns exercise what the kills should interrupt.
    assert {"message", "tool_call", "tool_result", "offload", "compaction_end"} <= kinds, kinds
    assert_resumable(db, session_id)
    return Reference(root, scripts, before, work, session_id, startup)


def session_of(db: Path) -> str | None:
    if not db.exists():
        return None
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = [r[0] for r in conn.execute("SELECT id FROM sessions")]
    except sqlite3.OperationalError:  # killed before the schema was made
        rows = []
    finally:
        conn.close()
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


def last_assistant_text(db: Path, session_id: str) -> str:
    with Store(db) as store:
        messages = store.load_messages(session_id)
    return next(m.text for m in reversed(messages) if m.role == "assistant")


PAUSE = 0.005
"""Seconds a traced child sleeps after BEGIN and before COMMIT of each transaction."""


def fault_env(rng: random.Random, traced: bool) -> dict[str, str]:
    """Slow writes (and, in some runs, streams) so kills land inside them."""
    return child_env(FAULT_PAUSE=str(PAUSE) if traced else rng.choice(["0", "0.002"]),
                     FAULT_CHUNK_DELAY=rng.choice(["0", "0", "0.003"]))


def kill_moment(rng: random.Random, work: float, startup: float, begins: int) -> dict[str, Any]:
    """When to kill: inside the n-th store transaction (40%), during the work after the first output
    (45%), or at any time from the start (15%: start-up, opening and migrating the database)."""
    roll = rng.random()
    if roll < 0.4:
        return {"after_begin": rng.randint(1, begins), "delay": rng.uniform(0, 2.2 * PAUSE)}
    if roll < 0.85:
        return {"after_output": True, "delay": rng.uniform(0, work * 1.2)}
    return {"delay": rng.uniform(0, startup + work)}


def describe(moment: dict[str, Any]) -> str:
    if "after_begin" in moment:
        return f"{moment['delay']:.3f} s into transaction {moment['after_begin']}"
    return f"{moment['delay']:.3f} s after {'output' if moment.get('after_output') else 'start'}"


@dataclass
class Kill:
    """One killed child: where it was killed, what it announced, and how to run it again."""

    where: str
    db: Path
    again: list[Any]
    session_id: str | None
    announced: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    turn: int | None = None


def survive(count: int, kill: Callable[[int], Kill]) -> None:
    """``count`` kills (two at a time), then each one run again to the end, in this process, and checked."""
    with ThreadPoolExecutor(WORKERS) as pool:
        killed = list(pool.map(kill, range(1, count + 1)))
    problems: list[str] = []
    for k in killed:
        found = list(k.problems)
        if not found:
            found = [f"{k.where}: {p}" for p in resume(k)]
        if not found:
            COUNTERS.add(kills=1)
        problems += found
    assert not problems, "\n".join(problems[:20])


def resume(k: Kill) -> list[str]:
    again = in_process(k.again)
    if again.returncode != 0:
        return [f"running it again failed: {again.stderr[-800:]}"]
    announced = list(k.announced)
    if k.turn is not None:
        announced += [e["message_id"] for e in map(json.loads, again.stdout.splitlines()) if e["type"] == "message"]
    problems = [f"after running again: {p}" for p in integrity(k.db)]
    problems += [f"after running again, lost {m}" for m in missing_messages(k.db, announced)]
    session_id = k.session_id or session_of(k.db)
    assert session_id is not None
    if k.turn is not None and last_assistant_text(k.db, session_id) != f"Turn {k.turn} done.":
        problems.append("the resumed turn did not complete")
    try:
        assert_resumable(k.db, session_id)
    except AssertionError as exc:
        problems.append(f"the session does not continue: {exc}")
    return problems


def run_kill(ref: Reference, number: int, root: Path) -> Kill:
    """Kill one scripted turn; check the database and that every announced message is stored."""
    rng = random.Random(SEED * 1000 + number)
    k = rng.randint(1, TURNS)
    work = root / f"kill{number}"
    workspace = make_workspace(work / "ws")
    db = work / "run.db"
    if ref.before[k - 1] is not None:
        shutil.copy(ref.before[k - 1], db)  # type: ignore[arg-type]
    session = [] if k == 1 else ["--session", ref.session_id]
    args = ["run", "--db", db, "--config", ref.root / "scripted.toml", "--scripted", ref.scripts[k - 1], "--yes",
            "--json", "--workspace", workspace]
    moment = kill_moment(rng, ref.work[k - 1], ref.startup, TURN_TRANSACTIONS)
    killed = run_and_kill([*args, *session], env=fault_env(rng, "after_begin" in moment), **moment)
    where = f"run kill {number} (turn {k}, {describe(moment)})"
    problems = [f"{where}: {p}" for p in integrity(db)] if db.exists() else []
    problems += [f"{where}: announced but not stored: {m}" for m in missing_messages(db, killed.message_ids())]
    if not killed.killed and killed.returncode != 0:
        problems.append(f"{where}: the run failed by itself: {killed.stderr[-500:]}")
    session_id = session_of(db) if not problems else None
    if not problems:
        COUNTERS.landed(f"run {where_in_turn(db, session_id, k, killed)}")
        if killed.in_transaction:
            COUNTERS.landed("run inside a write transaction")
    again = [*args, *(["--session", session_id] if session_id else [])]
    return Kill(where, db, again, session_id, killed.message_ids(), problems, turn=k)


def where_in_turn(db: Path, session_id: str | None, k: int, killed: Killed) -> str:
    """Where in turn ``k`` the kill landed, read from what the database holds."""
    if not killed.killed:
        return "after the turn ended"
    if session_id is None:
        return "before the session was stored"
    with Store(db) as store:
        messages = store.load_messages(session_id)
    turn = [m for m in messages if m.text.startswith(f"Turn {k}:")]
    if not turn:
        return "before the turn's first message"
    last = messages[-1]
    if last.role == "assistant" and last.tool_uses():
        return "between a tool call and its result"
    if last.role == "assistant" and last.text == f"Turn {k} done.":
        return "after the turn's last message"
    if last.kind in ("summary", "compact_boundary"):
        return "right after a compaction"
    return "mid-turn (streaming or between steps)"


def test_killed_scripted_runs_lose_nothing_and_resume(reference: Reference, tmp_path: Path) -> None:
    survive(kills(10, 100), lambda n: run_kill(reference, n, tmp_path))


# --- apply, compact, import -------------------------------------------------------------


def table_counts(db: Path) -> dict[str, int]:
    if not db.exists():
        return {}
    conn = sqlite3.connect(db, timeout=30)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("sessions", "messages", "parts", "overlay_events", "tool_result_blobs", "snapshots",
                          "usage_records")}
    except sqlite3.OperationalError:  # killed before the schema was made
        return {}
    finally:
        conn.close()


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {t: after.get(t, 0) - before.get(t, 0) for t in set(before) | set(after)
            if after.get(t, 0) != before.get(t, 0)}


@dataclass
class Imported:
    db: Path
    session_id: str
    seconds: float
    """How long the import took in a child process, start-up included."""
    counts: dict[str, int]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Imported:
    db = tmp_path_factory.mktemp("crash-import") / "template.db"
    result, first, rest = timed(["import", "--db", db, BIG_CLAUDE, "--json"], child_env())
    assert result.returncode == 0, result.stderr
    return Imported(db, json.loads(result.stdout)["session_id"], first + rest, table_counts(db))


def command_kill(number: int, root: Path, label: str, template: Path | None, args: Callable[[Path], list[Any]],
                 whole: dict[str, int], seconds: float, session_id: str, begins: int) -> Kill:
    """Kill ``args(db)`` on a copy of ``template``: the tables must change by nothing or by ``whole``."""
    rng = random.Random(SEED * 7919 + number * 31 + len(label))
    work = root / f"{label}{number}"
    work.mkdir()
    db = work / "wb.db"
    if template is not None:
        shutil.copy(template, db)
    before = table_counts(db)
    # These commands print only at the end: inside one of their transactions, or timed over the
    # second half of the run, where the work is (the first half is start-up).
    if rng.random() < 0.5:
        moment: dict[str, Any] = {"after_begin": rng.randint(1, begins), "delay": rng.uniform(0, 3 * PAUSE)}
    else:
        moment = {"delay": rng.uniform(0.5 * seconds, 1.15 * seconds)}
    killed = run_and_kill(args(db), env=fault_env(rng, "after_begin" in moment), **moment)
    where = f"{label} kill {number} ({describe(moment)})"
    problems = [f"{where}: {p}" for p in integrity(db)] if db.exists() else []
    if not killed.killed and killed.returncode != 0:
        problems.append(f"{where}: failed by itself: {killed.stderr[-500:]}")
    change = delta(before, table_counts(db))
    whole = {table: n for table, n in whole.items() if n}
    if change not in ({}, whole):
        problems.append(f"{where}: half done: {change}; whole: {whole}")
    elif killed.killed:
        COUNTERS.landed(f"{label} {'after its commit' if change else 'before its commit'}")
        if killed.in_transaction:
            COUNTERS.landed(f"{label} inside its transaction")
    else:
        COUNTERS.landed(f"{label} after it ended")
    return Kill(where, db, args(db), session_id, problems=problems)


@pytest.mark.parametrize("strategy", ["offload", "archive"])
def test_killed_plan_apply_is_all_or_nothing(strategy: str, imported: Imported, tmp_path: Path) -> None:
    reference = Path(shutil.copy(imported.db, tmp_path / "reference.db"))
    args = lambda db: ["apply", "--db", db, imported.session_id, "--strategy", strategy, "--json"]
    result, first, rest = timed(args(reference), child_env())
    seconds = first + rest
    assert result.returncode == 0, result.stderr
    whole = delta(imported.counts, table_counts(reference))
    assert whole.get("overlay_events", 0) > 0, f"{strategy} changed nothing: {result.stdout[:300]}"
    count = kills(2, 18) if strategy == "offload" else kills(1, 17)
    survive(count, lambda n: command_kill(n, tmp_path, strategy, imported.db, args, whole, seconds,
                                          imported.session_id, begins=1))
    # Applying again after a complete apply changes nothing: each kill ends at the reference state.
    assert delta(imported.counts, table_counts(tmp_path / f"{strategy}1" / "wb.db")) == whole


def test_killed_compaction_is_all_or_nothing(imported: Imported, tmp_path: Path) -> None:
    reference = Path(shutil.copy(imported.db, tmp_path / "reference.db"))
    args = lambda db: ["compact", "--db", db, imported.session_id, "--apply", "--json"]
    result, first, rest = timed(args(reference), child_env())
    seconds = first + rest
    assert result.returncode == 0, result.stderr
    whole = delta(imported.counts, table_counts(reference))
    assert whole.get("messages") == 2 and whole.get("snapshots") == 1, whole
    survive(kills(3, 35), lambda n: command_kill(n, tmp_path, "compact", imported.db, args, whole, seconds,
                                                 imported.session_id, begins=1))


def test_killed_import_is_all_or_nothing(imported: Imported, tmp_path: Path) -> None:
    args = lambda db: ["import", "--db", db, BIG_CLAUDE, "--json"]
    # On a new database the first transaction is the schema's, the second the import's.
    survive(kills(4, 30), lambda n: command_kill(n, tmp_path, "import", None, args, imported.counts,
                                                 imported.seconds, imported.session_id, begins=2))
