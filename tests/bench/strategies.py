"""Planning every context strategy on a 10,000-message session.

The session is the incremental benchmark's synthetic one, with some calls
turned into reads of a few files (duplicates) and writes to them (superseded),
cut where the last tool loop ends. Timed: planning all six strategies with
their calibrated item estimates, from a fresh index of the view (target:
median ≤ 100 ms), with the cycle collector set as the workbench sets it at
start-up (``gc_policy``: every command and the app plan with it), and, for
information, with CPython's default thresholds (a program embedding the
engine that keeps them) and with the collector paused; for locating a
regression, the index and each planner timed on their own. Then, for
information: measuring each non-empty plan exactly (one projection with the
plan applied), and how far the estimates were from the exact totals.
Baseline, in the same run: measuring every item on its own by a full
re-projection, timed on a few items and extrapolated to all of them (running
it in full would take minutes).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow, median, ms
from tests.bench.incremental import SyntheticSession
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import measure, trial
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.strategies import base
from workbench.engine.plans.strategies.registry import STRATEGIES, enabled_plans
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Message, Session, ToolUsePart
from workbench.gc_policy import tune_for_sessions

NAME = "strategies"
MESSAGES = 10_000
REPETITIONS = 15
NAIVE_SAMPLE = 3
TARGET_SECONDS = 0.100
DEFAULT_THRESHOLDS = (700, 10, 10)
"""CPython's own."""
COLLECTOR = ("workbench", "default", "paused")
"""The cycle collector as the workbench sets it at start-up (timed against the target), with CPython's default
thresholds, and paused."""
MODEL = "claude-sonnet-4-5-20250929"
FILES = [f"/repo/src/module_{n}.py" for n in range(20)]


def _with_files(messages: Iterator[Message]) -> Iterator[Message]:
    """Every 7th call reads one of a few files, every 23rd writes one: duplicates and superseded writes."""
    calls = 0
    for message in messages:
        if message.role == "assistant" and message.tool_uses():
            parts = []
            for part in message.parts:
                if isinstance(part, ToolUsePart):
                    calls += 1
                    path = FILES[calls % len(FILES)]
                    if calls % 7 == 0:
                        part = part.model_copy(update={"name": "Read", "input": {"file_path": path}})
                    elif calls % 23 == 0:
                        content = str(part.input.get("command", "")) * 4
                        part = part.model_copy(update={"name": "Write", "input": {"file_path": path, "content": content}})
                parts.append(part)
            message = message.model_copy(update={"parts": parts})
        yield message


def session_messages(session_id: str) -> list[Message]:
    """At least ``MESSAGES`` messages, ending after a closing reply (no call waiting for its result)."""
    stream = _with_files(iter(SyntheticSession(session_id).next, None))
    out = [next(stream) for _ in range(MESSAGES)]
    while not (out[-1].role == "assistant" and not out[-1].tool_uses()):
        out.append(next(stream))
    return out


def _loop_seconds() -> float:
    t0 = time.perf_counter()
    total = 0
    for n in range(5_000_000):
        total += n
    return time.perf_counter() - t0


@contextmanager
def collector(setting: str) -> Iterator[None]:
    """The cycle collector as ``setting`` (one of :data:`COLLECTOR`) says while timing, as it was after (the other
    benchmarks run in the same process)."""
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULT_THRESHOLDS)
    if setting == "workbench":
        tune_for_sessions()
    elif setting == "paused":
        gc.disable()  # timeit's convention: how much of the time is the cycle collector
    try:
        yield
    finally:
        gc.enable()
        gc.set_threshold(*before)


