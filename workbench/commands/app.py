"""open, demo, and the bare ``workbench``: the TUI.

- ``workbench``: the most recently used stored session; on a database with nothing
  to show yet, the bundled scripted demo (offline) plays by itself, its tool calls
  approved inside its temporary copy of the demo project. An unplayed demo session
  is reused rather than piling up.
- ``workbench demo``: a fresh scripted demo session that plays by itself, live.
- ``workbench open TARGET``: a transcript file or a stored session.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from workbench.commands._common import EXIT_OK, FORMATS, AddCommand, Environment, check_target
from workbench.locations import demo_path
from workbench.tui.pacing import DEMO_CHUNK_DELAY

if TYPE_CHECKING:
    from workbench.tui.launch import Launch


def register(add: AddCommand) -> None:
    p = add("open", "open a transcript file or a stored session in the workbench", cmd_open)
    p.add_argument("target", help="transcript file or stored session id")
    p.add_argument("--format", choices=FORMATS, help="transcript format (default: detected)")
    p = add("demo", "play the bundled scripted session live (offline, no API key)", cmd_demo)
    p.add_argument("--chunk-delay", type=float, default=DEMO_CHUNK_DELAY, metavar="SECONDS",
                   help=f"pause between streamed chunks (default: {DEMO_CHUNK_DELAY})")
    p.add_argument("--no-autoplay", action="store_true",
                   help="wait in the input box for each scripted message instead of sending it")
    p.add_argument("--transcript", action="store_true",
                   help="open the bundled recorded transcript (imported: steerable, no agent to message) "
                        "instead of playing the script")


def cmd_open(env: Environment, args: argparse.Namespace) -> int:
    checked, found = _app_loaded_while_checked(env)
    healthy = check_target(env.db_path, args.target, args.format, checked=checked, found=found)
    return open_tui(env, args.target, args.format, db_checked=healthy)


def _app_loaded_while_checked(env: Environment) -> tuple[bool, str | None]:
    """Load the app's modules while SQLite checks the database's health on a thread (they took turns before:
    a quarter of a second more on a 50,000-message database). Whether the database was checked (not when
    there is none yet), and what the check found damaged."""
    from workbench.engine.transcript import db_health

    verdict = db_health.check_in_background(env.db_path) if env.db_path.is_file() else None
    load_app()  # what `run` needs next, loaded meanwhile
    return (False, None) if verdict is None else (True, verdict())


def load_app() -> None:
    """The app's modules, loaded as the collector's policy for them says (:func:`gc_policy.loading_modules`),
    once: every command that opens the app calls it before it imports any of them."""
    if "workbench.tui.app" in sys.modules:
        return
    from workbench.gc_policy import loading_modules

    with loading_modules():
        import workbench.tui.app  # noqa: F401


def cmd_demo(env: Environment, args: argparse.Namespace) -> int:
    load_app()
    from dataclasses import replace  # deferred: it loads inspect (7 ms), which starting up needs nowhere else

    from workbench.tui.launch import Launch  # deferred: the app's modules load only when the app opens

    if args.transcript:
        return open_tui(env, str(demo_path()))
    launch = Launch.demo(env.db_path, env.config, autoplay=not args.no_autoplay)
    launch = replace(launch, chunk_delay=max(0.0, args.chunk_delay), reuse_unplayed=False)
    return run(launch)


def open_tui(env: Environment, target: str | None, fmt: str | None = None, *, db_checked: bool = False) -> int:
    """``target`` None: the most recently used session, or the demo playing by itself when there is none.
    ``db_checked``: the database was found healthy just now (the app's open does not check it again)."""
    load_app()
    from workbench.tui.launch import Launch  # deferred: the app's modules load only when the app opens

    if target is None:
        from workbench.engine.transcript.sessions import latest_session  # deferred: for this case alone

        with env.store() as store:
            target = latest_session(store)
            db_checked = store.damage is None
        if target is None:
            return run(Launch.welcome(env.db_path, env.config))
    return run(Launch.open(env.db_path, target, fmt, env.config, db_checked=db_checked))


def run(launch: Launch) -> int:
    load_app()
    from workbench.tui.app import WorkbenchApp

    WorkbenchApp(launch).run()
    return EXIT_OK
