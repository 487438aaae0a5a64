"""Dynamic context pruning (spec 000 §5): deduplication, superseded writes, purged errors, the nudge.

All three strategies prune through the overlay and respect the same protections:
the newest ``turn_protection`` turns, pinned messages, calls on files matching
``protected_file_patterns``, and parts already pruned or offloaded. DCP is off
for sub-agent sessions unless ``[strategies.dcp] subagents = true``.

Representation: a duplicate's *output* is a prune of its tool_result part (the
placeholder of spec 002 is shown). A superseded write and a failed call lose
their *input*: a prune of the tool_use part, which projection shows with its
file path kept and its content replaced by a placeholder. A read whose file a later write replaced whole
loses its output, as a duplicate does.
"""

from __future__ import annotations

from collections.abc import Hashable

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.strategies.base import (
    Call,
    Costs,
    Result,
    SessionIndex,
    add_or_skip,
    describe_call,
    finish,
    is_protected_file,
    is_protected_tool,
    is_subagent,
    new_plan,
    session_index,
)
from workbench.engine.settings.strategies import DcpConfig, StrategiesConfig, SupersedeWritesConfig

FAILED_INPUT_PLACEHOLDER = "[input pruned: this call failed]"


def dcp_active(ctx: SessionContext, dcp: DcpConfig) -> bool:
    return dcp.enabled and (dcp.subagents or not is_subagent(ctx))


class Protection:
    """What DCP never touches (a recent turn, a pinned message, a protected tool or file), worked out once per
    planning: a planning asks it of thousands of calls."""

    def __init__(self, index: SessionIndex, dcp: DcpConfig) -> None:
        self.turns, self.pinned = index.turns, index.pinned_ids
        self.newest_unprotected = index.current_turn - dcp.turn_protection  # age < turn_protection: turn above this
        self.tools = frozenset(name.lower() for name in dcp.protected_tools)
        self.patterns = tuple(dcp.protected_file_patterns)

    def __call__(self, call: Call | None, *others: Result) -> bool:
        """Whether ``call`` (and the results beside it) is protected."""
        if call is None:
            return self.held(*others)
        return self.held(*others, call) or self.by_call(call)

    def held(self, *ones: Call | Result) -> bool:
        """Whether one of ``ones`` is in a recent turn or pinned."""
        for one in ones:
            if self.turns[one.position] > self.newest_unprotected or one.message_id in self.pinned:
                return True
        return False

    def held_answer(self, call: Call, result: Result) -> bool:
        """``held(call, result)`` for a result answering ``call``, asked of every result: the result is never in
        an older turn than its call, so its own turn is the one to ask."""
        return (self.turns[result.position] > self.newest_unprotected or result.message_id in self.pinned
                or call.message_id in self.pinned)

    def by_call(self, call: Call) -> bool:
        """Whether the call's tool or one of its files is protected: the same for identical calls."""
        return call.name.lower() in self.tools or is_protected_file(call.part, self.patterns)


def plan_dedup(ctx: SessionContext, config: StrategiesConfig) -> Plan:
    """Older outputs of identical calls (same tool, same input) give way to the newest."""
    plan = new_plan(ctx, "dedup")
    if not dcp_active(ctx, config.dcp):
        return finish(plan)
    index = session_index(ctx)
    protected = Protection(index, config.dcp)
    costs = Costs(ctx)
    # By the key's hash, kept with the part (a tuple works its hash out again each time it is asked); the keys
    # compared when the hashes match, two keys of one hash (vanishingly rare) then told apart by the keys.
    newest: dict[int, Call] = {}
    exact: dict[tuple[str, Hashable], Call] = {}
    # Whether the tool or its files are protected and the reason, by the kept call: the same for all its duplicates.
    of_kept: dict[Call, tuple[bool, str]] = {}
    for result in reversed(index.results):
        call = result.call
        if call is None:
            continue
        part = call.part
        kept = newest.setdefault(part.call_hash(), call)
        if kept is not call and kept.part.call_key() != part.call_key():
            kept = exact.setdefault(part.call_key(), call)
        if kept.id == call.id or result.changed or protected.held_answer(call, result):
            continue
        known = of_kept.get(kept)
        if known is None:
            known = of_kept[kept] = (
                protected.by_call(kept), f"duplicate of a newer identical call: {describe_call(kept.part)} ({kept.id})"
            )
        if known[0]:
            continue
        saving = costs.output_saving(index.tokens(result), PRUNED_PLACEHOLDER)
        add_or_skip(plan, result.message_id, result.part_index, known[1], saving, "the output")
    return finish(plan)


