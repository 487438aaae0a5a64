"""Incremental counting: one new message must cost O(that message), not O(session).

A synthetic 100,001-message session (user prompts, assistant text + tool calls,
tool results of varied, realistic sizes, usage on assistant messages with
growing input totals). The context loads the first 100,000; then each
repetition appends one freshly generated message (new content, so its count
is not cached) and recomputes the budget. Baseline, in the same run: a full
recount — a fresh ``TokenCounter`` with an empty cache, ``project`` over all
100,001 messages, then the budget of that view. The two budgets must agree.
"""

from __future__ import annotations

import random
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow, median, ms, percentile
from workbench.engine.context.budget import Budget, budget_from_view
from workbench.engine.context.projection import project
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.settings.limits import lookup
from workbench.engine.transcript.models import (
    Message,
    MessageKind,
    Part,
    Session,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from workbench.engine.transcript.overlay import OverlayState
from workbench.engine.transcript.tokens import TokenCounter

NAME = "incremental"
MESSAGES = 100_000
REPETITIONS = 200
VIEW_EVERY = 10
"""Also time a full ``view()`` snapshot after every this many appends (informational)."""
BASELINE_REPETITIONS = 3
TARGET_SECONDS = 0.002
MODEL = "claude-sonnet-4-5-20250929"
SEED = 20240611

TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write")
PROSE = ["the", "a", "of", "to", "and", "in", "is", "that", "for", "it", "with", "as", "on", "be", "this", "by", "are", "from", "or", "an", "at", "which", "not", "file", "test", "error", "value", "function", "return", "change", "line", "output", "session", "message", "context", "token", "budget", "run", "check", "we", "should", "now", "let", "me", "first", "then", "update", "add", "remove", "fix", "see", "looks", "like", "because", "when", "after", "before"]
IDENTS = ["path", "data", "item", "result", "config", "store", "view", "count", "index", "name", "text", "part", "key", "cache", "total", "limit", "request", "usage", "model", "ctx", "msg", "parts", "tokens", "items", "builder", "anchor", "window", "reserve", "state", "event", "plan"]


class SyntheticSession:
    """Deterministic messages shaped like a coding-agent session.

    Turns: a user prompt, one to six rounds of (assistant text + tool call,
    tool result), then a closing assistant reply. Text is cut from a generated
    corpus of code-like and prose lines, at random offsets and lognormal
    lengths, prefixed with the message index so no two are equal.
    """

    def __init__(self, session_id: str, seed: int = SEED) -> None:
        self.session_id = session_id
        self.rng = random.Random(seed)
        self.corpus = self._corpus()
        self.index = 0
        self.input_total = 18_000
        self.added_chars = 0
        self._stream = self._messages()

    def _corpus(self) -> str:
        """About 2 MB of code-like and prose lines, the same on every run and every machine."""
        rng = self.rng
        lines: list[str] = []
        size = 0
        while size < 2_000_000:
            if rng.random() < 0.45:
                words = rng.choices(PROSE, k=rng.randint(6, 18))
                line = " ".join(words).capitalize() + rng.choice((".", ".", ",", ":", "?"))
            else:
                name = f"{rng.choice(IDENTS)}_{rng.choice(IDENTS)}"
                args = ", ".join(rng.choices(IDENTS, k=rng.randint(0, 3)))
                line = " " * (4 * rng.randint(0, 3)) + rng.choice(
                    (
                        f"{name} = {rng.choice(IDENTS)}({args})",
                        f"def {name}(self, {args}) -> {rng.choice(('int', 'str', 'None', 'list[str]'))}:",
                        f"if {name} is not None and {rng.choice(IDENTS)} > {rng.randint(0, 9999)}:",
                        f"return {{'{rng.choice(IDENTS)}': {name}, 'n': {rng.randint(0, 99)}}}",
                        f"for {rng.choice(IDENTS)} in {name}.{rng.choice(IDENTS)}():",
                        f"{rng.choice(('src', 'tests', 'lib'))}/{name}.py:{rng.randint(1, 900)}: {rng.choice(PROSE)}",
                    )
                )
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)

    def _text(self, median_chars: float, sigma: float, low: int, high: int) -> str:
        length = int(min(high, max(low, self.rng.lognormvariate(0, sigma) * median_chars)))
        start = self.rng.randrange(0, len(self.corpus) - length)
        return f"[{self.index}] {self.corpus[start:start + length]}"

    def _message(
        self,
        role: Literal["user", "assistant"],
        parts: list[Part],
        kind: MessageKind = "message",
        usage: Usage | None = None,
    ) -> Message:
        message = Message(
            id=f"m{self.index:07d}", session_id=self.session_id, index=self.index, role=role, parts=parts,
            kind=kind, model=MODEL if role == "assistant" else None, usage=usage,
        )
        self.index += 1
        return message

    def _assistant(self, parts: list[Part]) -> Message:
        chars = sum(len(p.text) if isinstance(p, TextPart) else len(str(getattr(p, "input", ""))) for p in parts)
        # The request's input grows by what was added since the previous one and the previous reply.
        growth = round(self.added_chars / 3.6) + 4 * len(parts)
        previous = self.input_total
        self.input_total += growth
        self.added_chars = chars
        usage = Usage(
            input_tokens=3,
            cache_read_input_tokens=previous,
            cache_creation_input_tokens=self.input_total - previous - 3,
            output_tokens=max(1, round(chars / 3.6)),
            model=MODEL,
        )
        return self._message("assistant", parts, usage=usage)

    def _messages(self) -> Iterator[Message]:
        while True:
            prompt = self._text(200, 1.0, 8, 6_000)
            self.added_chars += len(prompt)
            yield self._message("user", [TextPart(text=prompt)])
            for _ in range(self.rng.randint(1, 6)):
                call_id = f"toolu_{self.index:08d}"
                tool = self.rng.choice(TOOLS)
                parts: list[Part] = []
                if self.rng.random() < 0.7:
                    parts.append(TextPart(text=self._text(220, 1.0, 8, 4_000)))
                arg = self._text(70, 0.8, 8, 1_500)
                parts.append(ToolUsePart(id=call_id, name=tool, input={"command": arg, "description": tool.lower()}))
                yield self._assistant(parts)
                output = self._text(700, 1.2, 16, 30_000)
                self.added_chars += len(output)
                is_error = self.rng.random() < 0.04
                yield self._message(
                    "user", [ToolResultPart(tool_use_id=call_id, text=output, is_error=is_error)], kind="tool_result"
                )
            yield self._assistant([TextPart(text=self._text(300, 1.0, 8, 6_000))])

    def next(self) -> Message:
        return next(self._stream)

    def take(self, n: int) -> list[Message]:
        return [self.next() for _ in range(n)]


def _rss_bytes() -> int | None:
    """Current resident set size (Linux), or None where /proc is not available."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * resource.getpagesize()


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _diff(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else after - before


def _mb(value: int | None) -> str:
    return "–" if value is None else f"{value / 2**20:,.0f} MB"


def full_recount(session: Session, messages: list[Message], config: Config) -> Budget:
    """What a non-incremental engine would do on every change."""
    view = project(session.id, messages, OverlayState(), TokenCounter(), model=session.model)
    limits, known = lookup(view.model, config.models)
    return budget_from_view(
        view, limits=limits, config=config.budget, known_model=known, context_window=session.context_window
    )


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    session = Session(id="bench-incremental", title="synthetic", model=MODEL)
    generator = SyntheticSession(session.id)
    config = Config()

    rss_start = _rss_bytes()
    t0 = time.perf_counter()
    messages = generator.take(MESSAGES + 1)
    build_seconds = time.perf_counter() - t0
    rss_messages = _rss_bytes()
    total_chars = sum(
        len(p.text) if isinstance(p, TextPart | ToolResultPart) else len(str(getattr(p, "input", "")))
        for m in messages
        for p in m.parts
    )

    t0 = time.perf_counter()
    ctx = SessionContext(session, messages[:-1], events=[], config=config)
    load_seconds = time.perf_counter() - t0
    rss_context = _rss_bytes()

    # First append: the 100,001st message, so the budget can be checked against the full recount.
    t0 = time.perf_counter()
    ctx.append(messages[-1])
    checked = ctx.budget()
    append_times = [time.perf_counter() - t0]
    view_times: list[float] = []
    for repetition in range(1, REPETITIONS):
        message = generator.next()
        t0 = time.perf_counter()
        ctx.append(message)
        ctx.budget()
        append_times.append(time.perf_counter() - t0)
        if repetition % VIEW_EVERY == 0:
            t0 = time.perf_counter()
            ctx.view()
            view_times.append(time.perf_counter() - t0)

    # Reopening the session: every count is in the cache (the store keeps them), nothing is encoded.
    t0 = time.perf_counter()
    warm = TokenCounter(dict(ctx.counter.cache))
    reopened = SessionContext(session, messages, events=[], config=config, counter=warm)
    reopen_seconds = time.perf_counter() - t0
    del reopened

    recount_times: list[float] = []
    recounted: Budget | None = None
    for _ in range(BASELINE_REPETITIONS):
        t0 = time.perf_counter()
        recounted = full_recount(session, messages, config)
        recount_times.append(time.perf_counter() - t0)
    assert recounted is not None
    agree = recounted.used == checked.used and recounted.components == checked.components

    append_median = median(append_times)
    recount_median = median(recount_times)
    table = Table(
        title=f"incremental — append one message + budget on a {MESSAGES:,}-message context "
        f"(target: median ≤ {ms(TARGET_SECONDS)})",
        title_justify="left",
    )
    table.add_column("measurement")
    table.add_column("value", justify="right")
    table.add_row("synthetic session", f"{MESSAGES + 1:,} messages, {total_chars / 1e6:,.1f} M chars")
    table.add_row("build Message objects (not timed below)", ms(build_seconds))
    table.add_row("SessionContext(...) over 100,000 messages (cold counter)", ms(load_seconds))
    table.add_row("SessionContext(...) over 100,001 messages, warm counter (reopen)", ms(reopen_seconds))
    table.add_row(f"append + budget: median of {len(append_times)}", ms(append_median))
    table.add_row("append + budget: p90 / max", f"{ms(percentile(append_times, 90))} / {ms(max(append_times))}")
    table.add_row(f"append + view() snapshot: median of {len(view_times)} (informational)", ms(median(view_times)))
    table.add_row(
        f"baseline: full recount (fresh counter) + budget: median of {len(recount_times)}",
        f"{ms(recount_median)}  ({', '.join(ms(t) for t in recount_times)})",
    )
    table.add_row("speed-up over full recount", f"{recount_median / append_median:,.0f}×")
    table.add_row(
        "incremental budget == full recount budget",
        f"{'yes' if agree else 'NO'} (used {checked.used:,} vs {recounted.used:,})",
    )
    table.add_row("RSS: 100,001 Message objects", _mb(_diff(rss_messages, rss_start)))
    table.add_row("RSS: + SessionContext (items, counts, cache)", _mb(_diff(rss_context, rss_messages)))
    table.add_row("peak RSS of the process so far", _mb(_peak_rss_bytes()))
    console.print(table)

    result.rows.append(
        SummaryRow(
            f"{NAME} append+budget median (n={len(append_times)})",
            ms(append_median),
            f"≤ {ms(TARGET_SECONDS)}",
            f"full recount {ms(recount_median)}",
            append_median <= TARGET_SECONDS,
        )
    )
    result.rows.append(
        SummaryRow(
            f"{NAME} budget equals full recount",
            "yes" if agree else f"no ({checked.used:,} vs {recounted.used:,})",
            "equal",
            "–",
            agree,
        )
    )
    result.rows.append(
        SummaryRow(
            f"{NAME} append+view() median",
            ms(median(view_times)),
            "–",
            "–",
            None,
        )
    )
    result.rows.append(SummaryRow(f"{NAME} reopen 100k, warm token cache", ms(reopen_seconds), "–", "–", None))
    result.rows.append(
        SummaryRow(
            f"{NAME} memory of 100k context",
            _mb(_diff(rss_context, rss_start)),
            "–",
            f"peak RSS {_mb(_peak_rss_bytes())}",
            None,
        )
    )
    return result
