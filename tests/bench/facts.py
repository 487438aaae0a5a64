"""Which facts a summary keeps, on a 150,000-token span.

The span is the incremental benchmark's synthetic session (prompts, tool loops, results of realistic sizes),
cut where it reaches 150,000 tokens (at the compaction prompt's characters per token). Timed: extracting the
span's facts and checking them against a 20,000-character summary that keeps every other one (target: median
≤ 200 ms), what a preview does once; for information, the check alone, which the compaction pane repeats as
the user edits the summary.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow, median, ms
from tests.bench.incremental import SyntheticSession
from workbench.engine.plans.compaction_prompt import CHARS_PER_TOKEN
from workbench.engine.plans.fact_check import check
from workbench.engine.plans.facts import extract
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart, ToolUsePart

NAME = "facts"
SPAN_TOKENS = 150_000
REPETITIONS = 15
TARGET_SECONDS = 0.200


def _chars(message: Message) -> int:
    size = 0
    for part in message.parts:
        if isinstance(part, TextPart | ToolResultPart):
            size += len(part.text)
        elif isinstance(part, ToolUsePart):
            size += sum(len(str(v)) for v in part.input.values())
    return size


def _span() -> list[Message]:
    source = SyntheticSession("bench-facts")
    span: list[Message] = []
    chars = 0
    while chars < SPAN_TOKENS * CHARS_PER_TOKEN:
        span.append(source.next())
        chars += _chars(span[-1])
    return span


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    span = _span()
    facts = extract(span)
    summary = "\n".join(f.text for f in facts[::2])[:20_000].ljust(20_000, ".")
    times, check_times = [], []
    kept = check(facts, summary)
    for _ in range(REPETITIONS):
        t0 = time.perf_counter()
        kept = check(extract(span), summary)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        check(facts, summary)
        check_times.append(time.perf_counter() - t0)
    total, alone = median(times), median(check_times)
    table = Table(title=f"facts — extract and check a {SPAN_TOKENS:,}-token span (target: median ≤ "
                        f"{ms(TARGET_SECONDS)})", title_justify="left")
    for column in ("measure", "value"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row("messages in the span", f"{len(span):,}")
    table.add_row("facts / kept by the summary", f"{kept.total:,} / {kept.kept:,}")
    table.add_row("extract + check median / min / max", f"{ms(total)} / {ms(min(times))} / {ms(max(times))}")
    table.add_row("check alone (each edit of the summary)", ms(alone))
    console.print(table)
    result.rows.append(SummaryRow(f"{NAME} extract + check 150k tokens", ms(total), f"≤ {ms(TARGET_SECONDS)}", "–",
                                  total <= TARGET_SECONDS))
    result.rows.append(SummaryRow(f"{NAME} check alone 150k tokens", ms(alone), "–", "–", None))
    return result
