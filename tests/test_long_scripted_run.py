"""A long scripted session through ``workbench run --json``, as a user would replay one: forty-odd tool
calls in a turn, then a long pasted message with the window nearly full. The events show what the engine
promises of its own agent: every step after the first of a turn reads the one before from the prompt cache,
archiving goes in batches (at most one pass, and one digest, per ten archived results), and a compaction
never summarises the user's newest message before the model has read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import ToolResultPart
from workbench.engine.transcript.store import Store

READS = 42
PASTE = "please fix the failing test in this log:\n" + "".join(
    f"2026-03-14 09:{n // 60:02d}:{n % 60:02d} test_totals FAILED assert {n} == {n + 1}\n" for n in range(700))


def _script(path: Path) -> Path:
    reads = [[{"tool": "read_file", "input": {"path": f"src/part{n % 14}.py"}}] for n in range(READS)]
    script = {"name": "long", "model": "scripted-demo", "context_window": 30_000, "max_output": 4_096, "turns": [
        {"user": "read every part of the package", "responses": [*reads, [{"text": "Read every part."}]]},
        {"user": PASTE, "responses": [[{"text": "The totals test compares off-by-one values; fixed."}]]},
    ]}
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def _run(tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    for n in range(14):
        (workspace / "src" / f"part{n}.py").write_text(
            "".join(f"def part{n}_{k}(x):\n    return x + {k}\n" for k in range(40)), encoding="utf-8")
    db = tmp_path / "run.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env.update(WORKBENCH_DATA_DIR=str(tmp_path / "data"), WORKBENCH_CONFIG=str(tmp_path / "config.toml"))
    command = [sys.executable, "-m", "workbench", "run", "--scripted", str(_script(tmp_path / "long.json")),
               "--json", "--yes", "--db", str(db), "--workspace", str(workspace)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()], db


def test_a_long_scripted_run_caches_archives_in_batches_and_keeps_the_newest_message(tmp_path: Path) -> None:
    events, db = _run(tmp_path)
    step = -1
    uncached_later_steps = []
    for event in events:
        if event["type"] == "turn_start":
            step = event["step"]
        elif event["type"] == "usage" and step > 0 and event["cache_read_input_tokens"] == 0:
            uncached_later_steps.append(step)
    assert not uncached_later_steps, "a step after the first of its turn read nothing from the cache"
    assert sum(e["type"] == "usage" for e in events) == READS + 2

    with Store(db) as store:
        [(session, *_)] = store.list_sessions()
        ctx = SessionContext.load(store, session.id, Config())
    archived_results = sum(isinstance(p, ToolResultPart) for m in ctx.messages if m.id in ctx.overlay.archived
                           for p in m.parts)
    passes = [e for e in events if e["type"] == "plan_applied" and e["strategy"] == "archive"]
    assert passes and len(passes) * 10 <= archived_results
    digests = [m for m in ctx.messages if m.kind == "tool_summary" and ctx.view().item_for(m.id) is not None]
    assert len(digests) <= 1

    assert [e for e in events if e["type"] == "compaction_end" and not e.get("error")], "the paste compacted"
    [pasted] = [m for m in ctx.messages if m.role == "user" and m.text.startswith("please fix the failing test")]
    assert ctx.view().item_for(pasted.id) is not None, "the newest user message was summarised away"
