"""``workbench import`` on inputs that once cost minutes or gigabytes: a long Codex rollout, one huge string.

A Codex rollout writes each user prompt twice (an ``event_msg`` and a ``response_item``); the reader keeps
one of each pair by looking the other up. Looked up in a list of every prompt since the last compaction, an
import of 8,000 prompts took 84 s (2,000: 5 s); looked up by key, it grows with the file. Measured as a user
meets it: the command's wall time from a fresh interpreter, start-up included.

An OpenCode export holding one 100 MB string without a space took 70 s and 5.2 GB in the counting process:
tiktoken's work grows faster than such a text. Its count is now made from its first MiB and the rest
estimated at the same rate (and the import says so); the row is the peak memory of the import's processes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow
from tests.bench.importing import _run_measured, _workbench

NAME = "import-bounds"
PROMPTS = 8_000
SECONDS = 5.0
HUGE_BYTES = 100_000_000
HUGE_PEAK_MB = 500.0


def write_rollout(path: Path, prompts: int) -> Path:
    """A Codex rollout of ``prompts`` turns: each prompt as both records, and a short answer; no compaction."""
    def line(kind: str, payload: dict[str, object], n: int) -> str:
        return json.dumps({"timestamp": f"2026-05-11T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z", "type": kind,
                           "payload": payload}) + "\n"

    with path.open("w", encoding="utf-8") as fh:
        fh.write(line("session_meta", {"id": "019e1695-bench", "cwd": "/work/project", "cli_version": "0.128.0"}, 0))
        for n in range(prompts):
            prompt = f"Prompt {n}: look at module {n % 97} and explain what function {n} returns."
            fh.write(line("event_msg", {"type": "user_message", "message": prompt}, n))
            fh.write(line("response_item", {"type": "message", "role": "user",
                                            "content": [{"type": "input_text", "text": prompt}]}, n))
            fh.write(line("response_item", {"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": f"It returns {n}."}]}, n))
    return path


def write_huge_export(path: Path, size: int) -> Path:
    """An OpenCode export of one user message whose text is ``size`` letters without a space, and a reply."""
    def message(n: int, role: str, text: str) -> dict[str, object]:
        return {"info": {"id": f"msg_{n}", "sessionID": "ses_bench", "role": role, "time": {"created": 1760000000000}},
                "parts": [{"id": f"prt_{n}", "sessionID": "ses_bench", "messageID": f"msg_{n}", "type": "text",
                           "text": text}]}

    huge = ("abcdefghijklmnopqrstuvwxyz" * (size // 26 + 1))[:size]
    doc = {"info": {"id": "ses_bench", "title": "one huge string", "time": {"created": 1760000000000}},
           "messages": [message(1, "user", huge), message(2, "assistant", "Read it.")]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _peak_with_children(command: list[str | Path], cwd: Path) -> tuple[float, int, str]:
    """Peak RSS in MB of the command or of any process it started (the counting process), its exit code and
    stderr."""
    script = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
              "sys.stderr.write(r.stderr); "
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    _, _, code, out, err = _run_measured([sys.executable, "-c", script, *command], cwd)
    peak_kb = int(out.strip().splitlines()[-1]) if out.strip() else 0
    return peak_kb / 1024, code, err


def _huge_row(console: Console, tmp: Path) -> SummaryRow:
    export = write_huge_export(tmp / "huge.json", HUGE_BYTES)
    peak, code, err = _peak_with_children(_workbench("import", export, "--json", "--db", tmp / "huge.db"), tmp)
    if code != 0:
        raise RuntimeError(f"workbench import {export} failed: {err.strip()}")
    console.print(f"one {HUGE_BYTES // 1_000_000} MB string: peak {peak:,.0f} MB (target ≤ {HUGE_PEAK_MB:.0f} MB)")
    return SummaryRow(f"{NAME}: one {HUGE_BYTES // 1_000_000} MB string, peak memory", f"{peak:,.0f} MB",
                      f"≤ {HUGE_PEAK_MB:.0f} MB", "5.2 GB before (counted whole)", peak <= HUGE_PEAK_MB)


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    with tempfile.TemporaryDirectory(prefix="workbench-bench-codex-") as name:
        tmp = Path(name)
        rollout = write_rollout(tmp / "rollout.jsonl", PROMPTS)
        seconds, peak, code, out, err = _run_measured(_workbench("import", rollout, "--json", "--db", tmp / "c.db"),
                                                      tmp)
        if code != 0:
            raise RuntimeError(f"workbench import {rollout} failed: {err.strip()}")
        messages = json.loads(out)["messages"]
        huge = _huge_row(console, tmp)
    table = Table(title=NAME, title_justify="left")
    for header in ("case", "seconds", "peak", "messages", "target"):
        table.add_column(header, justify="left" if header == "case" else "right")
    table.add_row(f"{PROMPTS:,} prompts", f"{seconds:.2f} s", f"{peak:,.0f} MB", f"{messages:,}", f"≤ {SECONDS} s")
    console.print(table)
    result.rows.append(SummaryRow(f"{NAME}: {PROMPTS:,} prompts", f"{seconds:.2f} s", f"≤ {SECONDS} s",
                                  "84 s before (list lookup)", seconds <= SECONDS and messages == 2 * PROMPTS))
    result.rows.append(huge)
    return result
