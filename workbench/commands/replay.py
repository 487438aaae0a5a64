"""replay: a past session request by request, as it was and as a policy would have changed it."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from workbench.commands._common import EXIT_OK, AddCommand, Environment

if TYPE_CHECKING:
    from workbench.engine.plans.replay import Replay, Timeline

COLUMNS = ("req", "gap", "edits", "input", "read", "write", "cost", "input+", "read+", "write+", "cost+")


def register(add: AddCommand) -> None:
    p = add("replay", "replay a proxied session's requests or a Claude Code transcript without and with a policy: "
                      "cache reads and writes, cost, and when it compacts", cmd_replay)
    p.add_argument("target", help="stored id of a proxied session, or a Claude Code transcript file")
    p.add_argument("--policy", default="default", help="the policy to replay with (default: default)")
    p.add_argument("--json", action="store_true", help="one JSON object: requests and totals")


def _timeline(env: Environment, target: str) -> Timeline:
    from workbench.commands._common import resolve
    from workbench.engine.plans.replay import from_session

    with env.store() as store:
        session_id, _ = resolve(store, target, None)  # a file is imported once, then read from the store
        return from_session(store, session_id)


def cmd_replay(env: Environment, args: argparse.Namespace) -> int:
    from workbench.engine.plans.replay import policy_named, replay

    policy = policy_named(args.policy, env.config.policies)
    result = replay(_timeline(env, args.target), policy, env.config)
    if args.json:
        print(json.dumps(result.as_json()))
        return EXIT_OK
    _print_table(result)
    return EXIT_OK


def _print_table(result: Replay) -> None:
    from workbench.engine.plans.replay import summary_lines

    print("each pair of columns: without the policy, then with it (+)")
    print("".join(f"{name:>10}" if n != 2 else f"{name:>14}" for n, name in enumerate(COLUMNS)))
    for step in result.steps:
        gap = "" if step.gap is None else f"{step.gap:,.0f}s"
        cells = [str(step.number), gap, str(step.edits or "") + (f" ({step.waiting} held)" if step.waiting else "")]
        for billed in (step.without, step.with_policy):
            cells += [f"{billed.input:,}", f"{billed.cache_read:,}", f"{billed.cache_write:,}", f"${billed.cost:.4f}"]
        print("".join(f"{cell:>10}" if n != 2 else f"{cell:>14}" for n, cell in enumerate(cells)))
    print()
    for line in summary_lines(result):
        print(line)
