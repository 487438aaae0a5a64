"""Engine overhead of one agent turn at 10,000 messages: everything but the model's own time.

A turn here is what the agent loop does around a model call: store the new
messages, append them to the live context, refresh the prompt sections,
compute the budget and render the request from the view. The baseline does
the same turn naively: project the whole session again and render every
message from scratch, as a loop without the incremental view would.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow, median
from workbench.engine.agent.prompt import BASE_INSTRUCTIONS, fixed_items
from workbench.engine.agent.tools import builtin_tools
from workbench.engine.agent.wire import build_request
from workbench.engine.context.projection import project
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.blocks import append_wire, blocks_of
from workbench.engine.transcript.models import Message, Session, TextPart, ToolResultPart, ToolUsePart, Usage
from workbench.engine.transcript.overlay import fold
from workbench.engine.transcript.store import Store

NAME = "turn"
MESSAGES = 10_000
TURNS = 60
TARGET_MS = 5.0
MODEL = "claude-sonnet-4-5"


def _session_messages(session_id: str, count: int) -> list[Message]:
    out: list[Message] = []
    for i in range(count):
        if i % 3 == 0:
            out.append(Message(id=f"m{i}", session_id=session_id, index=i, role="user",
                               parts=[TextPart(text=f"step {i}: please look at module {i % 97} " * 4)]))
        elif i % 3 == 1:
            out.append(Message(id=f"m{i}", session_id=session_id, index=i, role="assistant", model=MODEL,
                               parts=[TextPart(text="Reading it. " * 8),
                                      ToolUsePart(id=f"t{i}", name="read_file", input={"path": f"src/m{i}.py"})],
                               usage=Usage(input_tokens=2_000 + 40 * i, output_tokens=60, model=MODEL)))
        else:
            out.append(Message(id=f"m{i}", session_id=session_id, index=i, role="user", kind="tool_result",
                               parts=[ToolResultPart(tool_use_id=f"t{i - 1}", text=f"line {i}\n" * 30)]))
    return out


def _turn_messages(session_id: str, index: int) -> list[Message]:
    """An assistant tool call and its result, with content never seen before."""
    tag = uuid.uuid4().hex
    return [
        Message(id=f"a{tag}", session_id=session_id, index=index, role="assistant", model=MODEL,
                parts=[TextPart(text=f"Next I check {tag}."),
                       ToolUsePart(id=f"tu{tag}", name="grep", input={"pattern": tag})],
                usage=Usage(input_tokens=500_000 + index, output_tokens=40, model=MODEL)),
        Message(id=f"r{tag}", session_id=session_id, index=index + 1, role="user", kind="tool_result",
                parts=[ToolResultPart(tool_use_id=f"tu{tag}", text=f"src/x.py:1: {tag}\n" * 12)]),
    ]


def run(console: Console) -> BenchResult:
    definitions = builtin_tools().definitions()
    session = Session(id="bench-turn", model=MODEL)
    messages = _session_messages(session.id, MESSAGES)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "turn.db")
        store.save_session(session)
        ctx = SessionContext(session, messages, [])
        store.save_messages(messages, ctx.counter)

        incremental: list[float] = []
        for turn in range(TURNS):
            new = _turn_messages(session.id, len(ctx.messages))
            started = time.perf_counter()
            store.save_messages(new, ctx.counter)
            for message in new:
                ctx.append(message)
            ctx.set_fixed_items(fixed_items(ctx.counter, BASE_INSTRUCTIONS, definitions, ctx.budget().percent))
            request = build_request(ctx.view(), MODEL, 4096)
            request.estimated_input_tokens = ctx.budget().used
            incremental.append((time.perf_counter() - started) * 1000)
            assert request.messages, turn

        naive: list[float] = []
        overlay = fold([])
        history = list(ctx.messages)  # what a loop without a kept view holds: the messages, projected afresh
        for _ in range(3):
            new = _turn_messages(session.id, len(history))
            started = time.perf_counter()
            store.save_messages(new, ctx.counter)
            history.extend(new)
            view = project(session.id, history, overlay, ctx.counter, model=MODEL,
                           fixed_items=fixed_items(ctx.counter, BASE_INSTRUCTIONS, definitions))
            wire: list[dict[str, object]] = []
            for item in view.items:  # render every message again, as a loop without a kept view would
                append_wire(wire, item.role or "", blocks_of(item.parts))  # type: ignore[arg-type]
            naive.append((time.perf_counter() - started) * 1000)
        store.close()

    measured = median(incremental)
    baseline = median(naive)
    table = Table(title=f"{NAME} — engine overhead of one agent turn at {MESSAGES:,} messages (target ≤ {TARGET_MS} ms)")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row(f"incremental turn: median of {TURNS}", f"{measured:.2f} ms")
    table.add_row("incremental turn: max", f"{max(incremental):.2f} ms")
    table.add_row("baseline: full re-projection + re-render, median of 3", f"{baseline:.1f} ms")
    console.print(table)
    return BenchResult(
        name=NAME,
        rows=[SummaryRow(f"turn overhead median at {MESSAGES:,} messages", f"{measured:.2f} ms",
                         f"≤ {TARGET_MS:.0f} ms", f"full re-projection {baseline:.0f} ms", measured <= TARGET_MS)],
    )
