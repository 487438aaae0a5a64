"""``workbench import`` against claude-code-log converting the same file to JSON, import memory, start-up.

Every figure is measured here, in this run, as a user meets it: the command's wall time from a fresh
interpreter (start-up included, modules compiled already as in an installed package), its peak memory
from the operating system.

- Speed: ``workbench import FILE --json`` into a fresh database, against claude-code-log 1.7.0's
  ``convert FILE -o out.json --no-cache`` (installed in a venv of its own, cached between runs), on the
  real 2.7 MB Claude Code fixture and on a synthetic 50,000-message transcript claude-code-log accepts.
  Target: at most half its time.
- Memory: peak RSS of importing a 100,000-message transcript (target 200 MB), beside the peak of only
  parsing it whole into memory, the way the import used to work.
- One 30 MB line: refused at once with a message naming the line and the limit, or imported in 5 s.
- Start-up: ``workbench sessions`` on an empty database (target 0.25 s), beside a bare ``python -c pass``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tests.bench.common import FIXTURES, BenchResult, SummaryRow, median

NAME = "import"
PEER = "claude-code-log==1.7.0"
PEER_VENV = Path(tempfile.gettempdir()) / "workbench-bench-claude-code-log-1.7.0"
FIXTURE = FIXTURES / "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"
SYNTHETIC_MESSAGES = 50_000
MEMORY_MESSAGES = 100_000
SPEED_RATIO = 0.5
PEAK_MB = 200.0
BIG_LINE_BYTES = 30_000_000
BIG_LINE_SECONDS = 5.0
BIG_LINE_PEAK_MB = 200.0
STARTUP_SECONDS = 0.25
FIXTURE_RUNS = 5
STARTUP_RUNS = 7
WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "for", "it", "with", "file", "test", "error", "value", "function", "return", "change", "line", "output", "session", "message", "context", "token", "budget", "run", "check", "path", "data", "item", "result", "config", "store", "view"]


def _peer() -> Path | None:
    """claude-code-log's command, installed in a venv of its own (kept for the next run)."""
    exe = PEER_VENV / "bin" / "claude-code-log"
    if not exe.exists():
        venv.create(PEER_VENV, with_pip=True, clear=True)
        pip = subprocess.run([str(PEER_VENV / "bin" / "pip"), "install", "-q", PEER], capture_output=True, check=False)
        if pip.returncode != 0:
            return None
    return exe


def _run_measured(command: Sequence[str | Path], cwd: Path) -> tuple[float, float, int, str, str]:
    """Wall seconds, peak RSS in MB, exit code, stdout and stderr of one run (the child's own rusage)."""
    started = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in command], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_ENV)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Children may keep compiled modules, as an installed workbench (and claude-code-log, installed by pip) has
them: a checkout run with PYTHONDONTWRITEBYTECODE would compile the workbench's own modules every time."""


def _warm_up(tmp: Path) -> None:
    """One run of each command measured, unmeasured, so that every module's compiled form is on disk."""
    _run_measured(_workbench("import", FIXTURE, "--json", "--db", tmp / "warm.db"), tmp)
    _run_measured(_workbench("sessions", "--db", tmp / "warm.db"), tmp)


