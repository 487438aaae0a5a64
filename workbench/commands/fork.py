"""fork: continue a session (imported or not) as a new engine session."""

from __future__ import annotations

import argparse
import json
import sys

from workbench.commands._common import EXIT_OK, FORMATS, AddCommand, Environment, resolve


def register(add: AddCommand) -> None:
    p = add("fork", "start a new engine session from what a session's model sees now; prints its id", cmd_fork)
    p.add_argument("target", help="stored session id or transcript file")
    p.add_argument("--model", help="model of the new session (default: the old one's if the engine can run it)")
    p.add_argument("--title", help="title of the new session")
    p.add_argument("--format", choices=FORMATS, help="transcript format of a file TARGET (default: detected)")
    p.add_argument("--json", action="store_true", help="print a JSON object")


def cmd_fork(env: Environment, args: argparse.Namespace) -> int:
    from workbench.engine.sources.fork import fork_session  # deferred: forking loads the context and the agent's prompt

    with env.store() as store:
        source_id, _ = resolve(store, args.target, args.format)
        result = fork_session(store, source_id, env.config, model=args.model, title=args.title)
    if args.json:
        print(json.dumps({"session_id": result.session.id, "forked_from": source_id,
                          "messages": len(result.messages), "pins": len(result.events),
                          "changes": result.changes, "model": result.session.model}))
        return EXIT_OK
    print(result.session.id)
    adapted = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in result.changes.items())
    if adapted:
        print(f"note: adapted for the engine: {adapted}", file=sys.stderr)
    print(f"continue with: workbench run PROMPT --session {result.session.id} --model MODEL", file=sys.stderr)
    return EXIT_OK
