"""pin, unpin, prune, restore, offload, inline, archive, unarchive, plan, apply, undo, redo, history, queued:
steering a session's context.

Every change is a plan (see ``workbench/engine/plans/strategies``): shown with the
tokens it saves, applied in one transaction, listed in the history, undone and
redone as one. The transcript itself is never changed.

The work is in ``_steer_run`` and loads only when one of these commands runs.
"""

from __future__ import annotations

import argparse

from workbench.commands._common import FORMATS, AddCommand, Environment
from workbench.engine.plans.strategies.names import MANUAL_ACTIONS, STRATEGY_NAMES

ACTION_HELP = {
    "pin": "pin a message: it is kept through compaction ([PERSIST])",
    "unpin": "unpin a message",
    "prune": "replace a message's tool outputs (or a write's content) with a placeholder",
    "restore": "bring back what was pruned in a message",
    "offload": "move a message's tool outputs to the blob table, leaving a reference",
    "inline": "bring a message's offloaded outputs back into context",
    "archive": "hide a message from the model (kept in the transcript), with the other half of its tool calls",
    "unarchive": "bring an archived message back into context, with the other half of its tool calls",
}


def _target(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="stored session id or transcript file")
    p.add_argument("--format", choices=FORMATS, help="transcript format (default: detected)")


def register(add: AddCommand) -> None:
    for action in MANUAL_ACTIONS:
        p = add(action, ACTION_HELP[action], _run)
        _target(p)
        p.add_argument("message", help="message id, or its 1-based position in the message list")
        p.add_argument("--json", action="store_true", help="print the applied plan as JSON")
        p.add_argument("--when-cache-cold", action="store_true",
                       help="proxied sessions: apply it only once the agent's prompt cache has gone cold "
                            "(no request for 5 minutes, or an hour when the agent asked for that), so it breaks "
                            "no cache")
        p.set_defaults(action=action)

    p = add("plan", "show what each enabled strategy would change, without changing anything", _run)
    _target(p)
    p.add_argument("--strategy", help=f"only this strategy: {', '.join(STRATEGY_NAMES)}")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = add("apply", "apply one strategy's plan", _run)
    _target(p)
    p.add_argument("--strategy", required=True, help=f"one of: {', '.join(STRATEGY_NAMES)}")
    p.add_argument("--json", action="store_true", help="print the applied plan as JSON")

    for name, help_text in (
        ("undo", "revert the last applied change"),
        ("redo", "re-apply the change undone last"),
    ):
        p = add(name, help_text, _run)
        _target(p)

    p = add("history", "list every change to a session's context, with its origin and tokens saved", _run)
    _target(p)
    p.add_argument("--json", action="store_true", help="print JSON")

    p = add("queued", "list a proxied session's edits waiting for its agent's cache to go cold", _run)
    _target(p)
    p.add_argument("--cancel", metavar="N", help="cancel queued edit N (its number in the list, or its plan id)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _run(env: Environment, args: argparse.Namespace) -> int:
    from workbench.commands._steer_run import HANDLERS  # deferred: planning loads most of the engine

    return HANDLERS[args.command](env, args)
