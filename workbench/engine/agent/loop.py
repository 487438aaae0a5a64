"""The agent loop: project, check the budget, call the model, run tools, persist, repeat.

Every message and usage record is stored the moment it is complete, so a crash
loses at most the response still streaming. Context changes (offloads,
compactions, recovery pruning) go through the overlay like any other plan.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, Unpack

from workbench import locations
from workbench.engine import events as ev
from workbench.engine.agent.model_call import AgentError, call_model
from workbench.engine.agent.prompt import BASE_INSTRUCTIONS, PromptBuilder, fixed_items
from workbench.engine.agent.tools import ToolContext, ToolRegistry
from workbench.engine.agent.tools.limits import OutputLimits, limit
from workbench.engine.agent.wire import build_request
from workbench.engine.context.session import FIXED_ITEMS, SessionContext, fixed_record
from workbench.engine.errors import WorkbenchError, reason_of
from workbench.engine.plans.compaction import (
    AUTO_CONTINUE,
    NOTHING_OLDER,
    CompactionPreview,
    Compactor,
    NothingToCompact,
    Trigger,
)
from workbench.engine.plans.measure import commit
from workbench.engine.plans.recovery import Recovery
from workbench.engine.plans.strategies.archive_digest import digest_rewrite
from workbench.engine.plans.strategies.registry import DCP_STRATEGIES, nudge, run_automatic_async
from workbench.engine.providers.base import ModelRequest, ModelResponse, Provider
from workbench.engine.transcript import credentials
from workbench.engine.transcript.models import (
    Message,
    MessageKind,
    Part,
    Role,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.persist import has_persist_tag, strip_persist_tag
from workbench.engine.transcript.redaction import Redactor
from workbench.engine.transcript.store import Store

Approver = Callable[[ToolUsePart], Awaitable[bool]]
MAX_CONSECUTIVE_COMPACTION_FAILURES = 3
INTERRUPTED_TOOL = "The tool call was interrupted before it finished (the run stopped); it may or may not have run."


class _PersistedFields(TypedDict, total=False):
    """What a new message may set beyond its role and parts; the rest keep the model's defaults."""

    kind: MessageKind
    model: str | None
    usage: Usage | None
    source: dict[str, Any]


async def refuse_all(call: ToolUsePart) -> bool:
    return False


async def approve_all(call: ToolUsePart) -> bool:
    return True


@dataclass
class AgentSettings:
    """How the loop runs; :func:`workbench.engine.agent.runner.prepare_run` fills it from the config.

    The ``max_tokens`` of every request is not a setting here: it is the session's output reserve
    (``ctx.budget().output_reserve``), so what the budget keeps free is what the model may write (spec 001 §3).
    """

    auto_compact: bool = True
    """Compact on the agent's own at the compact / block thresholds and after an overflowing step
    (``[compaction] auto``, spec 002 §3.1); off, only a manual compaction or the recovery after the API
    refuses a request compacts (spec 000's manual-only mode)."""
    offload_threshold: int | None = 4096
    """Tool results larger than this many bytes are offloaded (spec 001 §2; ``[strategies.offload] threshold``);
    None: never."""
    max_steps: int = 60
    shell_timeout: float = 120.0
    instructions: str = BASE_INSTRUCTIONS
    output_limits: OutputLimits = field(default_factory=OutputLimits)
    spill_dir: Path = field(default_factory=locations.tool_outputs_dir)
    """Where outputs over ``output_limits.spill_threshold`` are written (spec 003)."""
    is_subagent: bool = False
    """A sub-agent (the ``task`` tool): DCP is disabled for it (spec 000 §4)."""


