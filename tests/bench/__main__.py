"""``python -m tests.bench``: run the benchmarks, print measured vs target vs baseline.

Each benchmark runs in a process of its own, so what one leaves behind (a large
heap for the garbage collector to walk, a peak RSS that a child inherits) never
shows in the next one's figures. Exit status 1 if any target is missed, unless
``--no-fail``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tests.bench import (
    accuracy,
    compaction,
    facts,
    import_bounds,
    importing,
    incremental,
    proxy,
    proxy_openai,
    replay,
    strategies,
    tui,
    turn,
)
from tests.bench.common import REPO_ROOT, BenchResult, SummaryRow

BENCHMARKS: dict[str, Callable[[Console], BenchResult]] = {
    accuracy.NAME: accuracy.run,
    incremental.NAME: incremental.run,
    compaction.NAME: compaction.run,
    facts.NAME: facts.run,
    strategies.NAME: strategies.run,
    turn.NAME: turn.run,
    tui.NAME: tui.run,
    proxy.NAME: proxy.run,
    proxy_openai.NAME: proxy_openai.run,
    importing.NAME: importing.run,
    import_bounds.NAME: import_bounds.run,
    replay.NAME: replay.run,
}


def _status(row: SummaryRow) -> str:
    if row.passed is None:
        return "[dim]info[/]"
    return "[green]pass[/]" if row.passed else "[bold red]FAIL[/]"


def summary_table(results: list[BenchResult]) -> Table:
    table = Table(title="summary", title_justify="left")
    for header in ("name", "measured", "target", "baseline", "result"):
        table.add_column(header, justify="left" if header in ("name", "baseline") else "right")
    for result in results:
        if result.skipped:
            table.add_row(result.name, "–", "–", "–", "[yellow]skipped[/]")
            continue
        for row in result.rows:
            table.add_row(row.name, row.measured, row.target, row.baseline, _status(row))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument(
        "--only", action="append", choices=sorted(BENCHMARKS), metavar="NAME",
        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even if a target is missed")
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)  # set for the per-benchmark child
    args = parser.parse_args(argv)
    if args.result_file is not None:
        return _child(args.only or [], args.result_file)

    console = Console(width=None if sys.stdout.isatty() else 150, highlight=False)
    compile_modules()
    selected = args.only or list(BENCHMARKS)
    results: list[BenchResult] = []
    started = time.perf_counter()
    for name in selected:
        console.rule(f"[bold]{name}")
        t0 = time.perf_counter()
        result = _in_own_process(name)
        result.seconds = time.perf_counter() - t0
        if result.skipped:
            console.print(f"[yellow]skipped {name}:[/] {result.skipped}")
        console.print(f"[dim]{name} took {result.seconds:.1f} s[/]\n")
        results.append(result)

    console.rule("[bold]summary")
    console.print(summary_table(results))
    failed = [r.name for r in results if r.failed]
    skipped = [r.name for r in results if r.skipped]
    note = f"{time.perf_counter() - started:.1f} s" + (f"; skipped: {', '.join(skipped)}" if skipped else "")
    if failed:
        console.print(f"[bold red]targets missed in: {', '.join(failed)}[/] ({note})")
    else:
        console.print(f"[green]all targets met[/] ({note})")
    return 1 if failed and not args.no_fail else 0


def compile_modules() -> None:
    """Every module of the workbench and of the benchmarks compiled, as an installed workbench's are: a checkout run
    with PYTHONDONTWRITEBYTECODE (which the children inherit) would otherwise compile them again in every process
    that a benchmark starts, and time it."""
    for folder in ("workbench", "tests"):
        compileall.compile_dir(REPO_ROOT / folder, quiet=1)


def _in_own_process(name: str) -> BenchResult:
    """Run one benchmark in a fresh interpreter; its tables print as it goes, its summary comes back as JSON."""
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as tmp:
        out = Path(tmp) / "result.json"
        code = subprocess.run([sys.executable, "-m", "tests.bench", "--only", name, "--result-file", str(out)],
                              check=False).returncode
        if code != 0 or not out.exists():
            return BenchResult(name, [SummaryRow(f"{name}: the benchmark crashed (exit {code})", "–", "–", "–", False)])
        data = json.loads(out.read_text())
    return BenchResult(data["name"], [SummaryRow(**row) for row in data["rows"]], data["skipped"])


def _child(names: list[str], result_file: Path) -> int:
    console = Console(width=None if sys.stdout.isatty() else 150, highlight=False)
    [name] = names
    result = BENCHMARKS[name](console)
    result_file.write_text(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
