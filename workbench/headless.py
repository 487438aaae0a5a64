"""``workbench run``: the agent without the TUI, printing events as text or JSON lines."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from workbench.engine import events as ev
from workbench.engine.agent.loop import approve_all, refuse_all
from workbench.engine.agent.model_call import AgentError
from workbench.engine.agent.runner import prepare_run
from workbench.engine.errors import reason_of
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store


class TextPrinter:
    """Readable streaming output for a terminal or a log."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.midline = False

    def __call__(self, event: ev.Event) -> None:
        match event:
            case ev.TextDelta(text=text):
                self.out.write(text)
                self.midline = not text.endswith("\n")
            case ev.ToolCall(name=name, input=args):
                shown = ", ".join(f"{k}={v!r}" for k, v in list(args.items())[:2])
                self._line(f"→ {name}({shown[:100]})")
            case ev.ToolResult(name=name, is_error=err, bytes=size):
                self._line(f"← {name}: {'error' if err else 'ok'}, {size:,} bytes")
            case ev.Offloaded(ref_id=ref, bytes=size):
                self._line(f"  offloaded {size:,} bytes as {ref}")
            case ev.Warning(message=message):
                self._line(f"! {message}")
            case ev.Retry(attempt=n, delay=delay, reason=reason):
                self._line(f"! retry {n} in {delay:.1f} s ({reason})")
            case ev.CompactionEnd(trigger=trigger, before_tokens=b, after_tokens=a, error=err):
                self._line(f"! compaction ({trigger}) failed: {err}" if err else f"! compacted ({trigger}): {b:,} → {a:,} tokens")
            case ev.ApprovalNeeded(name=name, approved=False):
                self._line(f"! {name} refused: not approved (add --yes to allow shell and write tools)")
            case ev.ErrorEvent(message=message):
                self._line(f"error: {message}")
            case ev.TurnEnd(stop_reason="end_turn"):
                self._line("")
        self.out.flush()

    def _line(self, text: str) -> None:
        if self.midline:
            self.out.write("\n")
            self.midline = False
        self.out.write(text + "\n")


def json_printer(out: TextIO) -> ev.EventSink:
    def emit(event: ev.Event) -> None:
        out.write(event.model_dump_json() + "\n")
        out.flush()

    return emit


async def run_agent(store: Store, args: argparse.Namespace, config: Config) -> int:
    if not args.prompt and not args.scripted:
        print("workbench: error: give a PROMPT (or --scripted NAME)", file=sys.stderr)
        return 2
    printer = json_printer(sys.stdout) if args.json else TextPrinter(sys.stdout)
    refused: list[str] = []

    def sink(event: ev.Event) -> None:
        if isinstance(event, ev.ApprovalNeeded) and not event.approved:
            refused.append(event.name)
        printer(event)

    setup = prepare_run(
        store, config,
        session_id=args.session, scripted=args.scripted, model=args.model, workspace=args.workspace,
        approve=approve_all if args.yes else refuse_all, on_event=sink,
    )
    prompts = [args.prompt] if args.prompt else []
    if setup.script is not None:
        scripted = [turn.user for turn in setup.script.turns]
        prompts = prompts + scripted[1:] if prompts else scripted
    if not prompts:
        print("workbench: error: give a PROMPT (or --scripted NAME)", file=sys.stderr)
        return 2
    if not args.json:
        temporary = " (a temporary copy, removed when the run ends)" if setup.temporary else ""
        print(f"session {setup.agent.ctx.session.id} · workspace {setup.workspace}{temporary}", file=sys.stderr)
    try:
        async with setup:  # MCP servers run while the prompts do
            for prompt in prompts:
                await setup.agent.send(prompt)
    except AgentError as exc:
        print(f"workbench: error: {reason_of(exc)}", file=sys.stderr)
        return 1
    finally:
        setup.remove_workspace()
        close = getattr(setup.agent.provider, "aclose", None)
        if close is not None:
            await close()
    if refused:
        print(f"workbench: error: {refusals(refused)}", file=sys.stderr)
        return 1
    return 0


def refusals(names: list[str]) -> str:
    """Why a headless run did not do what was asked: nobody was there to approve its tool calls."""
    tools = ", ".join(dict.fromkeys(names))
    calls = f"{len(names)} tool call{'s' if len(names) != 1 else ''}"
    return f"{calls} refused ({tools}): a headless run asks no one; run again with --yes to allow them"


def cmd_run(store: Store, args: argparse.Namespace, config: Config) -> int:
    return asyncio.run(run_agent(store, args, config))