class Agent:
    def __init__(
        self,
        store: Store,
        ctx: SessionContext,
        provider: Provider,
        tools: ToolRegistry,
        workspace: Path,
        *,
        model: str,
        settings: AgentSettings | None = None,
        approve: Approver = refuse_all,
        on_event: ev.EventSink = lambda event: None,
        prompt: PromptBuilder | None = None,
    ) -> None:
        self.store = store
        self.ctx = ctx
        self.provider = provider
        self.tools = tools
        self.model = model
        self.settings = settings or AgentSettings()
        self.approve = approve
        self._sink = on_event
        self.tool_ctx = ToolContext(
            workspace=workspace,
            session_id=ctx.session.id,
            read_blob=lambda ref: store.read_blob(ctx.session.id, ref),
            compact=self._compact_tool,
            shell_timeout=self.settings.shell_timeout,
        )
        self._compaction_due: Trigger | None = None
        self._tool_calls = 0
        self._compaction_failures = 0
        self._said_nothing_to_compact = False
        self._compaction_error: str | None = None
        """Why the latest compaction changed nothing, for the ``compact_context`` tool to say."""
        self._request_estimate: int | None = None
        """The budget's ``used`` when the last request was sent: the estimate stored beside its usage."""
        self._last_level = ctx.budget().level
        self.prompt = prompt or PromptBuilder(workspace, ctx.config.prompt, ctx.config.skills)
        """Builds the system prompt and tool list before every model call (``prompt.py``)."""
        self.prompt.redactor = self._redactor()
        self._refresh_fixed()

    # --- events and persistence ----------------------------------------------

    def emit(self, event: ev.Event) -> None:
        event.session_id = self.ctx.session.id
        self._sink(event)

    def _persist(self, role: Role, parts: list[Part], **fields: Unpack[_PersistedFields]) -> Message:
        message = Message(
            id=f"m-{uuid.uuid4().hex[:16]}",
            session_id=self.ctx.session.id,
            index=len(self.ctx.messages),
            role=role,
            parts=parts,
            created_at=datetime.now(UTC),
            **fields,
        )
        with self.ctx.writing(self.store, check=False):  # an append, planned against nothing
            self.store.save_messages([message], self.ctx.counter)
        self.ctx.append(message)
        self.emit(ev.MessageAdded(message_id=message.id, role=role, kind=message.kind))
        return message

    def _record_events(self, events: list[OverlayEvent]) -> None:
        if events:
            commit(self.store, self.ctx, events)

    def _redactor(self) -> Redactor:
        """Redacts the workbench's own credentials (by value) and anything shaped like a key: applied to the
        user's text, the model's text and tool input, and every tool result before it is stored or sent."""
        return Redactor.holding(credentials.known())

    def _refresh_fixed(self) -> None:
        try:
            items = self.prompt.build(self.ctx, self.tools, self.settings.instructions)
        except Exception as exc:  # noqa: BLE001 - spec 001 §8: a prompt that cannot be built falls back, said
            self.emit(ev.Warning(kind="prompt", message=f"the system prompt could not be built ({reason_of(exc)}); "
                                                        "the base instructions and every tool are sent"))
            items = fixed_items(self.ctx.counter, self.settings.instructions, self.tools.definitions())
        self.ctx.set_fixed_items(items)
        record = fixed_record(self.ctx.fixed_items)
        session = self.ctx.session
        if session.metadata.get(FIXED_ITEMS) != record:  # kept, so a reopen shows what the live view showed
            self.ctx.session = session.model_copy(update={"metadata": {**session.metadata, FIXED_ITEMS: record}})
            self.store.save_session(self.ctx.session)
        for warning in self.prompt.take_warnings():
            self.emit(ev.Warning(kind=warning.kind, message=warning.message))

    def _budget_event(self) -> None:
        budget = self.ctx.budget()
        self.emit(ev.BudgetChanged(used=budget.used, effective_window=budget.effective_window,
                                   percent=budget.percent, level=budget.level, source=budget.source,
                                   steered=budget.steered))
        if budget.level != self._last_level and budget.level != "ok":
            self.emit(ev.Warning(kind=budget.level, message=f"context at {budget.percent:.0f}% of the effective window"))
        self._last_level = budget.level

    # --- the turn -------------------------------------------------------------

    async def send(self, text: str) -> None:
        """One user message, then model steps and tools until the model ends its turn."""
        self._refresh_fixed()
        self._answer_interrupted_calls()
        full = self.ctx.budget().level == "block" and self.settings.auto_compact and self._summarisable()
        if full and not await self.compact("auto"):
            raise AgentError("the context is full and compaction failed; compact by hand or start a new session")
        text = self._redactor().text(text)
        persist = has_persist_tag(text)
        message = self._persist("user", [TextPart(text=strip_persist_tag(text) if persist else text)],
                                source={"persist_tag": persist} if persist else {})
        if persist:
            self._pin(message.id, "[PERSIST] tag")
        await self._run_steps(pin_response=persist)

    def _answer_interrupted_calls(self) -> None:
        """Tool calls left without results (the process stopped mid-run, or the turn was cancelled) get an
        error result before anything else, so the next request is one the API accepts."""
        last = next((m for m in reversed(self.ctx.messages)
                     if m.agent_visible and not m.sidechain and m.role != "system"), None)
        calls = last.tool_uses() if last is not None and last.role == "assistant" else []
        if calls:
            results: list[Part] = [ToolResultPart(tool_use_id=c.id, text=INTERRUPTED_TOOL, is_error=True)
                                   for c in calls]
            self._persist("user", results, kind="tool_result", source={"interrupted": True})

    def _pin(self, message_id: str, reason: str) -> None:
        plan = uuid.uuid4().hex
        self._record_events([OverlayEvent(id=f"{plan}:pin", session_id=self.ctx.session.id, plan_id=plan,
                                          action="pin", message_id=message_id, origin="persist-tag", reason=reason)])

    async def _run_steps(self, pin_response: bool = False) -> None:
        for step in range(self.settings.max_steps):
            if self._compaction_due is not None:
                trigger, self._compaction_due = self._compaction_due, None
                # Spec 002 §4.3: keep the loop moving after an automatic compaction, unless the user has just
                # spoken (the first step of a turn answers their message).
                if await self.compact(trigger) and trigger == "auto" and step > 0:
                    self._persist("user", [TextPart(text=AUTO_CONTINUE)], source={"auto_continue": True})
            self._refresh_fixed()
            await self._run_strategies()
            budget = self.ctx.budget()
            self._budget_event()
            if budget.level in ("compact", "block") and self.settings.auto_compact:
                await self.compact("auto")
                self._refresh_fixed()
            self.emit(ev.TurnStart(step=step))
            response = await self._call_model()
            if not response.parts:  # kept (its usage is real) but it adds nothing the model will see
                self.emit(ev.Warning(kind="empty_response",
                                     message=f"the model returned an empty response (stop reason: "
                                             f"{response.stop_reason or 'none'})"))
            response.parts = self._redactor().parts(response.parts)
            assistant = self._persist("assistant", response.parts, model=response.model, usage=response.usage)
            if pin_response:
                self._pin(assistant.id, "response to a [PERSIST] message")
                pin_response = False
            self._record_usage(assistant, response)
            calls = [p for p in response.parts if isinstance(p, ToolUsePart)]
            if calls:
                await self._run_tools(calls)
            self.emit(ev.TurnEnd(step=step, stop_reason=response.stop_reason))
            if not calls and self._cut_with_window_full(response):
                continue  # spec 004's reactive compaction: the next step compacts, then asks the model to go on
            if not calls:
                self._budget_event()
                return
        self.emit(ev.Warning(kind="max_steps", message=f"stopped after {self.settings.max_steps} model calls"))

    def _cut_with_window_full(self, response: ModelResponse) -> bool:
        """An answer cut at ``max_tokens`` with the window at its compact mark: a compaction is queued, so the
        model can finish with room to write (spec 004)."""
        if response.stop_reason != "max_tokens" or not self.settings.auto_compact:
            return False
        if self.ctx.budget().level not in ("compact", "block") or not self._summarisable():
            return False  # nothing to make room with: the turn ends cut, as the API left it
        self._compaction_due = "auto"
        return True

    async def _call_model(self) -> ModelResponse:
        """The model's answer to the context as it is; a refusal as too long runs the recovery cascade."""
        recovery = Recovery(self.store, self.ctx, self.emit, self._recovery_compact)
        return await call_model(self.provider, self._request, recovery, self.emit, on_rollback=self._budget_event)

    def _request(self) -> ModelRequest:
        budget = self.ctx.budget()
        # The budget's output reserve is what the model may write: one number, sent and kept free (the API
        # needs at least one token).
        request = build_request(self.ctx.view(), self.model, max(1, budget.output_reserve))
        request.estimated_input_tokens = self._request_estimate = budget.used
        return request

    def _record_usage(self, message: Message, response: ModelResponse) -> None:
        usage = response.usage
        estimate = self._request_estimate
        self.store.record_usage(self.ctx.session.id, message.id, usage, estimate)
        self.emit(ev.UsageReported(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cache_creation_input_tokens=usage.cache_creation_input_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens,
            estimated_input_tokens=estimate, synthetic=usage.synthetic,
        ))
        # Spec 002 §3: a step whose input + cache reads + output no longer fits queues a compaction.
        budget = self.ctx.budget()
        total = usage.input_tokens + usage.cache_read_input_tokens + usage.output_tokens
        if self.settings.auto_compact and total > budget.effective_window:
            self._compaction_due = "auto"

    # --- tools ----------------------------------------------------------------

    def _offloaded(self, ref: str, tool: str, whole: str) -> bool:
        """The result stored for ``read_result``; when the store fails it stays inline (spec 001 §8)."""
        try:
            self.store.save_blob(self.ctx.session.id, ref, tool, whole)
        except (sqlite3.Error, WorkbenchError, OSError) as exc:
            self.emit(ev.Warning(kind="offload", message=f"the {tool} result could not be offloaded "
                                                         f"({reason_of(exc)}); it stays in the context"))
            return False
        return True

    async def _run_tools(self, calls: list[ToolUsePart]) -> None:
        results: list[Part] = []
        offloads: list[tuple[int, str, str, int]] = []
        for call in calls:
            self.emit(ev.ToolCall(tool_use_id=call.id, name=call.name, input=call.input))
            tool = self.tools.get(call.name)
            if tool is not None and tool.needs_approval:
                approved = await self.approve(call)
                self.emit(ev.ApprovalNeeded(tool_use_id=call.id, name=call.name, approved=approved))
                if not approved:
                    refusal = "The user did not approve this tool call."
                    results.append(ToolResultPart(tool_use_id=call.id, text=refusal, is_error=True))
                    self.emit(ev.ToolResult(tool_use_id=call.id, name=call.name, is_error=True, preview=refusal,
                                            bytes=len(refusal)))
                    continue
            output = await self.tools.execute(call.name, call.input, self.tool_ctx)
            whole = self._redactor().text(output.text)
            text, problem = limit(whole, self.settings.output_limits, self.settings.spill_dir)
            if problem:
                self.emit(ev.Warning(kind="tool_output", message=problem))
            size = len(text.encode())
            threshold = self.settings.offload_threshold
            if threshold is not None and size > threshold and call.name != "read_result":
                # The whole output, not what the limits cut it to: read_result gives back what the tool said.
                ref = f"r-{uuid.uuid4().hex[:12]}"
                if self._offloaded(ref, call.name, whole):
                    offloads.append((len(results), ref, call.name, len(whole.encode())))
            results.append(ToolResultPart(tool_use_id=call.id, text=text, is_error=output.is_error))
            self.emit(ev.ToolResult(tool_use_id=call.id, name=call.name, is_error=output.is_error,
                                    preview=" ".join(text.split())[:200], bytes=size))
        self._tool_calls += len(calls)
        reminder = None if self.settings.is_subagent else nudge(self.ctx, self._tool_calls, self.ctx.config)
        if reminder:
            results.append(TextPart(text=reminder))
        message = self._persist("user", results, kind="tool_result")
        plan = uuid.uuid4().hex
        self._record_events([
            OverlayEvent(id=f"{plan}:{i}", session_id=self.ctx.session.id, plan_id=plan, action="offload",
                         message_id=message.id, part_index=i, origin="agent", reason=f"{size:,}-byte result",
                         data={"ref_id": ref, "tool_name": name, "byte_size": size})
            for i, ref, name, size in offloads
        ])
        for i, ref, _, size in offloads:
            result = results[i]
            tool_id = result.tool_use_id if isinstance(result, ToolResultPart) else ""
            self.emit(ev.Offloaded(tool_use_id=tool_id, ref_id=ref, bytes=size))

    async def _run_strategies(self, *, always: bool = False) -> list[str]:
        """The automatic strategies (DCP's among them) before a request, from ``[strategies] automatic_from``
        of the effective window on (0: every request, as spec 000 §5 has it); ``always``: now. Below that,
        those with a count of their own when it is reached (spec 003's archive past its cutoff). A sub-agent
        runs DCP's alone, with ``[strategies.dcp] subagents = true``. Returns the strategies that changed
        something."""
        only = None
        if self.settings.is_subagent:  # a sub-agent manages its own context: DCP only, and only when asked
            if not self.ctx.config.strategies.dcp.subagents:
                return []
            only = DCP_STRATEGIES
        budget = self.ctx.budget()
        window = always or budget.used >= round(budget.effective_window * self.ctx.config.strategies.automatic_from)
        rewrite = digest_rewrite(lambda choice: self._compactor().chain(choice),
                                 lambda message: self.emit(ev.Warning(kind="archive", message=message)))
        plans = await run_automatic_async(self.store, self.ctx, self.ctx.config, window=window, rewrite=rewrite,
                                          only=only)
        for plan in plans:
            self.emit(ev.PlanApplied(strategy=plan.strategy, plan_id=plan.plan_id, items=len(plan.items),
                                     tokens_saved=plan.tokens_saved))
        return [plan.strategy for plan in plans]

    # --- compaction and recovery ------------------------------------------------

    def _compactor(self) -> Compactor:
        # The session's own model summarises (the scripted replay cannot: it gets the heuristic).
        return Compactor(self.store, self.ctx, provider=self.provider, model=self.model,
                         workspace=self.tool_ctx.workspace, emit=self.emit)

    def _summarisable(self) -> bool:
        """Whether a compaction now would summarise anything. Past the mark with nothing older than the kept
        tail (a reported usage the messages do not explain), it would only add a summary: the request goes
        as it is, and if the API refuses it the recovery cascade runs. Said once until it changes."""
        found = self._compactor().summarisable() > 0
        if not found and not self._said_nothing_to_compact:
            self.emit(ev.Warning(kind="compaction", message=f"{NOTHING_OLDER}; the request is sent as it is"))
        self._said_nothing_to_compact = not found
        return found

    async def compact(self, trigger: Trigger = "manual", focus: str | None = None, *,
                      truncate_before: str | None = None) -> CompactionPreview | None:
        """``truncate_before``: drop what precedes that message without a summary (the recovery's last step)."""
        if self._compaction_failures >= MAX_CONSECUTIVE_COMPACTION_FAILURES and trigger == "auto":
            return None
        if trigger != "manual" and truncate_before is None and not self._summarisable():
            return None
        before = self.ctx.used()
        self.emit(ev.CompactionStart(trigger=trigger, before_tokens=before))
        try:
            compactor = self._compactor()
            plan = await compactor.preview(trigger, focus, truncate_before=truncate_before)
            result = await compactor.apply(plan)
        except NothingToCompact as exc:  # not a failure: the context stays as it is
            self._compaction_error = str(exc)
            self.emit(ev.CompactionEnd(trigger=trigger, before_tokens=before, after_tokens=before, error=str(exc)))
            return None
        except WorkbenchError as exc:
            self._compaction_error = str(exc)
            self._compaction_failures += 1
            self.emit(ev.CompactionEnd(trigger=trigger, before_tokens=before, after_tokens=before, error=str(exc)))
            if self._compaction_failures >= MAX_CONSECUTIVE_COMPACTION_FAILURES:
                self.emit(ev.Warning(kind="compaction_disabled",
                                     message="auto-compaction stopped after 3 consecutive failures"))
            return None
        self._compaction_failures = 0
        self._compaction_due = None  # whatever was queued is done
        self.prompt.session_start_context = "\n\n".join(result.context)  # spec 004: the hooks' context goes along
        self._refresh_fixed()
        # The figures the compaction recorded, so the line said now is the one its history shows later.
        self.emit(ev.CompactionEnd(trigger=trigger, before_tokens=result.before_tokens,
                                   after_tokens=result.after_tokens, summarizer=plan.summarizer))
        self._budget_event()
        return plan

    async def _compact_tool(self) -> str:
        """Spec 001 §7's ForceCompact: the automatic strategies, then a summary; says the tokens and messages
        before and after, and what ran."""
        before, messages = self.ctx.used(), self._messages_in_view()
        ran = await self._run_strategies(always=True)
        plan = await self.compact("manual")
        if plan is not None:
            ran.append(f"compaction ({plan.summarizer})")
        if not ran:
            return f"The context is unchanged: {self._compaction_error or 'compaction is not possible now'}."
        text = (f"Compacted: {before:,} → {self.ctx.used():,} tokens, {messages:,} → "
                f"{self._messages_in_view():,} messages; ran {', '.join(ran)}.")
        return text if plan is not None else f"{text} No summary: {self._compaction_error}."

    def _messages_in_view(self) -> int:
        return sum(1 for item in self.ctx.view().items if item.kind == "message")

    async def _recovery_compact(self, truncate_before: str | None) -> str | None:
        plan = await self.compact("recovery", truncate_before=truncate_before)
        return plan.plan_id if plan is not None else None
