"""The model's own pruning tools (DCP, spec 000 §5): ``prune`` and ``distill``.

Both take tool_use ids of earlier calls. ``prune`` replaces their outputs with
the placeholder; ``distill`` replaces them with a summary the model writes (the
summary on the newest output, a pointer to it on the others). Each call is one
plan with origin ``agent``: listed in the history, undone by the user like any
other change. Pinned messages and protected files are refused; so are calls
that are not in context.

Not in ``builtin_tools()``: the agent loop adds them when DCP is on, bound to
its store and context.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.strategies.base import (
    Costs,
    Result,
    add_item,
    finish,
    is_protected_file,
    is_protected_tool,
    new_plan,
    session_index,
)
from workbench.engine.settings.strategies import DcpConfig
from workbench.engine.transcript.store import Store

DISTILLED_PREFIX = "[Distilled by the agent]"


def _targets(ctx: SessionContext, ids: list[str], dcp: DcpConfig) -> list[Result]:
    """The results of ``ids`` that may be replaced, oldest first; a ToolError naming any that may not."""
    index = session_index(ctx)
    problems: list[str] = []
    found: list[Result] = []
    for tool_id in dict.fromkeys(ids):
        result = index.result_of.get(tool_id)
        if result is None:
            problems.append(f"{tool_id}: no result of that call is in context")
        elif index.pinned(result.message_id, *([result.call.message_id] if result.call else [])):
            problems.append(f"{tool_id}: pinned by the user")
        elif result.call is not None and is_protected_tool(result.call.part.name, dcp.protected_tools):
            problems.append(f"{tool_id}: {result.call.part.name} is a protected tool")
        elif result.call is not None and is_protected_file(result.call.part, dcp.protected_file_patterns):
            problems.append(f"{tool_id}: reads a protected file")
        elif ctx.overlay.is_pruned(result.message_id, result.part_index):
            problems.append(f"{tool_id}: already pruned")
        else:
            found.append(result)
    if problems:
        raise ToolError("nothing changed: " + "; ".join(problems))
    return sorted(found, key=lambda r: (r.position, r.part_index))


class _SessionTool(Tool):
    def __init__(self, store: Store, ctx: SessionContext, dcp: DcpConfig | None = None) -> None:
        self.store = store
        self.ctx = ctx
        self.dcp = dcp or ctx.config.strategies.dcp

    def _commit(self, plan: Plan) -> str:
        measure(self.ctx, plan)
        apply(self.store, self.ctx, plan)
        return f"{plan.tokens_before:,} → {plan.tokens_after:,} tokens ({plan.tokens_saved:,} saved)"


class Prune(_SessionTool):
    name = "prune"
    description = (
        "Remove the outputs of earlier tool calls you no longer need from your context (they are replaced by a "
        "short placeholder; the user can restore them). Give the tool_use ids."
    )

    class Input(BaseModel):
        ids: list[str] = Field(min_length=1, description="tool_use ids of the calls whose outputs to prune")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        plan = new_plan(self.ctx, "prune", origin="agent")
        costs = Costs(self.ctx)
        index = session_index(self.ctx)
        for result in _targets(self.ctx, args.ids, self.dcp):
            saving = costs.output_saving(index.tokens(result), PRUNED_PLACEHOLDER)
            add_item(plan, result.message_id, "prune", result.part_index,
                     f"pruned by the agent ({result.part.tool_use_id})", saving)
        return ToolOutput(f"Pruned {len(plan.items)} output(s): {self._commit(finish(plan))}.")


class Distill(_SessionTool):
    name = "distill"
    description = (
        "Replace the outputs of earlier tool calls with a short summary you write of what you still need from "
        "them. Give the tool_use ids and the summary; the originals stay stored and the user can restore them."
    )

    class Input(BaseModel):
        ids: list[str] = Field(min_length=1, description="tool_use ids of the calls whose outputs to distill")
        summary: str = Field(min_length=1, description="what you need to remember from those outputs")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        targets = _targets(self.ctx, args.ids, self.dcp)
        keeper = targets[-1]
        text = f"{DISTILLED_PREFIX}\n{args.summary.strip()}"
        pointer = f"[Distilled: see the summary in the result of {keeper.part.tool_use_id}]"
        plan = new_plan(self.ctx, "distill", origin="agent")
        costs = Costs(self.ctx)
        index = session_index(self.ctx)
        for result in targets:
            replacement = text if result is keeper else pointer
            saving = costs.output_saving(index.tokens(result), replacement)
            add_item(plan, result.message_id, "prune", result.part_index,
                     f"distilled by the agent ({result.part.tool_use_id})", saving, {"replacement": replacement})
        if sum(item.tokens_saved for item in plan.items) <= 0:
            raise ToolError("nothing changed: the summary is not shorter than the outputs it would replace")
        return ToolOutput(f"Distilled {len(plan.items)} output(s): {self._commit(finish(plan))}.")
