"""discover: sessions of other agents (Claude Code, Codex, OpenCode) found on this machine."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench.commands._common import EXIT_OK, AddCommand, Environment


def register(add: AddCommand) -> None:
    p = add("discover", "list Claude Code, Codex and OpenCode sessions on this machine", cmd_discover)
    add_discover_arguments(p)


def add_discover_arguments(p: argparse.ArgumentParser) -> None:
    """Shared with ``sessions --discover``."""
    p.add_argument("--in", dest="extra_dirs", metavar="DIR", type=Path, action="append", default=[],
                   help="also look for transcript files (e.g. OpenCode exports) in DIR; may be repeated")
    p.add_argument("--limit", type=int, default=50, help="show at most this many, newest first (0: all)")
    p.add_argument("--json", action="store_true", help="print JSON")


def cmd_discover(env: Environment, args: argparse.Namespace) -> int:
    from workbench.engine.sources.discovery import discover  # deferred: discovery loads the importers

    found = discover(getattr(args, "extra_dirs", []) or [])
    limit = getattr(args, "limit", 50)
    sessions = found.sessions[:limit] if limit and limit > 0 else found.sessions
    if args.json:
        print(json.dumps({"sessions": [s.to_json() for s in sessions], "total": len(found.sessions),
                          "notices": found.notices}))
        return EXIT_OK
    for notice in found.notices:
        print(f"warning: {notice}", file=sys.stderr)
    if not sessions:
        print("no Claude Code, Codex or OpenCode sessions found under your home directory", file=sys.stderr)
        return EXIT_OK
    for s in sessions:
        when = s.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        size = f"{s.size / 1024:,.0f} KB" if s.size else "-"
        print(f"{when}  {s.format:<11} {size:>9}  {s.title or '(untitled)'}")
        print(f"    {s.path}" if s.openable else f"    {s.path}\n    to open it: {s.hint}")
    if len(found.sessions) > len(sessions):
        print(f"… {len(found.sessions) - len(sessions)} more (--limit 0 shows all)", file=sys.stderr)
    print("open one with: workbench open PATH", file=sys.stderr)
    return EXIT_OK
