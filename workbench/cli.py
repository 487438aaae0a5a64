"""The ``workbench`` command: the TUI by default, and headless import / inspect."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

from workbench import locations
from workbench.engine.config import Config, load_config
from workbench.engine.context import SessionContext
from workbench.engine.errors import SessionNotFound, WorkbenchError
from workbench.engine.importers import ParsedTranscript, import_file
from workbench.engine.report import inspect_report
from workbench.engine.store import Store

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
DEMO_RESOURCE = "demo_session.jsonl"

log = logging.getLogger("workbench")


def _common(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--db", type=Path, default=default, help="database file (default: in the user data dir)")
    parser.add_argument("--config", type=Path, default=default, help="config file (default: $WORKBENCH_CONFIG or the user config dir)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="See and steer what an LLM agent has in its context window.",
    )
    _common(parser, None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _common(p, argparse.SUPPRESS)
        return p

    p = command("open", "open a transcript file or a stored session in the workbench")
    p.add_argument("target", help="transcript file or stored session id")
    p.add_argument("--format", choices=["claude-code", "codex", "opencode"], help="transcript format (default: detected)")

    command("demo", "open the bundled demo session")

    p = command("import", "store a transcript and print its session id")
    p.add_argument("path", type=Path)
    p.add_argument("--format", choices=["claude-code", "codex", "opencode"], help="transcript format (default: detected)")
    p.add_argument("--json", action="store_true", help="print a JSON object")

    p = command("inspect", "print a session's token budget, requests and compactions")
    p.add_argument("target", help="transcript file or stored session id")
    p.add_argument("--format", choices=["claude-code", "codex", "opencode"], help="transcript format (default: detected)")
    p.add_argument("--json", action="store_true", help="print a JSON object")

    p = command("run", "run the agent headless on a prompt")
    p.add_argument("prompt", nargs="?", default=None, help="the user message (a scripted run has its own)")
    p.add_argument("--session", help="continue this stored session")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--scripted", metavar="NAME", help="replay a scripted session offline ('demo' or a .json path)")
    source.add_argument("--model", help="Anthropic model to use (needs ANTHROPIC_API_KEY)")
    p.add_argument("--workspace", type=Path, help="directory the tools work in (default: the current one)")
    p.add_argument("--yes", action="store_true", help="approve shell and write tools without asking")
    p.add_argument("--json", action="store_true", help="print one JSON event per line")

    p = command("sessions", "list stored sessions")
    p.add_argument("--json", action="store_true", help="print JSON")
    return parser


class Environment:
    """Resolved paths and settings for one command run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.db_path: Path = args.db or locations.default_db_path()
        self.config: Config = load_config(args.config or locations.config_path())

    def store(self) -> Store:
        return Store(self.db_path)


def demo_path() -> Path:
    return Path(str(resources.files("workbench.data").joinpath(DEMO_RESOURCE)))


def resolve(store: Store, target: str, fmt: str | None) -> tuple[str, ParsedTranscript | None]:
    """A session id for ``target``: a transcript file is imported first."""
    path = Path(target).expanduser()
    if path.exists():
        parsed = import_file(store, path, fmt)
        return parsed.session.id, parsed
    try:
        store.get_session(target)
    except SessionNotFound:
        raise WorkbenchError(f"{target}: no such file, and no stored session with that id") from None
    return target, None


def cmd_import(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        parsed = import_file(store, args.path, args.format)
    skipped = [s.model_dump() for s in parsed.skipped_lines]
    if args.json:
        print(json.dumps({"session_id": parsed.session.id, "messages": len(parsed.messages), "skipped_lines": skipped}))
    else:
        print(parsed.session.id)
        _warn_skipped(parsed)
    return EXIT_OK


def _warn_skipped(parsed: ParsedTranscript) -> None:
    if parsed.skipped_lines:
        lines = ", ".join(str(s.line) for s in parsed.skipped_lines[:10])
        more = "…" if len(parsed.skipped_lines) > 10 else ""
        print(f"warning: skipped {len(parsed.skipped_lines)} unreadable line(s): {lines}{more}", file=sys.stderr)


def cmd_inspect(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        session_id, parsed = resolve(store, args.target, args.format)
        ctx = SessionContext.load(store, session_id, env.config)
    report = inspect_report(ctx, parsed.skipped_lines if parsed else None)
    if args.json:
        print(json.dumps(report))
    else:
        from workbench.render import print_inspect

        print_inspect(ctx, report)
        if parsed:
            _warn_skipped(parsed)
    if not report["known_model"]:
        print(f"warning: unknown model {report['model']!r}; assuming a {report['context_window']:,}-token window", file=sys.stderr)
    return EXIT_OK


def cmd_sessions(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        rows = store.list_sessions()
    if args.json:
        print(json.dumps([{"session_id": s.id, "title": s.title, "format": s.source_format, "messages": n,
                           "updated_at": s.updated_at.isoformat() if s.updated_at else None} for s, n in rows]))
        return EXIT_OK
    for s, n in rows:
        print(f"{s.id}  {n:>6} msgs  {s.source_format:<12} {s.title or ''}")
    return EXIT_OK


def open_tui(env: Environment, target: str | None, fmt: str | None = None) -> int:
    from workbench.tui.app import WorkbenchApp

    def loader() -> SessionContext:
        with env.store() as store:
            session_id, _ = resolve(store, target or str(demo_path()), fmt)
            return SessionContext.load(store, session_id, env.config)

    WorkbenchApp(loader).run()
    return EXIT_OK


def cmd_run(env: Environment, args: argparse.Namespace) -> int:
    from workbench.headless import cmd_run as run

    with env.store() as store:
        return run(store, args, env.config)


COMMANDS: dict[str, Callable[[Environment, argparse.Namespace], int]] = {
    "run": cmd_run,
    "import": cmd_import,
    "inspect": cmd_inspect,
    "sessions": cmd_sessions,
    "open": lambda env, args: open_tui(env, args.target, args.format),
    "demo": lambda env, args: open_tui(env, None),
}


def _log_crash() -> Path | None:
    path = locations.log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(traceback.format_exc())
    except OSError:
        return None
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        env = Environment(args)
        if args.command is None:
            return open_tui(env, None)
        return COMMANDS[args.command](env, args)
    except WorkbenchError as exc:
        print(f"workbench: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to tell
        sys.stderr.close()
        return EXIT_ERROR
    except Exception as exc:  # a bug: say so plainly, keep the details in the log
        where = _log_crash()
        detail = f"; details in {where}" if where else ""
        print(f"workbench: internal error: {type(exc).__name__}: {exc}{detail}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
