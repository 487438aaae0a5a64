"""db: looking after the database file itself (``db check``, ``db recover``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.commands._common import EXIT_ERROR, EXIT_OK, AddCommand, Environment
from workbench.engine.transcript import db_health


def register(add: AddCommand) -> None:
    p = add("db", "check a database file, or recover what can be read from a damaged one", cmd_db)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="run SQLite's quick check on the database (read-only)")
    check.add_argument("path", type=Path, nargs="?", help="database file (default: --db or the usual one)")
    rescue = actions.add_parser("recover", help="copy what can be read from a damaged database into a new file")
    rescue.add_argument("path", type=Path, help="the damaged database (only read)")
    rescue.add_argument("out", type=Path, help="the new database file to write")


def cmd_db(env: Environment, args: argparse.Namespace) -> int:
    if args.action == "check":
        path: Path = args.path or env.db_path
        what = db_health.damage(path, db_health.FULL_CHECK_SECONDS)
        if what is not None:
            print(f"workbench: error: {db_health.damaged_message(path, what, opened=False)}", file=sys.stderr)
            return EXIT_ERROR
        print(f"{path}: no damage found")
        return EXIT_OK
    from workbench.engine.transcript.db_recover import recover  # deferred: only `db recover` needs it

    result = recover(args.path, args.out)
    rows = ", ".join(f"{n:,} {table}" for table, n in sorted(result.rows.items()) if n and table in
                     ("sessions", "messages", "parts", "overlay_events", "tool_result_blobs", "lost_and_found"))
    skipped = f"; {result.skipped_windows} unreadable stretches skipped" if result.skipped_windows else ""
    print(f"recovered into {args.out} ({result.method}): {rows or 'no rows'}{skipped}")
    print(f"open it with: workbench --db {args.out} sessions", file=sys.stderr)
    return EXIT_OK
