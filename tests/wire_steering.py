"""Steering a proxied session and reading what its agent's next request carried: one proxy in front of a loopback
Messages API that records every request, an agent's history that grows by a turn per request, and the
workbench's own actions (the same engine calls the command line and the app make) in between.

``Wire.check`` states the product's rule: what the proxy forwards is the workbench's projection of the session
(same messages, same order, same blocks), and a request the API accepts.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import anthropic
from loopback_api import LoopbackAPI, Reply, check_wire_messages, text, tool_use
from proxy_support import SYSTEM, request

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.compaction import Compactor, NothingToCompact
from workbench.engine.plans.compaction_history import undo_compaction
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import redo, undo
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.plans.strategies.registry import plan_strategy
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store
from workbench.proxy.exchange import Exchange
from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings

KEY = "sk-ant-api03-wire-test-key-0123456789"
Action = Literal["pin", "unpin", "prune", "restore", "offload", "inline", "archive", "unarchive", "strategy",
                 "compact", "undo_compaction", "undo", "redo"]
WIRE_ACTIONS: tuple[Action, ...] = get_args(Action)
STRATEGIES = ("dedup", "supersede_writes", "purge_errors", "tool_output_pruning", "offload", "archive")
SMALL_TAIL = "[compaction]\ntail_min = 0\ntail_max = 400\nkeep_recent_tokens = 300\nkeep_recent_messages = 2\n"
"""The compaction settings of :data:`CONFIG`, as a config file for the command line and the app."""
CONFIG = Config.model_validate({
    "strategies": {"dcp": {"turn_protection": 1}, "purge_errors": {"turns": 1}, "archive": {"cutoff": 3},
                   "tool_output_pruning": {"protect": 300, "minimum": 100, "skip_turns": 1}},
    "compaction": {"tail_min": 0, "tail_max": 400, "keep_recent_tokens": 300, "keep_recent_messages": 2},
})
"""Small enough thresholds that every strategy and the compaction find something in a short history."""


def user(value: str) -> dict[str, Any]:
    return {"role": "user", "content": [text(value)]}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def result(tool_id: str, content: str, *, error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def history(n: int) -> list[dict[str, Any]]:
    """A coding agent's history: reads (one repeated), writes (one superseded), a failed command, several turns."""
    source = "".join(f"def f{i}(x):\n    return x * {i}\n" for i in range(40))
    return [
        user(f"Task {n}: fix the failing test in calc.py"),
        assistant(text("Reading the module."), tool_use(f"t{n}a", "Read", {"file_path": "calc.py"})),
        result(f"t{n}a", source),
        assistant(tool_use(f"t{n}b", "Read", {"file_path": "calc.py"})),
        result(f"t{n}b", source),
        assistant(tool_use(f"t{n}c", "Write", {"file_path": "calc.py", "content": source + "# v1\n"})),
        result(f"t{n}c", "File written."),
        assistant(tool_use(f"t{n}d", "Bash", {"command": "pytest -q"})),
        result(f"t{n}d", "Traceback (most recent call last):\n" + "  File 'calc.py'\n" * 30 + "AssertionError",
               error=True),
        assistant(tool_use(f"t{n}e", "Write", {"file_path": "calc.py", "content": source + "# v2\n"})),
        result(f"t{n}e", "File written."),
        assistant(text("Fixed: the tests pass now.")),
        user("Now update the notes."),
        assistant(tool_use(f"t{n}f", "Read", {"file_path": "NOTES.md"})),
        result(f"t{n}f", "notes\n" * 300),
        assistant(text("The notes are up to date.")),
        user("Thanks. Anything else?"),
    ]


def plain(block: Any) -> Any:
    """A block as the model reads it: its cache mark is the agent's, not content."""
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, Mapping) else block


def plain_messages(messages: Any) -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for message in messages:
        content = message["content"]
        blocks = [text(content)] if isinstance(content, str) else [plain(b) for b in content]
        out.append((message["role"], blocks))
    return out


def check_request(messages: list[dict[str, Any]]) -> None:
    """A request the Messages API accepts: alternating roles from a user message, each call answered next,
    no empty content, at most 4 cache marks."""
    check_wire_messages(messages)
    marks = sum(1 for m in messages if isinstance(m["content"], list)
                for b in m["content"] if isinstance(b, Mapping) and "cache_control" in b)
    assert marks <= 4, f"{marks} cache_control marks"


