"""Plain-terminal rendering of engine data for the headless commands (Rich, no Textual)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, JustifyMethod
from rich.table import Table

from workbench.engine.budget import COMPONENT_LABELS
from workbench.engine.context import SessionContext
from workbench.engine.pricing import format_usd
from workbench.engine.report import heaviest


def print_inspect(ctx: SessionContext, report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    budget = report["budget"]
    console.print(f"[bold]{report['title'] or report['session_id']}[/]  ({report['format']}, {report['session_id']})")
    console.print(
        f"model {report['model'] or 'unknown'} · window {report['context_window']:,}"
        f"{' (' + report['window_note'] + ')' if report['window_note'] else ''} · "
        f"output reserve {report['output_reserve']:,} · effective {report['effective_window']:,} · "
        f"{report['messages']} messages ({report['messages_in_context']} in context)"
    )
    cost = report["cost"]
    priced = sum(1 for r in cost["requests"] if r["usd"] is not None)
    console.print(
        f"cost {cost['label']} · {priced} of {len(cost['requests'])} requests priced"
        f" · prices of {cost['prices_as_of']}", highlight=False,
    )
    table = Table(title=f"Budget: {budget['used']:,} tokens, {budget['percent']:.1f}% ({budget['source']}, {budget['level']})")
    table.add_column("component")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    effective = report["effective_window"] or 1
    for name, tokens in budget["components"].items():
        if tokens:
            table.add_row(COMPONENT_LABELS.get(name, name), f"{tokens:,}", f"{100 * tokens / effective:.1f}%")
    table.add_row("Free", f"{budget['free']:,}", f"{100 * budget['free'] / effective:.1f}%", style="dim")
    console.print(table)
    heavy = Table(title="Heaviest messages in context")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"), ("role", "left"), ("id", "left"), ("tokens", "right"),
    )
    for column, justify in columns:
        heavy.add_column(column, justify=justify)
    for position, role, message_id, tokens in heaviest(ctx):
        heavy.add_row(str(position), role, message_id, f"{tokens:,}")
    console.print(heavy)
    print_requests(report, console)
    if report["compactions"]:
        for c in report["compactions"]:
            console.print(
                f"compaction at {c['message_id']} ({c['trigger']}): reported {c['reported_pre_tokens']} "
                f"tokens before, estimated {c['estimated_pre_tokens']:,}"
            )


def print_requests(report: dict[str, Any], console: Console) -> None:
    """One row per API request: its model, reported and estimated input, and what it cost."""
    requests = report["cost"]["requests"]
    if not requests:
        return
    estimates = {r["message_id"]: r for r in report["requests"]}
    table = Table(title=f"Requests: {report['cost']['label']}")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"), ("id", "left"), ("model", "left"), ("reported in", "right"), ("estimated", "right"),
        ("cost", "right"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify)
    for number, r in enumerate(requests, 1):
        estimate = estimates.get(r["message_id"])
        table.add_row(
            str(number), r["message_id"], r["model"] or "unknown",
            f"{estimate['reported_input_tokens']:,}" if estimate else "",
            f"{estimate['estimated_input_tokens']:,}" if estimate else "",
            format_usd(r["usd"]) if r["usd"] is not None else "no price",
        )
    console.print(table)
