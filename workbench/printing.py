"""Printing engine data on a plain terminal for the headless commands (Rich, no Textual)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from workbench.engine.context.budget import COMPONENT_LABELS
from workbench.engine.context.pricing import format_usd
from workbench.engine.context.session import SessionContext

REQUESTS_SHOWN = 40
"""A long session lists its latest requests in text (all of them are in ``--json``)."""


def _line(console: Console, *parts: str, style: str = "") -> None:
    """Parts joined by " · ", a new line only between parts (never after a dangling word); a part wider
    than the terminal is cut with an ellipsis."""
    width = max(20, console.width)
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    for line in lines:
        console.print(Text(line, style=style), no_wrap=True, overflow="ellipsis", crop=True)


def print_inspect(ctx: SessionContext, report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    budget = report["budget"]
    _line(console, f"{report['title'] or report['session_id']}", style="bold")
    _line(console, f"{report['format']} session {report['session_id']}", f"model {report['model'] or 'unknown'}",
          f"{report['messages']:,} messages ({report['messages_in_context']:,} in context)")
    note = f" ({report['window_note']})" if report["window_note"] else ""
    _line(console, f"window {report['context_window']:,}{note}", f"output reserve {report['output_reserve']:,}",
          f"effective window {report['effective_window']:,}")
    _line(console, f"Budget: {budget['used']:,} tokens", f"{budget['percent']:.1f}% of the effective window",
          budget["level"], budget["source_label"], style="bold")
    cost = report["cost"]
    priced = sum(1 for r in cost["requests"] if r["usd"] is not None)
    label = cost["label"]  # "$1.23", or "cost not known: …" (which says "cost" itself)
    _line(console, label if label.startswith("cost") else f"cost {label}",
          f"{priced:,} of {len(cost['requests']):,} requests priced",
          f"prices of {cost['prices_as_of']}")
    table = Table()
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
    rows = [(f"{row['position']:,}", row["role"], ", ".join(row["tools"]) or "—", f"{row['tokens']:,}", row["preview"])
            for row in report["heaviest"]]
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"), ("role", "left"), ("tool", "left"), ("tokens", "right"),
    )
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(len(columns))]
    for (column, justify), width in zip(columns, widths, strict=True):  # whole; the preview takes what is left
        heavy.add_column(column, justify=justify, no_wrap=True, min_width=max(width, len(column)))
    room = console.width - sum(max(w, len(c)) + 3 for w, (c, _) in zip(widths, columns, strict=True)) - 4
    heavy.add_column("preview", no_wrap=True, overflow="ellipsis", max_width=max(12, room))
    for row in rows:
        heavy.add_row(*row[:4], Text(row[4]))
    console.print(heavy)
    print_requests(report, console)
    for c in report["compactions"]:
        reported = c["reported_pre_tokens"]
        before = f"reported {reported:,} tokens before" if reported is not None else "no reported figure"
        facts = c.get("facts")
        kept = [f"summary kept {facts['kept']} of {facts['total']} facts"] if facts else []
        _line(console, f"compaction at {c['message_id']} ({c['trigger']})", before,
              f"estimated {c['estimated_pre_tokens']:,}", *kept)
        for fact in facts["lost"] if facts else ():
            _line(console, f"  lost {fact['kind']}: {fact['text']}", f"message {fact['message_id']}", style="dim")


def request_error(request: dict[str, Any]) -> float | None:
    """How far the estimate made before a request was from what the API reported, in % of the report."""
    reported = request["reported_input_tokens"]
    return 100 * (request["estimated_input_tokens"] - reported) / reported if reported else None


def print_requests(report: dict[str, Any], console: Console) -> None:
    """One row per API request: its model, reported and estimated input, the estimate's error, and its cost."""
    requests = report["requests"]
    if not requests:
        _line(console, "no API requests reported in this session (the budget is an estimate)", style="dim")
        return
    costs = {r["message_id"]: r for r in report["cost"]["requests"]}
    errors = [e for e in map(request_error, requests) if e is not None]
    mean = sum(abs(e) for e in errors) / len(errors) if errors else 0.0
    shown = requests[-REQUESTS_SHOWN:]
    title = (f"Requests: reported vs estimated input ({len(requests):,}; mean |error| {mean:.1f}%) · "
             f"{report['cost']['label']}")
    table = Table(title=title, caption=(f"the latest {len(shown):,} of {len(requests):,}; --json lists all"
                                        if len(shown) < len(requests) else None))
    first = len(requests) - len(shown) + 1
    rows: list[list[str]] = []
    for n, request in enumerate(shown, start=first):
        error = request_error(request)
        cost = costs.get(request["message_id"])
        usd = cost["usd"] if cost else None
        rows.append([f"{n:,}", request["message_id"], request["model"] or "unknown",
                     f"{request['reported_input_tokens']:,}", f"{request['estimated_input_tokens']:,}",
                     "—" if error is None else f"{error:+.1f}%", format_usd(usd) if usd is not None else "no price"])
    headers: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"), ("message", "left"), ("model", "left"), ("reported", "right"), ("estimated", "right"),
        ("error", "right"), ("cost", "right"),
    )
    widths = [max(len(header), *(len(row[column]) for row in rows)) for column, (header, _) in enumerate(headers)]
    # On a narrow terminal the message id gives way, never a figure: it gets what the others leave.
    widths[1] = min(widths[1], max(8, console.width - (sum(widths) - widths[1]) - 3 * len(headers) - 1))
    for (header, justify), width in zip(headers, widths, strict=True):
        table.add_column(header, justify=justify, no_wrap=True, overflow="ellipsis", min_width=width, max_width=width)
    for row in rows:
        table.add_row(*row)
    console.print(table)