@dataclass
class Conversation:
    """One agent's conversation through the proxy: the history it sends, growing by a turn per request."""

    wire: Wire
    messages: list[dict[str, Any]]
    session_id: str = ""
    turns: int = 0

    def send(self, answer: Callable[[dict[str, Any]], Reply] | None = None) -> list[dict[str, Any]]:
        """Send the history (as the agent would), take the answer into it; returns what upstream received.
        ``answer``: how the upstream answers the request it received (default: a line of text)."""
        self.turns += 1
        reply = answer or (lambda body: Reply([text(f"Answer {self.turns}.")]))
        answered: list[Reply] = []
        self.wire.api.queue(lambda body: answered.append(reply(body)) or answered[-1])
        before = len(self.wire.api.requests)
        system = [*SYSTEM, text(f" - Primary working directory: {self.wire.cwd}")]
        self.wire.client.messages.create(**request(self.messages, system=system))
        self.wire.recorder.settle()
        sent: list[dict[str, Any]] = self.wire.api.requests[before].body["messages"]
        self.messages = [*self.messages, assistant(*answered[0].blocks), user(f"Go on ({self.turns}).")]
        placement = self.wire.reports[-1].placement
        assert placement is not None, "the proxy placed the request in a session"
        self.session_id = placement.thread.session_id
        return sent

    def context(self, store: Store) -> SessionContext:
        return SessionContext.load(store, self.session_id, CONFIG)

    def projection(self) -> list[dict[str, Any]]:
        """The workbench's view of the session as the API gets it, less the answer just stored (the request
        that was forwarded is the view up to its last user message)."""
        with Store(self.wire.db) as store:
            wire = list(self.context(store).view().wire)
        assert wire and wire[-1]["role"] == "assistant", "the answer is the view's last message"
        return wire[:-1]

    def check(self) -> list[dict[str, Any]]:
        """Send, and hold the rule: forwarded == projection, and valid."""
        sent = self.send()
        check_request(sent)
        assert plain_messages(sent) == plain_messages(self.projection()), "forwarded request differs from the view"
        return sent

    def act(self, action: Action, target: int) -> str:
        """One steering action as the command line makes it; returns what happened (or why it was refused)."""
        with Store(self.wire.db) as store:
            ctx = self.context(store)
            before = [(e.id, e.undone) for e in store.load_overlay(self.session_id)]
            try:
                return self._act(store, ctx, action, target)
            except (WorkbenchError, NothingToCompact) as exc:
                after = [(e.id, e.undone) for e in store.load_overlay(self.session_id)]
                assert after == before, f"{action} was refused ({exc}) yet changed the overlay"
                assert "\n" not in str(exc), f"a refusal is one line: {exc!r}"
                return f"refused: {exc}"

    def _act(self, store: Store, ctx: SessionContext, action: Action, target: int) -> str:
        messages = [m for m in ctx.messages if m.role in ("user", "assistant") and m.kind == "message"]
        match action:
            case "pin" | "unpin" | "prune" | "restore" | "offload" | "inline" | "archive" | "unarchive":
                message = messages[target % len(messages)]
                plan = measure(ctx, plan_action(ctx, action, message, CONFIG.strategies))
                apply(store, ctx, plan)
                return f"{action} #{message.index + 1}: {len(plan.items)} item(s)"
            case "strategy":
                plan = plan_strategy(ctx, STRATEGIES[target % len(STRATEGIES)], CONFIG)
                apply(store, ctx, plan)
                return f"{plan.strategy}: {len(plan.items)} item(s)"
            case "compact":
                compactor = Compactor(store, ctx, CONFIG.compaction)
                preview = asyncio.run(compactor.preview("manual", None, summarizer="heuristic"))
                asyncio.run(compactor.apply(preview))
                return f"compacted: {len(preview.summarized)} summarised"
            case "undo_compaction":
                return f"undid {undo_compaction(store, ctx).plan_id}"
            case "undo":
                return f"undid {undo(store, ctx).strategy}"
            case "redo":
                return f"redid {redo(store, ctx).strategy}"


@dataclass
class Wire:
    """The proxy, its recorder and the loopback upstream, shared by many conversations."""

    api: LoopbackAPI
    recorder: Recorder
    server: ProxyServer
    db: Path
    client: anthropic.Anthropic
    cwd: Path
    """The agent's working directory, named in its system prompt as Claude Code names it: offload and archive
    write there the files the agent reads back (its requests carry ``Read``)."""
    reports: list[Exchange] = field(default_factory=list)
    numbers: Iterator[int] = field(default_factory=itertools.count)

    def conversation(self) -> Conversation:
        return Conversation(self, history(next(self.numbers)))


@contextmanager
def wire(tmp_path: Path) -> Iterator[Wire]:
    db = tmp_path / "wire.db"
    cwd = tmp_path / "work"
    cwd.mkdir()
    with LoopbackAPI() as api:
        reports: list[Exchange] = []
        recorder = Recorder(db, home=tmp_path, report=reports.append)
        server = ProxyServer(ProxySettings(db_path=db, upstream=api.url, port=0), recorder).start()
        try:
            yield Wire(api, recorder, server, db, anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0),
                       cwd, reports)
        finally:
            server.stop()
            recorder.close()