def timed(ctx: SessionContext, config: Config) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU seconds of ``REPETITIONS`` plannings of all strategies under each collector setting, the
    settings taking turns (a shared machine's slow minutes fall on all of them alike)."""
    out: dict[str, tuple[list[float], list[float]]] = {setting: ([], []) for setting in COLLECTOR}
    for _ in range(REPETITIONS):
        for setting, (times, cpu) in out.items():
            gc.collect()  # each repetition starts from the same collector state; collection during it counts
            with collector(setting):
                t0, c0 = time.perf_counter(), time.process_time()
                plan_all(ctx, config)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
    return out


def plan_all(ctx: SessionContext, config: Config) -> list[Plan]:
    ctx.derived.pop(base.INDEX_KEY, None)  # time the index of the view too
    return enabled_plans(ctx, config, exact=False)


def breakdown(ctx: SessionContext, config: Config, repetitions: int) -> dict[str, float]:
    """Median seconds of the index of the view and of each planner on it, for finding what got slower."""
    times: dict[str, list[float]] = {"index of the view": [], **{name: [] for name in STRATEGIES}}
    for _ in range(repetitions):
        gc.collect()
        ctx.derived.pop(base.INDEX_KEY, None)
        t0 = time.perf_counter()
        base.session_index(ctx)
        times["index of the view"].append(time.perf_counter() - t0)
        for name, planner in STRATEGIES.items():
            t0 = time.perf_counter()
            planner(ctx, config.strategies)
            times[name].append(time.perf_counter() - t0)
    return {name: median(values) for name, values in times.items()}


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    session = Session(id="bench-strategies", title="synthetic", model=MODEL)
    messages = session_messages(session.id)
    config = Config()
    ctx = SessionContext(session, messages, events=[], config=config)
    ctx.view()

    plans = plan_all(ctx, config)
    runs = timed(ctx, config)
    times, cpu = runs["workbench"]
    default_times, paused = runs["default"][0], runs["paused"][0]
    plan_median = median(times)

    parts = breakdown(ctx, config, REPETITIONS)

    estimated = {p.strategy: p.tokens_saved for p in plans}
    exact_times: dict[str, float] = {}
    for plan in plans:
        if plan.items:
            t0 = time.perf_counter()
            measure(ctx, plan)
            exact_times[plan.strategy] = time.perf_counter() - t0
    items = sum(len(p.items) for p in plans)

    sample = [(p, item) for p in plans for item in p.items][:NAIVE_SAMPLE]
    naive: list[float] = []
    for plan, item in sample:
        single = plan.model_copy(update={"items": [item]})
        t0 = time.perf_counter()
        trial(ctx, single).budget()
        naive.append(time.perf_counter() - t0)
    per_item = median(naive)
    naive_total = per_item * items

    table = Table(
        title=f"strategies — plan all on a {len(messages):,}-message session (target: median ≤ {ms(TARGET_SECONDS)})",
        title_justify="left",
    )
    for column in ("strategy", "items", "estimated saving", "exact saving", "exact measurement"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for plan in plans:
        table.add_row(
            plan.strategy, f"{len(plan.items):,}", f"{estimated[plan.strategy]:,}", f"{plan.tokens_saved:,}",
            ms(exact_times[plan.strategy]) if plan.strategy in exact_times else "–",
        )
    console.print(table)
    summary = Table(title_justify="left")
    summary.add_column("measurement")
    summary.add_column("value", justify="right")
    summary.add_row(f"plan all {len(STRATEGIES)} strategies (estimates), the workbench's collector settings: "
                    f"median of {len(times)}", ms(plan_median))
    summary.add_row("plan all: min / max; CPU time median", f"{ms(min(times))} / {ms(max(times))}; {ms(median(cpu))}")
    summary.add_row(f"plan all, CPython's default collector thresholds: median of {len(default_times)}",
                    ms(median(default_times)))
    summary.add_row(f"plan all with the cycle collector paused (timeit's convention): median of {len(paused)}",
                    ms(median(paused)))
    for name, seconds in parts.items():
        summary.add_row(f"  of which {name} (median, timed on its own)", ms(seconds))
    summary.add_row("this machine: a 5,000,000-step Python loop (for comparison)", ms(_loop_seconds()))
    summary.add_row("exact measurement of every non-empty plan (one projection each)", ms(sum(exact_times.values())))
    summary.add_row(
        f"baseline: each of {items:,} items by a full re-projection (median of {len(naive)}, extrapolated)",
        f"{ms(per_item)} × {items:,} = {ms(naive_total)}",
    )
    console.print(summary)

    result.rows.append(
        SummaryRow(
            f"{NAME} plan all, {len(messages):,} messages (n={len(times)})",
            ms(plan_median),
            f"≤ {ms(TARGET_SECONDS)}",
            f"per-item re-projection {ms(naive_total)}",
            plan_median <= TARGET_SECONDS,
        )
    )
    result.rows.append(
        SummaryRow(f"{NAME} exact measurement of all plans", ms(sum(exact_times.values())), "–", "–", None)
    )
    return result
