"""Tool-output pruning, OpenCode's soft compaction (spec 002 §5).

Walk back from the newest message; skip the newest ``skip_turns`` user turns;
stop at the summary of the latest compaction or at an output already pruned
(the previous pass's boundary). Outputs of protected tools, failed calls and
pinned messages are passed over. Once more than ``protect`` tokens of output
have been seen, every older output is a candidate; the candidates are pruned
only if together they save more than ``minimum`` tokens.

Sizes are raw tiktoken counts of the output as the model sees it now, not the
spec's ``chars / 4`` (the workbench has real counts); savings are the output
minus the placeholder that replaces it.
"""

from __future__ import annotations

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.plans.strategies.base import (
    Costs,
    Result,
    finish,
    new_plan,
    session_index,
)
from workbench.engine.settings.strategies import StrategiesConfig


def plan_tool_output_pruning(ctx: SessionContext, config: StrategiesConfig) -> Plan:
    settings = config.tool_output_pruning
    plan = new_plan(ctx, "tool_output_pruning")
    index = session_index(ctx)
    overlay = ctx.overlay
    protected_tools = {name.lower() for name in settings.protected_tools}
    protected: dict[str, bool] = {}  # by tool name as written: a few names recur in thousands of results
    costs = Costs(ctx)
    placeholder = costs.text_tokens(PRUNED_PLACEHOLDER)
    newest_scanned = index.current_turn - settings.skip_turns  # a later turn is one of the newest
    # The walk stops at the newest summary; a pinned message kept from before it comes after it in the view.
    floor = index.last_summary
    turns, pinned = index.turns, index.pinned_ids
    seen = 0
    saved = 0
    chosen: list[Result] = []
    savings: list[int] = []  # beside, not in tuples: thousands of tuples would be more for the cycle collector
    for result in reversed(index.results):  # newest first, and within a message the last part first
        position = result.position
        if turns[position] > newest_scanned:
            continue  # user turns started at or after it: one of the newest
        if position < floor:
            break
        if result.is_error or result.message_id in pinned:
            continue
        tool = result.tool_name
        passed_over = protected.get(tool)
        if passed_over is None:
            passed_over = protected[tool] = tool.lower() in protected_tools
        if passed_over:
            continue
        if result.changed and overlay.is_pruned(result.message_id, result.part_index):
            break  # pruned by an earlier pass: everything older was looked at then
        tokens = result.tokens
        if tokens < 0:
            tokens = index.tokens(result)
        seen += tokens
        if seen > settings.protect and tokens > placeholder:
            chosen.append(result)
            savings.append(tokens - placeholder)
            saved += tokens - placeholder
    if saved <= settings.minimum:
        return finish(plan)
    # One reason per tool, shared by its items: what each saves is the item's own figure beside it, and thousands
    # of reasons each with its number written out were two fifths of this planner's time.
    reasons = {tool: f"old output of {tool or 'a tool'}, beyond the newest {settings.protect:,} tokens of output"
               for tool in {result.tool_name for result in chosen}}
    ratio = costs.ratio
    plan.items.extend([
        PlanItem(result.message_id, "prune", result.part_index, reasons[result.tool_name], round(ratio * raw))
        for result, raw in zip(reversed(chosen), reversed(savings), strict=True)
    ])
    return finish(plan)
