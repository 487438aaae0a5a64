"""Shared by the fault suite: the counters behind its summary line, running the CLI in a child
process, and the checks every fault ends with (an intact database, no lost message, a valid next request).

``WORKBENCH_FAULT_FULL=1`` selects the full suite (at least 200 kills); without it a representative
subset runs (20 kills). ``WORKBENCH_FAULT_SEED`` fixes the random kill moments; hypothesis runs
derandomized in the subset (the same inputs every run) and with fresh random inputs in the full suite.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopback_api import check_wire_messages

from workbench.engine.agent.wire import build_request
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Message, TextPart
from workbench.engine.transcript.store import Store

FULL = os.environ.get("WORKBENCH_FAULT_FULL", "") not in ("", "0")
"""Read once at import: the test-wide fixture clears ``WORKBENCH_*`` variables inside each test."""
SEED = int(os.environ.get("WORKBENCH_FAULT_SEED", "20251122"))
HERE = Path(__file__).resolve().parent
CHILD = HERE / "fault_child.py"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BIG_CLAUDE = FIXTURES / "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"
PIPE_TIMEOUT = 90.0


def kills(default: int, full: int) -> int:
    return full if FULL else default


@dataclass
class FaultCounters:
    """What the suite did, for its summary line; the checks add to the failure counts as they find them."""

    kills: int = 0
    api_faults: int = 0
    fuzz_inputs: int = 0
    artefacts: int = 0
    lost_messages: int = 0
    integrity_failures: int = 0
    ran: bool = False
    outcomes: dict[str, int] = field(default_factory=dict)
    """Where the kills landed, e.g. ``run: between a tool call and its result``."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def landed(self, outcome: str) -> None:
        with self._lock:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def line(self) -> str:
        return (f"fault suite: {self.kills} kills survived, {self.api_faults} API faults survived, "
                f"{self.fuzz_inputs} fuzz inputs tried, {self.artefacts} artefacts scanned for secrets; "
                f"{self.lost_messages} lost messages, {self.integrity_failures} integrity failures")


COUNTERS = FaultCounters()


# --- the CLI in a child process ---------------------------------------------------------


