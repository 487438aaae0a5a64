"""What a proxied agent's own compaction lost, said in the app when the followed session shows it."""

from __future__ import annotations

from textual.markup import escape

from workbench.engine.context.session import SessionContext

SHOWN = 4
"""Lost facts named in the notice; the rest are in ``workbench compactions SESSION``."""


def agent_compactions(ctx: SessionContext) -> int:
    """How many times the agent compacted its history on its own (the proxy's pivots)."""
    return sum(1 for e in ctx.events if e.action == "pivot" and e.origin == "agent" and not e.undone)


def lost_notice(ctx: SessionContext) -> tuple[str, bool] | None:
    """``The agent compacted: its summary keeps 2 of 3 facts. Lost: identifier frobnicate_v2.`` for its latest
    compaction (as toast markup), and whether it lost any; None when its span or summary is not known."""
    from workbench.engine.plans.fact_check import latest_check  # deferred: read only when the agent compacts

    latest = latest_check(ctx)
    if latest is None:
        return None
    text = f"The agent compacted: its summary keeps {latest.kept} of {latest.total} facts."
    if latest.lost:
        named = "; ".join(f"{f.kind} {escape(f.text)}" for f in latest.lost[:SHOWN])
        more = len(latest.lost) - SHOWN
        text += f" Lost: {named}" + (f"; and {more} more (workbench compactions {ctx.session.id})." if more > 0
                                     else ".")
    return text, bool(latest.lost)
