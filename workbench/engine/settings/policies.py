"""Policies: which context strategies run on their own for a proxied agent, and when their edits are sent.

``[proxy] policy = "NAME"`` turns one on for every session the proxy sees (default: none, nothing changes an
agent's requests unless the user asks); ``[policies.NAME]`` defines one beside the built-in ``default``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from workbench.engine.settings.strategies import StrategiesConfig


class Policy(BaseModel):
    """The settings of one policy; the defaults are the built-in ``default``'s."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = "default"
    strategies: list[str] = Field(
        default_factory=lambda: ["dedup", "supersede_writes", "purge_errors", "tool_output_pruning"])
    """Run in this order, each as ``[strategies]`` configures it (its protections included)."""
    payback: int = Field(3, ge=1)
    """An edit the warm cache must re-write is sent only if the next this many requests save more than that."""
    plan_every: int = Field(5, ge=1)
    """Requests between two plannings while the cache is warm (a cold cache is planned for at once)."""
    protect_turns: int = Field(2, ge=1)
    """The newest this many user turns are left alone by every strategy (the current one at least: the agent is
    working in it). An agent like Claude Code does a whole task in one turn, so ``[strategies]``' own protection
    (six turns) would leave a whole session alone."""

    def settings(self, strategies: StrategiesConfig) -> StrategiesConfig:
        """``strategies`` with this policy's protection of the newest turns."""
        dcp = strategies.dcp.model_copy(update={"turn_protection": self.protect_turns})
        pruning = strategies.tool_output_pruning.model_copy(update={"skip_turns": self.protect_turns})
        return strategies.model_copy(update={"dcp": dcp, "tool_output_pruning": pruning})


class ProxyConfig(BaseModel):
    """The proxy."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    policy: str | None = None
    """The policy to run for every proxied session (``default``, or one of ``[policies]``); none by default."""
