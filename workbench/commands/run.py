"""run: the agent headless."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.commands._common import AddCommand, Environment


def register(add: AddCommand) -> None:
    p = add("run", "run the agent headless on a prompt", cmd_run)
    p.add_argument("prompt", nargs="?", default=None, help="the user message (a scripted run has its own)")
    p.add_argument("--session", help="continue this stored session")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--scripted", metavar="NAME", help="replay a scripted session offline ('demo' or a .json path)")
    source.add_argument("--model", help="Anthropic model to use (needs ANTHROPIC_API_KEY)")
    p.add_argument("--workspace", type=Path, help="directory the tools work in (default: the current one)")
    p.add_argument("--yes", action="store_true", help="approve shell and write tools without asking")
    p.add_argument("--json", action="store_true", help="print one JSON event per line")


def cmd_run(env: Environment, args: argparse.Namespace) -> int:
    from workbench.headless import cmd_run as run

    with env.store() as store:
        return run(store, args, env.config)
