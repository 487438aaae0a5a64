"""compact, compactions: preview, apply and undo a full compaction headless, and list a session's compactions.

The work is in ``_compact_run`` and loads only when one of these commands runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.commands._common import FORMATS, AddCommand, Environment


def register(add: AddCommand) -> None:
    p = add("compact", "preview, apply or undo a full compaction of a session", cmd_compact)
    p.add_argument("target", metavar="SESSION", help="stored session id or transcript file")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--preview", action="store_true",
                      help="show the plan (split, prompt, summary, tokens); change nothing")
    mode.add_argument("--apply", action="store_true", help="make the plan and apply exactly that plan")
    mode.add_argument("--undo", action="store_true", help="undo the latest compaction")
    p.add_argument("--summarizer", choices=["heuristic", "llm"],
                   help="heuristic (offline) or llm (Anthropic API: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL); "
                        "default: compaction.summarizer from the config, heuristic when that is 'auto'")
    p.add_argument("--focus", metavar="TEXT", help="what the summary should focus on")
    p.add_argument("--model", help="model for the llm summary (default: compaction.model, else the session's)")
    p.add_argument("--plan", type=Path, metavar="FILE",
                   help="with --apply: apply this plan (a saved `--preview --json`, summary edited if you like)")
    p.add_argument("--workspace", type=Path, help="project folder with the plan files (default: the session's)")
    p.add_argument("--format", choices=FORMATS, help="transcript format (default: detected)")
    p.add_argument("--json", action="store_true", help="print a JSON object")

    p = add("compactions", "list a session's compactions (applied and undone)", cmd_compactions)
    p.add_argument("target", metavar="SESSION", help="stored session id or transcript file")
    p.add_argument("--format", choices=FORMATS, help="transcript format (default: detected)")
    p.add_argument("--json", action="store_true", help="print JSON")


def cmd_compact(env: Environment, args: argparse.Namespace) -> int:
    from workbench.commands._compact_run import compact_command

    return compact_command(env, args)


def cmd_compactions(env: Environment, args: argparse.Namespace) -> int:
    from workbench.commands._compact_run import compactions_command

    return compactions_command(env, args)