def plan_supersede_writes(ctx: SessionContext, config: StrategiesConfig) -> Plan:
    """A write or edit whose file is read again later: the write's content leaves the call's input."""
    plan = new_plan(ctx, "supersede_writes")
    if not dcp_active(ctx, config.dcp):
        return finish(plan)
    settings = config.supersede_writes
    index = session_index(ctx)
    protected = Protection(index, config.dcp)
    costs = Costs(ctx)
    last_read: dict[str, int] = {}
    for call in index.calls_of(settings.read_tools):
        result = index.result_of.get(call.id)
        if result is None or result.is_error:
            continue
        for path in call.part.file_paths():
            last_read[path] = max(last_read.get(path, -1), call.position)
    for call in index.calls_of(settings.write_tools):
        if call.changed:
            continue
        paths = call.part.file_paths()
        if not paths or not any(last_read.get(p, -1) > call.position for p in paths):
            continue
        if protected(call):
            continue
        saving = costs.input_saving(call.shown, call.part)
        reason = f"{call.part.name} to {paths[0]} superseded by a later read of the file"
        add_or_skip(plan, call.message_id, call.part_index, reason, saving, "the input")
    if settings.reads:
        _supersede_reads(plan, index, protected, costs, settings)
    return finish(plan)


def _supersede_reads(plan: Plan, index: SessionIndex, protected: Protection, costs: Costs,
                     settings: SupersedeWritesConfig) -> None:
    """The outputs of reads whose every file a later successful whole-file write replaced."""
    last_write: dict[str, tuple[int, str]] = {}
    for call in index.calls_of(settings.whole_file_tools):
        result = index.result_of.get(call.id)
        if result is None or result.is_error:
            continue
        for path in call.part.file_paths():
            if last_write.get(path, (-1, ""))[0] < call.position:
                last_write[path] = (call.position, call.part.name)
    if not last_write:
        return
    for call in index.calls_of(settings.read_tools):
        result = index.result_of.get(call.id)
        paths = call.part.file_paths()
        if result is None or result.is_error or result.changed or not paths:
            continue
        later = [last_write[p] for p in paths if last_write.get(p, (-1, ""))[0] > call.position]
        if len(later) < len(paths) or protected(call, result):
            continue
        saving = costs.output_saving(index.tokens(result), PRUNED_PLACEHOLDER)
        reason = f"{describe_call(call.part)}: the file was replaced by a later {later[0][1]}"
        add_or_skip(plan, result.message_id, result.part_index, reason, saving, "the output")


def plan_purge_errors(ctx: SessionContext, config: StrategiesConfig) -> Plan:
    """The inputs of calls that failed ``turns`` or more turns ago; the error itself stays."""
    plan = new_plan(ctx, "purge_errors")
    if not dcp_active(ctx, config.dcp):
        return finish(plan)
    index = session_index(ctx)
    protected = Protection(index, config.dcp)
    costs = Costs(ctx)
    min_age = max(1, config.purge_errors.turns)  # never the current turn's error: the agent is fixing it
    for result in index.failed:
        call = result.call
        if call is None or call.changed:
            continue
        age = index.age(call.position)
        if age < min_age or protected(call, result):
            continue
        saving = costs.input_saving(call.shown, call.part, FAILED_INPUT_PLACEHOLDER)
        add_or_skip(plan, call.message_id, call.part_index, f"{describe_call(call.part)} failed {age} turns ago",
                    saving, "the input", {"replacement": FAILED_INPUT_PLACEHOLDER})
    return finish(plan)


def prunable_outputs(ctx: SessionContext, dcp: DcpConfig, limit: int = 5) -> list[tuple[str, str, int]]:
    """The largest outputs the agent's ``prune`` would accept now: (tool_use id, tool, raw tokens).

    The tools leave turn protection to the agent's judgement; pins and protected files they refuse.
    """
    index = session_index(ctx)
    found = []
    for result in index.results:
        call = result.call
        if call is None or result.changed or index.pinned(result.message_id, call.message_id):
            continue
        if is_protected_tool(call.name, dcp.protected_tools):
            continue
        if is_protected_file(call.part, dcp.protected_file_patterns):
            continue
        found.append((call.part.id, result.tool_name, index.tokens(result)))
    return sorted(found, key=lambda f: f[2], reverse=True)[:limit]


def nudge(ctx: SessionContext, tool_calls_so_far: int, config: StrategiesConfig) -> str | None:
    """Every ``nudge_every`` tool calls once the context is at ``nudge_at`` or more: a reminder to prune."""
    dcp = config.dcp
    if not dcp_active(ctx, dcp) or tool_calls_so_far <= 0 or tool_calls_so_far % dcp.nudge_every:
        return None
    budget = ctx.budget()
    if budget.used < round(budget.effective_window * dcp.nudge_at):
        return None
    lines = [
        (f"[Context at {budget.percent:.0f}% of the window: {budget.used:,} of {budget.effective_window:,} tokens.] "
        "If some earlier tool outputs are no longer needed, call `prune` with their tool_use ids, or `distill` "
        "with the ids and a short summary of what you still need from them.")
    ]
    candidates = prunable_outputs(ctx, dcp)
    if candidates:
        lines.append("Largest outputs you could prune: " + ", ".join(
            f"{tool_id} ({name or 'tool'}, ~{tokens:,} tokens)" for tool_id, name, tokens in candidates
        ))
    return "\n".join(lines)
