"""components, and ``requests --diff``: what a proxied agent was sent, and what changed between two requests."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from workbench.commands._common import EXIT_OK, AddCommand, Environment
from workbench.engine.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.engine.context.breakdown import Breakdown, Entry
    from workbench.engine.context.request_diff import Change, RequestDiff, RequestFacts

ALIASES = {"mcp": "tools_mcp", "reminder": "reminders", "prompt": "system", "tool": "tools", "skill": "skills"}
PREVIEW = 100


def register(add: AddCommand) -> None:
    c = add("components", "what a proxied agent was sent, by budget component: system prompt blocks, memory files, "
                          "tool definitions (built-in and MCP apart), system reminders, with their tokens", cmd_components)
    c.add_argument("session", help="stored session id of a proxied session")
    c.add_argument("component", nargs="?",
                   help="list this component's entries: system, memory, skills, tools, mcp (tools_mcp), reminders")
    c.add_argument("entry", nargs="?", help="print this entry's text (its name, a unique start of it, or its number)")
    c.add_argument("--request", type=int, help="read request N (default: the session's latest)")
    c.add_argument("--json", action="store_true", help="JSON (with an entry: its text too)")


def component_name(given: str) -> str:
    from workbench.engine.context.breakdown import DRILLED

    name = ALIASES.get(given, given)
    if name not in DRILLED:
        raise WorkbenchError(f"no component {given!r}: choose one of {', '.join(DRILLED)} (or mcp)")
    return name


def cmd_components(env: Environment, args: argparse.Namespace) -> int:
    from workbench.engine.context.breakdown import breakdown

    component = component_name(args.component) if args.component else None
    with env.store() as store:
        store.get_session(args.session)
        found = breakdown(store, args.session, args.request)
    if component is None:
        _print_totals(found, as_json=args.json)
    elif args.entry is None:
        _print_entries(found, component, as_json=args.json)
    else:
        _print_entry(found.find(component, args.entry), as_json=args.json)
    return EXIT_OK


def _print_totals(found: Breakdown, *, as_json: bool) -> None:
    from workbench.engine.context.breakdown import DRILLED, entry_json
    from workbench.engine.context.budget import COMPONENT_LABELS

    totals = found.totals()
    if as_json:
        print(json.dumps({"session": found.session_id, "request": found.seq, "model": found.model, "totals": totals,
                          "entries": [entry_json(entry) for entry in found.entries]}))
        return
    print(f"request #{found.seq} of {found.session_id} ({found.model or '?'}), estimated tokens:")
    for name in DRILLED:
        print(f"  {COMPONENT_LABELS[name]:<18} {name:<10} {totals[name]:>8,}  {len(found.of(name))} entries")


def _print_entries(found: Breakdown, component: str, *, as_json: bool) -> None:
    from workbench.engine.context.breakdown import entry_json

    entries = found.of(component)
    if as_json:
        print(json.dumps({"session": found.session_id, "request": found.seq, "component": component,
                          "tokens": sum(e.tokens for e in entries), "entries": [entry_json(e) for e in entries]}))
        return
    groups = [("built-in tools", entries), ("MCP tools (numbered as `mcp`)", found.of("tools_mcp"))] \
        if component == "tools" else [("", entries)]
    for heading, group in groups:
        if heading:
            print(f"{heading}: {len(group)}, {sum(e.tokens for e in group):,} tokens")
        if not group:
            print(f"  request #{found.seq} sent none")
        for number, entry in enumerate(group, start=1):
            print(f"{number:>3}  {entry.tokens:>7,}  {entry.name}  ({entry.where})")


def _print_entry(entry: Entry, *, as_json: bool) -> None:
    from workbench.engine.context.breakdown import entry_json

    if as_json:
        print(json.dumps(entry_json(entry, text=True), ensure_ascii=False))
    else:
        print(entry.text)


# --- requests N --diff ---------------------------------------------------------------------


def print_diff(env: Environment, session_id: str, seq: int, *, as_json: bool) -> None:
    from workbench.engine.context.request_diff import diff_json, request_diff

    with env.store() as store:
        store.get_session(session_id)
        diff = request_diff(store, session_id, seq)
    if as_json:
        print(json.dumps(diff_json(diff), ensure_ascii=False))
        return
    for line in diff_lines(diff):
        print(line)


def facts_line(facts: RequestFacts) -> str:
    from workbench.engine.context.pricing import format_usd

    usage = (f"in {facts.input_tokens:,} (cache read {facts.cache_read or 0:,}, write {facts.cache_write or 0:,}) · "
             f"out {facts.output_tokens or 0:,}") if facts.input_tokens is not None else "no usage"
    cost = format_usd(facts.cost) if facts.cost is not None else "cost ?"
    steered = " · steered" if facts.steered else ""
    return f"#{facts.seq}  {facts.model or '?'}  {facts.messages} msgs  {usage} · {cost}{steered}"


def change_line(change: Change) -> str:
    where = f"#{change.message}" if change.message is not None else ""
    if change.block is not None:
        where += f".{change.block}" if where else f"block {change.block}"
    tokens = f"{change.before_tokens:,} → {change.tokens:,}" if change.before_tokens and change.tokens \
        else f"{change.tokens or change.before_tokens:,}"
    shown = " ".join((change.text or change.before).split())
    shown = shown if len(shown) <= PREVIEW else shown[:PREVIEW - 1] + "…"
    again = "" if change.new else " (as in the request before)"
    return f"  {where:>7}  {change.role:<9} {change.what:<14} {tokens:>13}  {shown}{again}"


def diff_lines(diff: RequestDiff) -> list[str]:
    from workbench.engine.context.request_diff import CHANGE_KINDS, CHANGE_LABELS

    lines = [f"request {facts_line(diff.request)}"]
    lines.append(f"against {facts_line(diff.previous)}" if diff.previous is not None
                 else "the session's first request: everything in it is new")
    for kind in CHANGE_KINDS:
        changes = diff.of(kind)
        if changes:
            lines.append(f"{CHANGE_LABELS[kind]} ({len(changes)}):")
            lines.extend(change_line(change) for change in changes)
    if not diff.changes:
        lines.append("no change")
    return lines
