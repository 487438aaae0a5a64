"""Accuracy of the live input-token estimate against what the API reported.

For every Claude Code fixture, each request the transcript records (an
assistant message with ``usage``) is compared with the estimate the engine
made just before it. Two errors per request:

- total: |estimated − reported| / reported
- delta: the same error relative to the growth since the anchor (the previous
  reported request), |estimated − reported| / |reported − anchor|. The anchor
  makes the total error small almost by construction; the delta error is the
  honest measure of how well what was *added* is counted.

Baselines, built here by walking the transcript with the same anchor logic
and no calibration: anchor + the anchor's reported output + (a) ceil(chars/4)
or (b) raw cl100k counts of everything added since.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tests.bench.common import FIXTURES, BenchResult, SummaryRow, median, pct, percentile
from workbench.engine.context import SessionContext
from workbench.engine.importers import import_file
from workbench.engine.models import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from workbench.engine.store import Store
from workbench.engine.tokens import TokenCounter, image_tokens

NAME = "accuracy"
TARGET_TOTAL = 0.005
TARGET_DELTA = 0.08
PATTERN = "claude-code__*.jsonl"


@dataclass
class _Anchor:
    base: int
    """Reported input total of the anchor request plus its reported output."""
    input_total: int
    chars: int = 0
    image_tokens: int = 0
    tiktoken: int = 0


@dataclass
class Errors:
    total: list[float] = field(default_factory=list)
    delta: list[float] = field(default_factory=list)

    def add(self, estimated: int, reported: int, anchor: int) -> None:
        self.total.append(abs(estimated - reported) / reported)
        growth = reported - anchor
        if growth != 0:
            self.delta.append(abs(estimated - reported) / abs(growth))


@dataclass
class FileResult:
    name: str
    requests: int
    anchored: int
    engine: Errors
    chars4: Errors
    tiktoken: Errors


def _part_size(part: Part, counter: TokenCounter) -> tuple[int, int, int]:
    """(characters, image tokens, raw cl100k tokens) of one part as the model reads it."""
    match part:
        case TextPart(text=text) | ThinkingPart(text=text, redacted=False):
            chars, images = len(text), 0
        case ThinkingPart():
            chars, images = 0, 0
        case ToolUsePart(name=name, input=tool_input):
            chars, images = len(name) + len(json.dumps(tool_input, ensure_ascii=False)), 0
        case ToolResultPart(text=text, images=imgs):
            chars, images = len(text), sum(image_tokens(i.width, i.height) for i in imgs)
        case ImagePart(width=w, height=h):
            chars, images = 0, image_tokens(w, h)
        case _:
            raise TypeError(f"unknown part type: {type(part).__name__}")
    return chars, images, counter.count_part(part)


def baseline_estimates(ctx: SessionContext, counter: TokenCounter) -> dict[str, tuple[int, int, int]]:
    """message id -> (anchor input total, chars/4 estimate, raw tiktoken estimate) per anchored request."""
    pivots = {p.message_id for p in ctx.overlay.pivots}
    anchors: dict[str | None, _Anchor] = {}
    out: dict[str, tuple[int, int, int]] = {}
    for message in ctx.messages:
        if message.sidechain:
            continue
        if message.id in pivots:
            anchors.clear()
        if not message.agent_visible or message.id in ctx.overlay.archived or message.kind == "compact_boundary":
            continue
        usage = message.usage
        model = usage.model if usage and usage.model else message.model
        is_request = message.role == "assistant" and usage is not None and usage.total_input > 0
        if is_request:
            anchor = anchors.get(model)
            if anchor is not None:
                out[message.id] = (
                    anchor.input_total,
                    anchor.base + anchor.image_tokens + math.ceil(anchor.chars / 4),
                    anchor.base + anchor.tiktoken,
                )
        chars, images, tokens = _sizes(message, counter)
        for anchor in anchors.values():
            anchor.chars += chars
            anchor.image_tokens += images
            anchor.tiktoken += tokens
        if is_request and usage is not None:
            anchors[model] = _Anchor(base=usage.total_input + usage.output_tokens, input_total=usage.total_input)
    return out


def _sizes(message: Message, counter: TokenCounter) -> tuple[int, int, int]:
    chars = images = tokens = 0
    for part in message.parts:
        c, i, t = _part_size(part, counter)
        chars, images, tokens = chars + c, images + i, tokens + t
    return chars, images, tokens


def measure_file(store: Store, path: Path) -> FileResult:
    parsed = import_file(store, path)
    ctx = SessionContext.load(store, parsed.session.id)
    requests = ctx.view().requests
    baselines = baseline_estimates(ctx, TokenCounter())
    engine, chars4, tiktoken = Errors(), Errors(), Errors()
    anchored = 0
    for request in requests:
        if request.anchor_input_tokens is None or request.reported_input_tokens <= 0:
            continue
        anchored += 1
        reported, anchor = request.reported_input_tokens, request.anchor_input_tokens
        engine.add(request.estimated_input_tokens, reported, anchor)
        base = baselines.get(request.message_id)
        if base is None or base[0] != anchor:
            raise AssertionError(
                f"{path.name}: baseline walk and engine disagree on the anchor of request {request.message_id}"
            )
        chars4.add(base[1], reported, anchor)
        tiktoken.add(base[2], reported, anchor)
    return FileResult(_short(path), len(requests), anchored, engine, chars4, tiktoken)


def _short(path: Path) -> str:
    stem = path.stem.removeprefix("claude-code__")
    owner_repo, _, base = stem.rpartition("__")
    label = base if len(base) <= 20 else base[:8] + "…"
    return f"{owner_repo.split('__')[-1]}/{label}"


def _mark(value: float, target: float) -> str:
    if math.isnan(value):
        return pct(value)
    style = "green" if value <= target else "bold red"
    return f"[{style}]{pct(value)}[/]"


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    files = sorted(FIXTURES.glob(PATTERN))
    if not files:
        result.skipped = f"no {PATTERN} fixtures in {FIXTURES}"
        return result
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as tmp:
        store = Store(Path(tmp) / "bench.db")
        try:
            measured = [measure_file(store, path) for path in files]
        finally:
            store.close()

    table = Table(
        title=f"accuracy — estimate before each request vs reported input tokens "
        f"(targets: median total ≤ {pct(TARGET_TOTAL, 1)}, median delta ≤ {pct(TARGET_DELTA, 0)})",
        title_justify="left",
    )
    table.add_column("fixture", no_wrap=True)
    for header in ("requests", "anchored", "total med", "total p90", "delta med", "delta p90",
                   "c/4 total", "c/4 delta", "tik total", "tik delta"):
        table.add_column(header, justify="right")
    for f in measured:
        table.add_row(
            f.name,
            str(f.requests),
            str(f.anchored),
            _mark(median(f.engine.total), TARGET_TOTAL),
            pct(percentile(f.engine.total, 90)),
            _mark(median(f.engine.delta), TARGET_DELTA),
            pct(percentile(f.engine.delta, 90), 1),
            pct(median(f.chars4.total)),
            pct(median(f.chars4.delta), 1),
            pct(median(f.tiktoken.total)),
            pct(median(f.tiktoken.delta), 1),
        )
    console.print(table)
    console.print(
        "  total = |est − reported| / reported;  delta = |est − reported| / |reported − anchor| "
        "(requests with reported = anchor left out). Baselines: anchor + anchor's output + "
        "ceil(chars/4) (c/4) or raw cl100k (tik) of what was added, no calibration. "
        "Files with no anchored request are not judged.\n"
    )

    for f in measured:
        if f.anchored == 0:
            result.rows.append(SummaryRow(f"{NAME} {f.name}", "n=0", "–", "–", None))
            continue
        result.rows.append(
            SummaryRow(
                f"{NAME} total {f.name} (n={f.anchored})",
                pct(median(f.engine.total)),
                f"≤ {pct(TARGET_TOTAL, 1)}",
                f"c/4 {pct(median(f.chars4.total))} · tik {pct(median(f.tiktoken.total))}",
                median(f.engine.total) <= TARGET_TOTAL,
            )
        )
        result.rows.append(
            SummaryRow(
                f"{NAME} delta {f.name} (n={len(f.engine.delta)})",
                pct(median(f.engine.delta), 1),
                f"≤ {pct(TARGET_DELTA, 0)}",
                f"c/4 {pct(median(f.chars4.delta), 1)} · tik {pct(median(f.tiktoken.delta), 1)}",
                median(f.engine.delta) <= TARGET_DELTA,
            )
        )
    return result
