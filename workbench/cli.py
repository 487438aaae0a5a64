"""The ``workbench`` command: the TUI by default, and headless commands (see ``workbench/commands``)."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from workbench import locations
from workbench.commands import COMMANDS, command_modules
from workbench.commands._common import (  # re-exported: tests use them from here
    EXIT_ERROR,
    EXIT_OK,
    Environment,
    Handler,
    resolve,
)
from workbench.engine.errors import WorkbenchError, reason_of
from workbench.engine.transcript import db_health
from workbench.engine.version import program_version
from workbench.gc_policy import before_exit, tune_for_sessions
from workbench.locations import demo_path

if TYPE_CHECKING:
    from workbench.engine.transcript.token_process import TokenProcess

__all__ = ["build_parser", "demo_path", "main", "resolve", "run"]


def _common(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--db", type=Path, default=default, help="database file (default: in the user data dir)")
    parser.add_argument(
        "--config", type=Path, default=default, help="config file (default: $WORKBENCH_CONFIG or the user config dir)"
    )


class _Version(argparse.Action):
    """``--version``: the installed version is looked up only when asked (its metadata read costs every start)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog} {program_version()}")
        parser.exit()


def build_parser(commands: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser, with the subcommands of the modules registering ``commands`` (every one when
    ``None``: what the help and a misspelt command list)."""
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="See and steer what an LLM agent has in its context window.",
        epilog="Agents seen and steered through `workbench proxy` or `workbench wrap`: Claude Code (Anthropic "
               "Messages API), Codex CLI (OpenAI Responses API), OpenCode (Chat Completions, Responses or Messages, "
               "by provider) and Aider (Chat Completions).",
    )
    _common(parser, None)
    parser.add_argument("--version", action=_Version, nargs=0, help="show the program's version number and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _common(p, argparse.SUPPRESS)
        p.set_defaults(handler=handler)
        return p

    for module in command_modules(commands):
        module.register(add)
    return parser


def _log_crash() -> Path | None:
    path = locations.log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            import traceback  # deferred: only a crash needs it

            fh.write(traceback.format_exc())
    except OSError:
        return None
    return path


def main(argv: Sequence[str] | None = None) -> int:
    tune_for_sessions()
    words = list(sys.argv[1:] if argv is None else argv)
    with _head_start(_command_word(words)) as counting:
        return _run(words, counting)


def _command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, read before the parser exists: the first word that is neither an option
    nor the value of ``--db`` or ``--config`` (a spelling this misses only loses the head start)."""
    at = _command_at(argv)
    return None if at is None else argv[at]


def _command_at(argv: Sequence[str]) -> int | None:
    words = iter(enumerate(argv))
    for at, word in words:
        if word in ("--db", "--config"):
            next(words, None)
        elif not word.startswith("-"):
            return at
    return None


def _commands_parsed(argv: Sequence[str]) -> list[str] | None:
    """The commands the parser of ``argv`` needs: the one it names; none when it names none; every one (None)
    when asked for the help of them all, or when the word is no command (the error lists them)."""
    at = _command_at(argv)
    before = argv if at is None else argv[:at]
    if "-h" in before or "--help" in before:
        return None
    if at is None:
        return []
    return [argv[at]] if argv[at] in COMMANDS else None


def _head_start(command: str | None) -> AbstractContextManager[TokenProcess | None]:
    """What a command begins before the parser and the command modules load (20 ms): ``import`` starts its
    counting process, whose vocabulary takes longer to load than anything the import does before counting."""
    if command != "import":
        return nullcontext(None)
    from workbench.engine.transcript.token_process import counting_process

    return counting_process()


def _run(argv: Sequence[str], counting: TokenProcess | None) -> int:
    parser = build_parser(_commands_parsed(argv))
    args = parser.parse_args(argv)
    args.counting = counting
    env: Environment | None = None
    try:
        env = Environment(args)
        if args.command is None:
            from workbench.commands.app import open_tui  # deferred: the TUI's imports are for the TUI only

            return open_tui(env, None)
        handler: Handler = args.handler
        code = handler(env, args)
        if env.damage is not None and code == EXIT_OK:  # it worked, read-only: say why
            print(f"workbench: warning: {env.damage}", file=sys.stderr)
        return code
    except WorkbenchError as exc:
        message = reason_of(exc)
        if env is not None and env.damage is not None and env.damage not in message:
            message = f"{message}; {env.damage}"
        print(f"workbench: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except sqlite3.DatabaseError as exc:  # outside the store's transactions: a read, or a write it let through
        if env is None or not (env.damage or db_health.is_damage(exc)):
            return _internal_error(exc)
        what = env.damage or db_health.damaged_message(
            env.db_path, db_health.damage(env.db_path, db_health.FULL_CHECK_SECONDS) or f"SQLite reports: {exc}",
            opened=False)
        print(f"workbench: error: {what}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to tell
        sys.stderr.close()
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - a bug: say so plainly, keep the details in the log
        return _internal_error(exc)


def _internal_error(exc: Exception) -> int:
    where = _log_crash()
    detail = f"; details in {where}" if where else ""
    print(f"workbench: internal error: {type(exc).__name__}: {str(exc).strip() or 'no details given'}{detail}",
          file=sys.stderr)
    return EXIT_ERROR


def run() -> NoReturn:
    """The ``workbench`` program: :func:`main`, then exit with its status (without walking, on the way out,
    what the command left behind)."""
    code = main()
    before_exit()
    sys.exit(code)


if __name__ == "__main__":
    run()