def write_synthetic(path: Path, messages: int, seed: int = 7) -> Path:
    """A Claude Code transcript of ``messages`` messages that claude-code-log accepts: user prompts, assistant
    text with tool calls, tool results, each line with ``cwd``, ``isSidechain``, ``userType``, ``version``."""
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))

    base = {"cwd": "/home/user/project", "isSidechain": False, "userType": "external", "version": "2.0.0",
            "sessionId": "bench-session", "gitBranch": "main"}
    parent: str | None = None
    with path.open("w", encoding="utf-8") as fh:
        for i in range(messages):
            stamp = f"2025-06-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.000Z"
            record: dict[str, object]
            if i % 2 == 0:
                content: object = (text(5, 60) if i % 4 == 0 else
                                   [{"type": "tool_result", "tool_use_id": f"toolu_{i - 1}", "content": text(20, 300)}])
                record = {**base, "type": "user", "uuid": f"u{i}", "parentUuid": parent, "timestamp": stamp,
                          "message": {"role": "user", "content": content}}
            else:
                blocks: list[dict[str, object]] = [{"type": "text", "text": text(5, 80)}]
                if i % 4 == 1:
                    blocks.append({"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": text(4, 12)}})
                record = {**base, "type": "assistant", "uuid": f"u{i}", "parentUuid": parent, "timestamp": stamp,
                          "requestId": f"req_{i}",
                          "message": {"id": f"msg_{i}", "type": "message", "role": "assistant",
                                      "model": "claude-sonnet-4-5-20250929", "content": blocks, "stop_reason": None,
                                      "usage": {"input_tokens": 10, "output_tokens": 50,
                                                "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000 + i}}}
            parent = f"u{i}"
            fh.write(json.dumps(record))
            fh.write("\n")
    return path


def write_big_line(path: Path, size: int = BIG_LINE_BYTES) -> Path:
    """One Claude Code user record of about ``size`` bytes: the whole file is one line."""
    rng = random.Random(3)
    words = " ".join(rng.choice(WORDS) for _ in range(size // 5))[:size]
    record = {"type": "user", "uuid": "u1", "parentUuid": None, "isSidechain": False, "sessionId": "big",
              "cwd": "/x", "userType": "external", "version": "2.0.0", "timestamp": "2025-06-01T10:00:00.000Z",
              "message": {"role": "user", "content": words}}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _workbench(*args: str | Path) -> list[str | Path]:
    return [sys.executable, "-m", "workbench", *args]


def _import_seconds(path: Path, tmp: Path, runs: int) -> float:
    times = []
    for n in range(runs):
        db = tmp / f"speed-{path.stem}-{n}.db"
        seconds, _, code, _, err = _run_measured(_workbench("import", path, "--json", "--db", db), tmp)
        if code != 0:
            raise RuntimeError(f"workbench import {path} failed: {err.strip()}")
        times.append(seconds)
    return median(times)


def _peer_seconds(peer: Path, path: Path, tmp: Path, runs: int) -> float:
    times = []
    for n in range(runs):
        out = tmp / f"peer-{path.stem}-{n}.json"
        seconds, _, code, _, err = _run_measured([peer, "convert", path, "-o", out, "--no-cache"], tmp)
        if code != 0 or not out.exists():
            raise RuntimeError(f"claude-code-log failed on {path}: {err.strip()[-300:]}")
        times.append(seconds)
    return median(times)


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    peer = _peer()
    if peer is None:
        result.skipped = f"could not install {PEER} (no package registry?)"
        return result
    table = Table(title="import", title_justify="left")
    for header in ("case", "workbench", "baseline", "ratio / figure", "target"):
        table.add_column(header, justify="left" if header == "case" else "right")
    with tempfile.TemporaryDirectory(prefix="workbench-bench-import-") as name:
        tmp = Path(name)
        _warm_up(tmp)
        synthetic = write_synthetic(tmp / "synthetic-50k.jsonl", SYNTHETIC_MESSAGES)
        for label, path, runs in (("2.7 MB fixture", FIXTURE, FIXTURE_RUNS), ("50,000 messages", synthetic, 1)):
            ours = _import_seconds(path, tmp, runs)
            theirs = _peer_seconds(peer, path, tmp, runs)
            ratio = ours / theirs
            table.add_row(f"speed, {label}", f"{ours:.2f} s", f"claude-code-log {theirs:.2f} s", f"{ratio:.2f}×",
                          f"≤ {SPEED_RATIO}×")
            result.rows.append(SummaryRow(f"{NAME} speed vs claude-code-log, {label}", f"{ratio:.2f}×",
                                          f"≤ {SPEED_RATIO}×", f"{ours:.2f} s vs {theirs:.2f} s", ratio <= SPEED_RATIO))
        synthetic.unlink()

        big = write_synthetic(tmp / "synthetic-100k.jsonl", MEMORY_MESSAGES)
        _, peak, code, _, err = _run_measured(_workbench("import", big, "--json", "--db", tmp / "memory.db"), tmp)
        if code != 0:
            raise RuntimeError(f"workbench import {big} failed: {err.strip()}")
        naive = ("from pathlib import Path; from workbench.engine.transcript.importers import parse_file; "
                 f"parse_file(Path({str(big)!r}))")
        _, naive_peak, _, _, _ = _run_measured([sys.executable, "-c", naive], tmp)
        table.add_row("peak memory, 100,000 messages", f"{peak:,.0f} MB", f"whole parse {naive_peak:,.0f} MB",
                      f"{peak:,.0f} MB", f"≤ {PEAK_MB:.0f} MB")
        result.rows.append(SummaryRow(f"{NAME} peak memory, 100,000 messages", f"{peak:,.0f} MB", f"≤ {PEAK_MB:.0f} MB",
                                      f"whole parse {naive_peak:,.0f} MB", peak <= PEAK_MB))
        big.unlink()

        line = write_big_line(tmp / "one-line.jsonl")
        seconds, peak, code, _, err = _run_measured(
            _workbench("import", line, "--json", "--db", tmp / "line.db"), tmp)
        message = err.strip().splitlines()[-1] if err.strip() else ""
        refused = code != 0 and "line 1" in message and "MiB" in message and len(err.strip().splitlines()) == 1
        fine = (code == 0 or refused) and seconds <= BIG_LINE_SECONDS and peak <= BIG_LINE_PEAK_MB
        said = message.split(": no claude-code messages could be read")[-1].strip(" ()")
        outcome = f"refused: {said}" if refused else ("imported" if code == 0 else f"failed: {message}")
        table.add_row("one 30 MB line", f"{seconds:.2f} s, {peak:,.0f} MB", "–", outcome[:70],
                      f"≤ {BIG_LINE_SECONDS:.0f} s, ≤ {BIG_LINE_PEAK_MB:.0f} MB")
        result.rows.append(SummaryRow(f"{NAME} one 30 MB line", f"{seconds:.2f} s, {peak:,.0f} MB",
                                      f"≤ {BIG_LINE_SECONDS:.0f} s, ≤ {BIG_LINE_PEAK_MB:.0f} MB", outcome[:60], fine))

        empty = tmp / "empty.db"
        eager = ("import sys; import workbench.engine.settings.config, workbench.engine.transcript.importers, workbench.engine.context.session, "
                 "sqlite_utils, workbench.tui.launch; from workbench.cli import main; "
                 f"sys.exit(main(['sessions', '--db', {str(empty)!r}]))")
        startup = median([_run_measured(_workbench("sessions", "--db", empty), tmp)[0] for _ in range(STARTUP_RUNS)])
        before = median([_run_measured([sys.executable, "-c", eager], tmp)[0] for _ in range(STARTUP_RUNS)])
        bare = median([_run_measured([sys.executable, "-c", "pass"], tmp)[0] for _ in range(STARTUP_RUNS)])
        baseline = f"with everything imported up front {before:.3f} s; python -c pass {bare:.3f} s"
        table.add_row("workbench sessions, empty database", f"{startup:.3f} s", baseline, f"{startup:.3f} s",
                      f"≤ {STARTUP_SECONDS} s")
        result.rows.append(SummaryRow(f"{NAME} start-up: sessions on an empty database", f"{startup:.3f} s",
                                      f"≤ {STARTUP_SECONDS} s", baseline, startup <= STARTUP_SECONDS))
    console.print(table)
    return result
