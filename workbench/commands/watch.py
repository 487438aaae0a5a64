"""watch: follow a transcript another agent is still writing.

On a terminal it opens the workbench's watch view (new messages and the budget
as they arrive); ``--plain``, ``--once`` and ``--json``, or output that is not a
terminal, print what arrives instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.commands._common import EXIT_OK, AddCommand, Environment
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.formats import FOLLOWABLE
from workbench.tui.pacing import WATCH_INTERVAL

if TYPE_CHECKING:
    from workbench.engine.sources.watch import LiveUpdate

PLAIN_INTERVAL = 1.0


def register(add: AddCommand) -> None:
    p = add("watch", "follow a Claude Code or Codex transcript as it is written (Ctrl-C stops)", cmd_watch)
    p.add_argument("path", help="the .jsonl transcript")
    p.add_argument("--format", choices=FOLLOWABLE, help="transcript format (default: detected)")
    p.add_argument("--interval", type=float, default=None,
                   help=f"seconds between polls (default: {WATCH_INTERVAL} in the workbench, {PLAIN_INTERVAL:g} printed)")
    p.add_argument("--once", action="store_true", help="read what is there now, print it, and stop")
    p.add_argument("--json", action="store_true", help="print one JSON object per update")
    p.add_argument("--plain", action="store_true", help="print what arrives even on a terminal (no workbench view)")


def _print(live: LiveUpdate, as_json: bool) -> None:
    from workbench.engine.context.projection import preview_text  # deferred: the projection is for following only
    from workbench.engine.sources.watch import update_json

    follow = live.follow
    if as_json:
        print(json.dumps(update_json(live)), flush=True)
        return
    for notice in follow.notices:
        print(f"! {notice}", flush=True)
    for skipped in follow.skipped:
        print(f"! skipped line {skipped.line}: {skipped.reason}", flush=True)
    if follow.new or follow.changed:
        budget = live.budget
        used = f" · {budget.used:,} tokens ({budget.percent:.1f}%, {budget.level})" if budget else ""
        print(f"+{len(follow.new)} new, {len(follow.changed)} updated{used}", flush=True)
        for message in follow.new:
            preview = preview_text(message.parts, 80)
            print(f"  {message.role:<9} {message.id}  {preview}", flush=True)


def cmd_watch(env: Environment, args: argparse.Namespace) -> int:
    from workbench.engine.sources.watch import LiveSession  # deferred: following loads the importers and the projection

    path = Path(args.path).expanduser()
    if not (args.once or args.json or args.plain) and sys.stdout.isatty():
        return _view(env, args, path)
    if args.once and not path.is_file():
        raise WorkbenchError(f"{path}: no such file")
    interval = PLAIN_INTERVAL if args.interval is None else args.interval
    live = LiveSession(path, args.format, env.config)
    try:
        while True:
            update = live.poll()
            if not update.follow.empty or (args.once and args.json):
                _print(update, args.json)
            if args.once and not update.follow.more:
                return EXIT_OK
            if not update.follow.more:
                time.sleep(max(0.05, interval))
    except KeyboardInterrupt:
        if not args.json:
            print("stopped", file=sys.stderr)
        return EXIT_OK


def _view(env: Environment, args: argparse.Namespace, path: Path) -> int:
    """The workbench's watch view; the database only serves its session picker (ctrl+o)."""
    from workbench.commands.app import load_app, run

    load_app()
    from workbench.tui.launch import Launch  # deferred: the app's modules load only when the app opens

    if not path.is_file():
        raise WorkbenchError(f"{path}: no such file (to wait for it to appear, add --plain)")
    interval = WATCH_INTERVAL if args.interval is None else max(0.05, args.interval)
    return run(Launch.watch(path, args.format, env.config, db=env.db_path, interval=interval))
