"""import, inspect, sessions: transcripts in, reports out."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.commands._common import EXIT_OK, FORMATS, AddCommand, Environment, resolve, warn_skipped
from workbench.commands._progress import import_progress, wanted

if TYPE_CHECKING:
    from workbench.engine.context.session import SessionContext
    from workbench.engine.sources.session_list import ListedSession


def register(add: AddCommand) -> None:
    p = add("import", "store a transcript and print what was stored: messages, tokens, skipped lines, session id",
            cmd_import)
    p.add_argument("path", type=Path)
    p.add_argument("--format", choices=FORMATS, help="transcript format (default: detected)")
    p.add_argument("--json", action="store_true", help="print a JSON object")

    p = add("inspect", "print a session's token budget, requests and compactions", cmd_inspect)
    p.add_argument("target", help="transcript file or stored session id")
    p.add_argument("--format", choices=FORMATS, help="transcript format (default: detected)")
    p.add_argument("--json", action="store_true", help="print a JSON object")

    p = add("sessions", "list stored sessions", cmd_sessions)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--discover", action="store_true", help="list other agents' sessions found on this machine")
    p.add_argument("--delete", metavar="ID",
                   help="remove a stored session and everything it owns (messages, steering, sub-agent sessions)")


def cmd_import(env: Environment, args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from workbench.engine.transcript.token_process import counting_process
    from workbench.gc_policy import paused

    # First, before the models load: the tokenizer's vocabulary loads in the counting process meanwhile. The
    # program starts it even before the parser (``cli._head_start``); a caller that did not has it started here.
    started = getattr(args, "counting", None)
    with paused(), (nullcontext(started) if started is not None else counting_process()) as process:
        from workbench.engine.transcript.importers import (
            import_file,  # deferred: the importers are heavy; `sessions` is not
        )
        from workbench.engine.transcript.subagent_links import find_subagents, peak_inputs

        with env.store() as store, import_progress(args.path, wanted(args.json)) as progress:
            parsed = import_file(store, args.path, args.format, progress, keep_messages=False, process=process)
            if process is not None:
                process.stop()  # every part is counted: it ends while the rest is done
            started = find_subagents(store, parsed.session.id)
            peaks = peak_inputs(store, (sid for ids in started.values() for sid in ids))
            from workbench.engine.context.import_state import keep_imported_view  # deferred: the context layer

            keep_imported_view(store, parsed.session.id)  # the open that follows starts from it
            tokens = store.part_tokens(parsed.session.id)
    subagents = [{"session_id": sid, "parent_message": message, "peak_input": peaks.get(sid)}
                 for message, ids in started.items() for sid in ids]
    skipped = [s.model_dump() for s in parsed.skipped_lines]
    if args.json:
        print(json.dumps({"session_id": parsed.session.id, "messages": parsed.stored, "tokens": tokens,
                          "skipped_lines": skipped, "subagents": subagents, "warnings": parsed.warnings}))
    else:
        # One line; the id last, so ``awk '{print $NF}'`` reads it (``--json`` is the contract for scripts).
        count = len(parsed.skipped_lines)
        print(f"imported {parsed.stored:,} message{'s' if parsed.stored != 1 else ''} · {tokens:,} tokens · "
              f"{count:,} skipped line{'s' if count != 1 else ''} · session {parsed.session.id}")
        for sub in subagents:
            peak = f", peak input {sub['peak_input']:,}" if sub["peak_input"] else ""
            print(f"sub-agent {sub['session_id']} started by message {sub['parent_message']}{peak}", file=sys.stderr)
        warn_skipped(parsed.skipped_lines)
        for warning in parsed.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


def cmd_inspect(env: Environment, args: argparse.Namespace) -> int:
    # Deferred: the context and its report pull in most of the engine; listing sessions needs none of it.
    from workbench.engine.context.report import inspect_report
    from workbench.engine.context.session import SessionContext

    with env.store() as store:
        session_id, skipped = resolve(store, args.target, args.format)
        ctx = SessionContext.load(store, session_id, env.config)
    report = inspect_report(ctx, skipped)
    _add_fact_checks(ctx, report)
    if args.json:
        print(json.dumps(report))
    else:
        from workbench.printing import print_inspect

        print_inspect(ctx, report)
        warn_skipped(skipped)
    if report["model_warning"]:
        print(f"warning: {report['model_warning']}", file=sys.stderr)
    return EXIT_OK


def _add_fact_checks(ctx: SessionContext, report: dict[str, Any]) -> None:
    """Each compaction's ``facts``: which facts of the span it replaced its summary keeps (None when unknown)."""
    from workbench.engine.plans.fact_check import past_checks

    checks = dict(past_checks(ctx))
    for compaction in report["compactions"]:
        found = checks.get(compaction["message_id"])
        compaction["facts"] = found.as_json() if found is not None else None


def cmd_sessions(env: Environment, args: argparse.Namespace) -> int:
    if args.discover:
        from workbench.commands.discover import cmd_discover

        return cmd_discover(env, args)
    if args.delete is not None:
        return _delete(env, args.delete, args.json)
    from workbench.engine.sources.session_list import session_list
    from workbench.engine.transcript.redaction import redact

    with env.store() as store:
        rows = session_list(store)
    # A listing is shared like a report: titles (a user's first message) have key-like secrets redacted.
    if args.json:
        print(json.dumps([{**row.as_json(), "title": redact(row.session.title) if row.session.title else None}
                          for row in rows]))
        return EXIT_OK
    if rows:
        print("\n".join(_session_lines(rows, redact)))
    return EXIT_OK


def _session_lines(rows: list[ListedSession], redact: Callable[[str], str]) -> list[str]:
    """One aligned row per session, those that belong to a session indented under it."""
    from workbench.commands._columns import columns
    from workbench.engine.context.pricing import format_usd
    from workbench.engine.sources.session_list import home_relative
    from workbench.engine.transcript.store import DAMAGED

    table = []
    for row in rows:
        s, used = row.session, row.usage
        moment = s.updated_at or s.created_at
        title = row.role if row.role in ("title call", "side call") else " ".join(redact(s.title or "(untitled)").split())
        if s.metadata.get(DAMAGED):
            title = f"[damaged: {s.metadata[DAMAGED]}] {title}"
        table.append([s.id, moment.strftime("%Y-%m-%d %H:%M") if moment else "—", f"{row.messages:,}",
                      f"{used.context_tokens:,}" if used else "—",
                      format_usd(used.cost_usd) if used and used.cost_usd is not None else "—",
                      s.source_format, row.agent_session or "—",
                      home_relative(row.directory) if row.directory else "—",
                      row.branch + title])
    header = ["id", "last used", "messages", "context", "cost", "format", "agent session", "directory", "title"]
    return columns(header, table, right=(2, 3, 4))


def _delete(env: Environment, session_id: str, as_json: bool) -> int:
    from workbench.engine.agent.subagents import outputs_root  # deferred: the sub-agent tools are heavy
    from workbench.engine.transcript.sessions import delete_session

    with env.store() as store:
        deleted = delete_session(store, session_id, outputs_root(env.config.subagents))
    if as_json:
        print(json.dumps({"deleted": deleted.session.id, "messages": deleted.messages,
                          "subagent_sessions": list(deleted.subagents), "side_calls": list(deleted.side_calls),
                          "warnings": deleted.warnings}))
    else:
        print(f"deleted {deleted.describe()}")
        for warning in deleted.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK
