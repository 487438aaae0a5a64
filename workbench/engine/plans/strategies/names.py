"""The names of the strategies and manual actions, for code that lists them (the command line's help)
without loading the planners. ``registry.STRATEGIES`` holds the planners in this order."""

from __future__ import annotations

STRATEGY_NAMES = ("dedup", "supersede_writes", "purge_errors", "tool_output_pruning", "offload", "archive")
MANUAL_ACTIONS = ("pin", "unpin", "prune", "restore", "offload", "inline", "archive", "unarchive")