def child_env(**extra: str) -> dict[str, str]:
    """The test's environment (its data dir and config, from the shared fixture) without any API settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(extra)
    return env


def cli(args: Sequence[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = PIPE_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``workbench ARGS`` run to the end in a child process."""
    return subprocess.run([sys.executable, str(CHILD), *map(str, args)], env=env or child_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def in_process(args: Sequence[str | Path]) -> subprocess.CompletedProcess[str]:
    """``workbench ARGS`` through the same ``main`` in this process (no start-up cost); main thread only."""
    from workbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def startup_seconds() -> float:
    """How long the child takes to start and run a trivial command: kills before this hit start-up."""
    started = time.monotonic()
    result = cli(["--db", ":memory:", "sessions"])
    assert result.returncode == 0, result.stderr
    return time.monotonic() - started


@dataclass
class Killed:
    """A child that was SIGKILLed (or finished first): what it printed up to then."""

    lines: list[str]
    stderr: str
    returncode: int
    killed: bool
    first_output: float | None
    """Seconds from the start to the first line of output."""

    def events(self) -> list[dict[str, Any]]:
        """The JSON events printed in full; a line cut by the kill is left out."""
        out = []
        for line in self.lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    @property
    def in_transaction(self) -> bool:
        """Killed between a transaction's BEGIN and its COMMIT (known when the child traces them)."""
        traces = [line for line in self.stderr.splitlines() if line.startswith("fault-trace: ")]
        return self.killed and bool(traces) and traces[-1] == "fault-trace: begin"

    def message_ids(self) -> list[str]:
        return [e["message_id"] for e in self.events() if e.get("type") == "message"]


def run_and_kill(args: Sequence[str | Path], *, delay: float, env: dict[str, str], after_output: bool = False,
                 after_begin: int | None = None) -> Killed:
    """Start ``workbench ARGS`` and SIGKILL it ``delay`` seconds after: its start, its first line of output
    (``after_output``), or the ``after_begin``-th store transaction it began (``fault-trace`` lines;
    needs ``FAULT_PAUSE`` in ``env``). Output is read as it comes, so nothing printed before the kill is lost."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, str(CHILD), *map(str, args)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, bufsize=1)
    lines: list[str] = []
    errors: list[str] = []
    first_at: list[float] = []
    output, begun = threading.Event(), threading.Event()

    def read_out() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if not first_at:
                first_at.append(time.monotonic() - started)
                output.set()
            lines.append(line.rstrip("\n"))
        output.set()

    def read_err() -> None:
        assert process.stderr is not None
        begins = 0
        for line in process.stderr:
            errors.append(line)
            if line.startswith("fault-trace: begin"):
                begins += 1
                if after_begin is not None and begins >= after_begin:
                    begun.set()
        begun.set()

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    if after_begin is not None:
        begun.wait(PIPE_TIMEOUT)
    elif after_output:
        output.wait(PIPE_TIMEOUT)
    time.sleep(delay)
    killed = process.poll() is None
    if killed:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(PIPE_TIMEOUT)
    for reader in readers:
        reader.join(PIPE_TIMEOUT)
    return Killed(lines, "".join(errors), process.returncode, killed, first_at[0] if first_at else None)


def timed(args: Sequence[str | Path], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run to the end; (result, seconds to the first output line, seconds from then to the exit)."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, str(CHILD), *map(str, args)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, bufsize=1)
    assert process.stdout is not None and process.stderr is not None
    out: list[str] = []
    first: float | None = None
    for line in process.stdout:
        if first is None:
            first = time.monotonic() - started
        out.append(line)
    stderr = process.stderr.read()
    code = process.wait(PIPE_TIMEOUT)
    total = time.monotonic() - started
    first = total if first is None else first
    return subprocess.CompletedProcess(process.args, code, "".join(out), stderr), first, total - first


# --- a scripted session, one turn per script ------------------------------------------------

WINDOW = 9_500
"""Small enough that four turns pass the warn mark (automatic strategies run) and compact."""
SCRIPTED_CONFIG = '[strategies.archive]\nmode = "manual"\n'
"""The scripted turns keep archiving manual: with spec 003's automatic archive they stay too small to compact
in this window, and a window small enough for them to compact leaves a turn run again after a kill no room.
Kills inside an archive are ``test_killed_plan_apply_is_all_or_nothing``'s."""


def words(label: str, n: int) -> str:
    return f"{label}: " + " ".join(f"{label.lower()}{i}" for i in range(n))


def turn_script(k: int) -> dict[str, Any]:
    def tool(name: str, **tool_input: Any) -> dict[str, Any]:
        return {"tool": name, "input": tool_input}

    return {
        "name": f"turn{k}", "model": "scripted-demo", "context_window": WINDOW,
        "turns": [{"user": f"Turn {k}: look through the project and leave a note.", "responses": [
            [{"thinking": words("Plan", 60)}, {"text": words("Reading", 80)},
             tool("read_file", path="src/app.py"), tool("list_files", pattern="**/*")],
            [{"text": words("Searching", 60)}, tool("grep", pattern="def "), tool("read_file", path="data/big.txt"),
             tool("read_file", path="missing.txt")],
            [{"text": words("Writing", 40)}, tool("shell", command=f"sleep 0.05; echo turn {k}"),
             tool("write_file", path=f"notes/turn{k}.txt", content=words("Note", 50))],
            [{"text": f"Turn {k} done."}],
        ]}],
    }


def make_workspace(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "notes").mkdir()
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    (root / "data" / "big.txt").write_text("".join(f"row {i}: {'x' * 60}\n" for i in range(160)))
    return root


# --- the checks ------------------------------------------------------------------------


def integrity(db: Path) -> list[str]:
    """Problems SQLite finds in ``db`` (empty when it is whole): integrity and foreign keys."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        problems = [] if result == ["ok"] else result
        problems += [f"foreign key: {row}" for row in conn.execute("PRAGMA foreign_key_check")]
    finally:
        conn.close()
    if problems:
        COUNTERS.add(integrity_failures=1)
    return problems


def missing_messages(db: Path, message_ids: Sequence[str]) -> list[str]:
    """Of ``message_ids`` (each announced as stored), those not in ``db``, or stored without parts."""
    if not message_ids:
        return []
    conn = sqlite3.connect(db, timeout=30)
    try:
        stored = {row[0] for row in conn.execute("SELECT id FROM messages")}
        with_parts = {row[0] for row in conn.execute("SELECT DISTINCT message_id FROM parts")}
    finally:
        conn.close()
    lost = [m for m in message_ids if m not in stored or m not in with_parts]
    if lost:
        COUNTERS.add(lost_messages=len(lost))
    return lost


def next_request(store: Store, session_id: str, text: str = "and now?") -> list[dict[str, Any]]:
    """The messages of the request a next user message would make, from what is stored."""
    ctx = SessionContext.load(store, session_id, Config())
    ctx.append(Message(id="probe", session_id=session_id, index=len(ctx.messages), role="user",
                       parts=[TextPart(text=text)]))
    return build_request(ctx.view(), ctx.model or "claude-sonnet-4-5", 4096).messages


def assert_resumable(db: Path, session_id: str) -> None:
    """The stored session loads (with and without its compaction snapshot, to the same view) and a
    next message makes a request the Messages API accepts."""
    with Store(db) as store:
        plain = SessionContext.load(store, session_id, Config())
        resumed = SessionContext.load(store, session_id, Config(), use_checkpoint=True)
        assert fingerprint(plain) == fingerprint(resumed), "the snapshot and the replay disagree"
        check_wire_messages(next_request(store, session_id))


def fingerprint(ctx: SessionContext) -> tuple[Any, ...]:
    view = ctx.view()
    return tuple((i.kind, i.message_id, i.tokens, i.parts) for i in view.items if i.kind == "message")


def one_line_error(code: int, stderr: str) -> None:
    """A failure the user can act on: a non-zero exit and exactly one ``workbench: error:`` line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code != 0, "expected a failure"
    assert len(lines) == 1, f"expected one line on stderr, got: {stderr!r}"
    assert lines[0].startswith("workbench: error: "), lines[0]
    assert "Traceback" not in stderr and "internal error" not in stderr
