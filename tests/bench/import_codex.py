"""``workbench import`` of a long Codex rollout: linear in its records.

A Codex rollout writes each user prompt twice (an ``event_msg`` and a ``response_item``); the reader keeps
one of each pair by looking the other up. Looked up in a list of every prompt since the last compaction, an
import of 8,000 prompts took 84 s (2,000: 5 s); looked up by key, it grows with the file. Measured as a user
meets it: the command's wall time from a fresh interpreter, start-up included.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow
from tests.bench.importing import _run_measured, _workbench

NAME = "import-codex"
PROMPTS = 8_000
SECONDS = 5.0


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
    table = Table(title=NAME, title_justify="left")
    for header in ("case", "seconds", "peak", "messages", "target"):
        table.add_column(header, justify="left" if header == "case" else "right")
    table.add_row(f"{PROMPTS:,} prompts", f"{seconds:.2f} s", f"{peak:,.0f} MB", f"{messages:,}", f"≤ {SECONDS} s")
    console.print(table)
    result.rows.append(SummaryRow(f"{NAME}: {PROMPTS:,} prompts", f"{seconds:.2f} s", f"≤ {SECONDS} s",
                                  "84 s before (list lookup)", seconds <= SECONDS and messages == 2 * PROMPTS))
    return result
