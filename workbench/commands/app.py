"""open, demo, and the bare ``workbench``: the TUI."""

from __future__ import annotations

import argparse

from workbench.commands._common import EXIT_OK, FORMATS, AddCommand, Environment, demo_path, resolve
from workbench.engine.context import SessionContext


def register(add: AddCommand) -> None:
    p = add("open", "open a transcript file or a stored session in the workbench", cmd_open)
    p.add_argument("target", help="transcript file or stored session id")
    p.add_argument("--format", choices=FORMATS, help="transcript format (default: detected)")
    add("demo", "open the bundled demo session", lambda env, args: open_tui(env, None))


def cmd_open(env: Environment, args: argparse.Namespace) -> int:
    return open_tui(env, args.target, args.format)


def open_tui(env: Environment, target: str | None, fmt: str | None = None) -> int:
    from workbench.tui.app import WorkbenchApp

    def loader() -> SessionContext:
        with env.store() as store:
            session_id, _ = resolve(store, target or str(demo_path()), fmt)
            return SessionContext.load(store, session_id, env.config)

    WorkbenchApp(loader).run()
    return EXIT_OK
