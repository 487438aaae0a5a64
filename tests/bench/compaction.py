"""A heuristic compaction preview of a 10,000-message session.

The session is the incremental benchmark's synthetic one (prompts, tool loops, results of realistic
sizes, usage on every reply), with two pinned messages. Timed: ``Compactor.preview`` with the
offline heuristic summariser — split, metadata, prompt, summary and the exact tokens after — on a
context already loaded (target: median ≤ 200 ms). Baseline, in the same run: the naive plan of the
first version, which measured the tokens after by replaying the whole session with the plan
applied; both must agree on the tokens after. For information: applying the plan (one transaction,
snapshot included) and loading the compacted session from its snapshot versus replaying it.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow, median, ms
from tests.bench.incremental import SyntheticSession
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction import CompactionPreview, Compactor
from workbench.engine.plans.measure import new_messages
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Message, Session
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store

NAME = "compaction"
MESSAGES = 10_000
REPETITIONS = 15
BASELINE_REPETITIONS = 3
TARGET_SECONDS = 0.200
MODEL = "claude-sonnet-4-5-20250929"


def _session() -> tuple[Session, list[Message], list[OverlayEvent]]:
    session = Session(id="bench-compaction", title="synthetic", model=MODEL)
    messages = SyntheticSession(session.id).take(MESSAGES + 200)
    while len(messages) > MESSAGES and (messages[-1].role != "assistant" or messages[-1].tool_uses()):
        messages.pop()  # end where a turn ends, at or just past 10,000 messages
    pins = [m.id for m in messages[100:102]]
    events = [OverlayEvent(id=f"pin-{m}", session_id=session.id, plan_id=f"pin-{m}", action="pin", message_id=m,
                           origin="user") for m in pins]
    return session, messages, events


async def _previews(compactor: Compactor, count: int) -> tuple[CompactionPreview, list[float]]:
    """``count`` timed previews in one event loop (as the TUI or the agent makes them)."""
    plan = await compactor.preview(summarizer="heuristic")  # warm-up
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        plan = await compactor.preview(summarizer="heuristic")
        times.append(time.perf_counter() - t0)
    return plan, times


def naive_after(ctx: SessionContext, preview: CompactionPreview) -> int:
    """The first version's measurement: replay everything with the plan applied."""
    trial = ctx.fork()
    for message in new_messages(ctx, preview.plan):
        trial.append(message)
    trial.apply_events(preview.plan.events())
    return trial.budget().used


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    session, messages, events = _session()
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as folder, Store(Path(folder) / "b.db") as store:
        store.save_session(session)
        ctx = SessionContext(session, messages, events, config=Config())
        store.save_messages(messages, ctx.counter)
        store.add_overlay_events(events)
        ctx = SessionContext.load(store, session.id, Config())
        ctx.view()
        compactor = Compactor(store, ctx)

        plan, times = asyncio.run(_previews(compactor, REPETITIONS))
        preview_median = median(times)

        naive_times: list[float] = []
        naive = 0
        for _ in range(BASELINE_REPETITIONS):
            t0 = time.perf_counter()
            naive = naive_after(ctx, plan)
            naive_times.append(time.perf_counter() - t0 + preview_median)
        naive_median = median(naive_times)
        agree = naive == plan.after_tokens

        t0 = time.perf_counter()
        applied = asyncio.run(compactor.apply(plan))
        apply_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        full = SessionContext.load(store, session.id, Config())
        full.budget()
        full_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        resumed = SessionContext.load(store, session.id, Config(), use_checkpoint=True)
        resumed.budget()
        resume_seconds = time.perf_counter() - t0
        same = resumed.resumed_from == plan.plan_id and resumed.view().items == full.view().items

    table = Table(title=f"compaction — heuristic preview of a {len(messages):,}-message session "
                        f"(target: median ≤ {ms(TARGET_SECONDS)})", title_justify="left")
    for column in ("measure", "value"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row("preview median / min / max", f"{ms(preview_median)} / {ms(min(times))} / {ms(max(times))}")
    table.add_row("naive preview (full replay for the tokens after)", ms(naive_median))
    table.add_row("tokens before → after", f"{plan.before_tokens:,} → {plan.after_tokens:,}")
    counts = f"{len(plan.summarized):,} / {len(plan.preserved)} / {len(plan.tail)}"
    table.add_row("summarised / preserved / tail messages", counts)
    table.add_row("naive and planner agree on tokens after", "yes" if agree else f"NO ({naive:,})")
    table.add_row("apply (one transaction, snapshot included)", ms(apply_seconds))
    table.add_row("load after compaction: full replay / from snapshot", f"{ms(full_seconds)} / {ms(resume_seconds)}")
    table.add_row("snapshot view equals the full one", "yes" if same else "NO")
    console.print(table)

    result.rows.append(SummaryRow(f"{NAME} heuristic preview 10k", ms(preview_median), f"≤ {ms(TARGET_SECONDS)}",
                                  f"naive {ms(naive_median)}", preview_median <= TARGET_SECONDS))
    result.rows.append(SummaryRow(f"{NAME} tokens after = full replay", "yes" if agree else "no", "yes", "–", agree))
    result.rows.append(SummaryRow(f"{NAME} resume from snapshot", ms(resume_seconds), "same view",
                                  f"full {ms(full_seconds)}", same))
    result.rows.append(SummaryRow(f"{NAME} apply 10k", ms(apply_seconds), "–", "–", None))
    assert applied.after_tokens == plan.after_tokens
    return result
