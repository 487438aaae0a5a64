"""``workbench replay`` of the largest real Claude Code fixture (2.7 MB, 152 requests), with the default policy.

Measured as a user meets it: the command's wall time from a fresh interpreter, start-up included. The first
replay of a file imports it (as every command given a file does); the figure held to the target is a replay of a
file already imported, the median of several runs; the first one's is shown beside it, for information, with
``workbench import`` of the same file (what that first replay adds).

And the proxy's policy on the way to the first byte: preparing the proxy benchmark's 150,000-token request (read,
place, steer) with the built-in policy on, planning at every request, against the same recorder without a policy,
each the median of 15. The planning itself runs on the store's thread, after the request has gone; each timed
request waits until it is done, so what is timed is what the policy adds to the request's own path.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

from tests.bench.common import FIXTURES, BenchResult, SummaryRow, median, ms
from tests.bench.proxy import body_of, conversation
from workbench.engine.settings.config import Config
from workbench.engine.settings.policies import Policy
from workbench.proxy.recorder import Recorder

NAME = "replay"
FIXTURE = FIXTURES / "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"
TARGET_SECONDS = 2.0
RUNS = 5
DECISION_TARGET_MS = 5.0
PREPARES = 15


def _timed(*args: str | Path) -> tuple[float, str]:
    """Wall seconds of one command, and its output."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"workbench {' '.join(map(str, args))} failed: {done.stderr.strip()}")
    return seconds, done.stdout


def _prepare_times(tmp: Path, policy: Policy | None) -> list[float]:
    """Times to prepare the last request of the proxy benchmark's conversation, after storing the others."""
    requests = conversation()
    recorder = Recorder(tmp / f"policy-{policy is not None}.db", home=tmp)
    if policy is not None:
        recorder.run_policy(policy, Config())
    for messages in requests[:-1]:
        recorder.finish(recorder.prepare(orjson.dumps(body_of(messages))), 200, None)
    recorder.flush()
    raw = orjson.dumps(body_of(requests[-1]))
    times: list[float] = []
    for _ in range(PREPARES):
        started = time.perf_counter()
        exchange = recorder.prepare(raw)
        times.append(time.perf_counter() - started)
        recorder.finish(exchange, 200, None)
        recorder.flush()
    recorder.close()
    return times


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    if not FIXTURE.exists():
        result.skipped = f"{FIXTURE.name} is missing"
        return result
    with tempfile.TemporaryDirectory(prefix="workbench-bench-replay-") as name:
        tmp = Path(name)
        imported, _ = _timed("--db", tmp / "import.db", "import", FIXTURE, "--json")
        first, _ = _timed("--db", tmp / "replay.db", "replay", FIXTURE, "--json")
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs = [_timed("--db", tmp / "replay.db", "replay", FIXTURE, "--json") for _ in range(RUNS)]
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime) / RUNS
        plain = median(_prepare_times(tmp, None))
        policed = median(_prepare_times(tmp, Policy(plan_every=1)))
    totals = json.loads(runs[-1][1])["totals"]
    seconds = median([s for s, _ in runs])
    table = Table(title="replay", title_justify="left")
    for header in ("case", "seconds"):
        table.add_column(header, justify="left" if header == "case" else "right")
    table.add_row(f"replay, imported already (median of {RUNS})", f"{seconds:.2f}")
    table.add_row("  its processor time (user + system, mean): what a busy machine stretches", f"{cpu:.2f}")
    table.add_row("first replay (imports the file)", f"{first:.2f}")
    table.add_row("workbench import of the file", f"{imported:.2f}")
    table.add_row("requests replayed", f"{totals['requests']}")
    table.add_row("proxy prepare of a 150k-token request, no policy", ms(plain))
    table.add_row("the same with the default policy planning every request", ms(policed))
    console.print(table)
    result.rows.append(SummaryRow(f"{NAME} of the 2.7 MB fixture, imported already", f"{seconds:.2f} s",
                                  f"≤ {TARGET_SECONDS:.0f} s",
                                  f"cpu {cpu:.2f} s; first replay {first:.2f} s (import {imported:.2f} s)",
                                  seconds <= TARGET_SECONDS))
    added = policed - plain
    result.rows.append(SummaryRow("policy decision at 150k tokens, added to first byte", ms(added),
                                  f"≤ {DECISION_TARGET_MS:.0f} ms", f"no policy {ms(plain)}",
                                  added * 1000 <= DECISION_TARGET_MS))
    return result
