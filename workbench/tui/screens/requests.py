"""A proxied session's requests, and the chosen one against the request before it.

Top: every stored request with its usage and cost. Below: what changed from request N−1 to N (messages
the agent added, blocks the workbench replaced, blocks the agent changed or dropped, the system prompt and
tools), made by the engine (``context.request_diff``) on a worker thread; the highlighted change's text,
with what was there before, on the right.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from workbench.engine.context.pricing import format_usd
from workbench.engine.context.request_diff import (
    CHANGE_KINDS,
    CHANGE_LABELS,
    Change,
    RequestDiff,
    RequestFacts,
    request_diff,
    session_requests,
)
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.store import Store
from workbench.tui.widgets.sent_text import SentText

BEFORE_HEADINGS = {
    "replaced": "What the agent sent",
    "restored": "What the workbench sent in its place the request before",
    "agent_changed": "In the request before",
    "agent_dropped": "In the request before",
    "prompt": "In the request before",
}


def _number(value: int | None) -> Text:
    return Text(f"{value:,}" if value is not None else "—", justify="right")


def where(change: Change) -> str:
    at = f"#{change.message}" if change.message is not None else ""
    if change.block is not None:
        at += f".{change.block}" if at else f"block {change.block}"
    return at


def tokens(change: Change) -> str:
    if change.before_tokens and change.tokens:
        return f"{change.before_tokens:,} → {change.tokens:,}"
    return f"{change.tokens:,}" if change.tokens else f"−{change.before_tokens:,}"


def summary(diff: RequestDiff) -> str:
    against = f"against #{diff.previous.seq}" if diff.previous is not None else "the session's first request"
    counts = [f"{n} {CHANGE_LABELS[kind]}" for kind, n in diff.counts().items() if n]
    return f"Request #{diff.request.seq} {against}: " + (" · ".join(counts) or "no change")


class RequestsScreen(ModalScreen[None]):
    """The request list; moving in it shows that request's changes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="requests.close"),
    ]

    DEFAULT_CSS = """
    RequestsScreen {
        align: center middle;
        & > #requests-box {
            width: 96%;
            height: 92%;
            border: round $primary;
            border-title-style: bold;
            border-subtitle-color: $text-muted;
            background: $surface;
        }
        & #requests-table { height: auto; max-height: 35%; }
        & #requests-summary { color: $text-muted; padding: 0 1; height: auto; }
        & #requests-changes { width: 3fr; height: 1fr; }
        & #requests-text { width: 2fr; }
    }
    """

    @dataclass
    class Listed(Message):
        requests: list[RequestFacts]

    @dataclass
    class Diffed(Message):
        diff: RequestDiff

    @dataclass
    class Failed(Message):
        text: str

    def __init__(self, db: Path, session_id: str, seq: int | None = None) -> None:
        super().__init__()
        self.db, self.session_id, self.seq = db, session_id, seq
        self.requests: list[RequestFacts] = []
        self.changes: list[Change] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="requests-box") as box:
            box.border_title = f"Requests of {self.session_id}"
            box.border_subtitle = "↑↓ a request · Tab to its changes · Esc closes"
            yield DataTable(id="requests-table", cursor_type="row", zebra_stripes=True)
            yield Static("Reading the session's requests…", id="requests-summary")
            with Horizontal():
                yield DataTable(id="requests-changes", cursor_type="row", zebra_stripes=True)
                yield SentText(id="requests-text")

    def on_mount(self) -> None:
        table: DataTable[str | Text] = self.query_one("#requests-table", DataTable)
        table.add_columns("#", "time", "model", "msgs", "input", "cache read", "cache write", "output", "cost",
                          "notes")
        self.list_requests()

    @work(thread=True, exclusive=True, group="requests", exit_on_error=False)
    def list_requests(self) -> None:
        try:
            with Store(self.db, checked=True) as store:
                self.post_message(self.Listed(session_requests(store, self.session_id)))
        except WorkbenchError as exc:
            self.post_message(self.Failed(str(exc)))

    @work(thread=True, exclusive=True, group="request-diff", exit_on_error=False)
    def diff(self, seq: int) -> None:
        try:
            with Store(self.db, checked=True) as store:
                self.post_message(self.Diffed(request_diff(store, self.session_id, seq)))
        except WorkbenchError as exc:
            self.post_message(self.Failed(str(exc)))

    @on(Listed)
    def listed(self, event: Listed) -> None:
        self.requests = event.requests
        table: DataTable[str | Text] = self.query_one("#requests-table", DataTable)
        for facts in self.requests:
            cost = Text(format_usd(facts.cost) if facts.cost is not None else "?", justify="right")
            table.add_row(f"#{facts.seq}", facts.created_at[11:19], facts.model or "?", _number(facts.messages),
                          _number(facts.input_tokens), _number(facts.cache_read), _number(facts.cache_write),
                          _number(facts.output_tokens), cost,
                          " · ".join(n for n in ("steered" if facts.steered else "", facts.outcome or "") if n))
        if not self.requests:
            self.query_one("#requests-summary", Static).update("This session has no stored requests.")
            return
        seqs = [facts.seq for facts in self.requests]
        table.move_cursor(row=seqs.index(self.seq) if self.seq in seqs else len(seqs) - 1)
        table.focus()

    @on(DataTable.RowHighlighted, "#requests-table")
    def request_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.requests):
            self.diff(self.requests[event.cursor_row].seq)

    @on(Diffed)
    def diffed(self, event: Diffed) -> None:
        row = self.query_one("#requests-table", DataTable).cursor_row
        if not 0 <= row < len(self.requests) or self.requests[row].seq != event.diff.request.seq:
            return  # the cursor has moved on: that request's diff comes next
        order = {kind: n for n, kind in enumerate(CHANGE_KINDS)}
        self.changes = sorted(event.diff.changes, key=lambda c: order[c.kind])
        self.query_one("#requests-summary", Static).update(summary(event.diff))
        table: DataTable[str | Text] = self.query_one("#requests-changes", DataTable)
        table.clear(columns=True)  # the columns fit each request's own changes
        table.add_columns("change", "where", "role", "what", "tokens")
        for change in self.changes:
            again = "" if change.new else " (again)"
            table.add_row(CHANGE_LABELS[change.kind] + again, where(change), change.role, change.what,
                          Text(tokens(change), justify="right"))
        if self.changes:
            self._show(0)
        else:
            self.query_one(SentText).show("No change", "This request sent what the one before it sent.")

    @on(Failed)
    def failed(self, event: Failed) -> None:
        self.query_one("#requests-summary", Static).update(event.text)

    @on(DataTable.RowHighlighted, "#requests-changes")
    def change_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    @on(DataTable.RowSelected, "#requests-changes")
    def change_selected(self) -> None:
        self.query_one(SentText).focus()

    @on(DataTable.RowSelected, "#requests-table")
    def request_selected(self) -> None:
        self.query_one("#requests-changes", DataTable).focus()

    def _show(self, row: int) -> None:
        if not 0 <= row < len(self.changes):
            return
        change = self.changes[row]
        title = f"{CHANGE_LABELS[change.kind]} · {where(change) or change.what} · {tokens(change)} tokens"
        heading = BEFORE_HEADINGS.get(change.kind)
        if change.kind == "agent_dropped":
            self.query_one(SentText).show(title, "(not in this request)", (heading or "", change.before))
        else:
            self.query_one(SentText).show(title, change.text, (heading, change.before) if heading else None)

    @on(Worker.StateChanged)
    def worker_failed(self, event: Worker.StateChanged) -> None:
        """What the worker did not expect (a database error) is said here, not lost with the worker."""
        if event.state == WorkerState.ERROR:
            self.query_one("#requests-summary", Static).update(f"Reading the requests failed: {event.worker.error}")

    def action_close(self) -> None:
        self.dismiss(None)
