"""Full compaction as a planner: :meth:`Compactor.preview` makes the compaction's :class:`Plan` and changes
nothing; :meth:`Compactor.apply` commits exactly that plan (its summary as edited) through
``plans.measure.commit``; undo is ``plans.undo``, as for every plan.

A plan keeps a recent tail verbatim (``compaction_split``), keeps pinned messages verbatim, and
replaces the rest with one summary message made by the model or the offline heuristic
(``summarizers``) from the prompt of ``compaction_prompt``. Applying writes a hidden compaction
marker, the summary message and the overlay events (summary, pivot, pins that keep tool pairs
whole; see ``compaction_plan``), plus a checkpoint for resuming (``checkpoints``); the transcript
loses nothing. PreCompact and SessionStart hooks run around it (``hooks``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from workbench.engine import events as ev
from workbench.engine.context.checkpoints import Checkpoint, capture, save_checkpoint
from workbench.engine.context.projection import ContextItem, ViewBuilder
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError, reason_of
from workbench.engine.plans.compaction_metadata import collect_metadata
from workbench.engine.plans.compaction_plan import (
    STRATEGY,
    CompactionPreview,
    Trigger,
    basis,
    measured,
    normalise,
    summary_text,
)
from workbench.engine.plans.compaction_prompt import CHARS_PER_TOKEN, SUMMARY_PREFIX, PromptInput, build_prompt
from workbench.engine.plans.compaction_split import Split, split_at, split_view
from workbench.engine.plans.hooks import HookRunner
from workbench.engine.plans.measure import commit, dated_events, new_messages
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.summarizers import (
    AUTO_CONTINUE,
    DeltaSink,
    HeuristicSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryInput,
    SummaryOutput,
    summarize_with_fallback,
    truncation_body,
)
from workbench.engine.providers.base import Provider
from workbench.engine.settings.compaction import CompactionConfig, SummarizerChoice
from workbench.engine.settings.limits import lookup
from workbench.engine.transcript.models import TextPart, ToolUsePart
from workbench.engine.transcript.overlay import fold
from workbench.engine.transcript.store import Store

__all__ = ["AUTO_CONTINUE", "SUMMARY_PREFIX", "CompactionPreview", "CompactionResult", "Compactor",
           "NothingToCompact", "Trigger"]

NOTHING_OLDER = "nothing to compact: the whole conversation fits in the kept tail"
TRUNCATED = "because the request still did not fit the context window"


class CompactionCancelled(WorkbenchError):
    """A PreCompact hook said no."""


class StalePlan(WorkbenchError):
    """The session changed between the preview and the apply."""


class NothingToCompact(WorkbenchError):
    """Applying would not make the context smaller: nothing older than the kept tail, or a summary no smaller
    than what it replaces. Spec 001 §6 compacts only when messages are actually reduced."""


class CompactionResult(BaseModel):
    plan_id: str
    marker_id: str
    summary_id: str
    before_tokens: int
    after_tokens: int
    warnings: list[str] = Field(default_factory=list)
    context: list[str] = Field(default_factory=list)
    """Additional context the SessionStart hooks returned."""


def _text(item: ContextItem) -> str:
    return "\n".join(p.text for p in item.parts if isinstance(p, TextPart))


def _ids(items: list[ContextItem]) -> list[str]:
    return [i.message_id for i in items if i.message_id]


class Compactor:
    """Plans and applies compactions of one session's live context."""

    def __init__(
        self,
        store: Store,
        ctx: SessionContext,
        config: CompactionConfig | None = None,
        *,
        provider: Provider | None = None,
        model: str | None = None,
        workspace: Path | None = None,
        hooks: HookRunner | None = None,
        emit: Callable[[ev.Event], None] | None = None,
    ) -> None:
        self.store = store
        self.ctx = ctx
        self.config = config or ctx.config.compaction
        self.provider = provider
        self.model = self.config.model or model or ctx.model
        self.workspace = workspace or self._workspace()
        self.hooks = hooks or HookRunner(self.config.hooks, cwd=self.workspace)
        self._emit = emit or (lambda event: None)

    def _workspace(self) -> Path | None:
        for key in ("workspace", "cwd"):
            value = self.ctx.session.metadata.get(key)
            if isinstance(value, str) and Path(value).is_dir():
                return Path(value).resolve()
        return None

    def _checkpoint(self, checkpoint: Checkpoint, warnings: list[str]) -> None:
        """Save the resume checkpoint inside the compaction's transaction; if it cannot be written, the
        compaction still holds and reopening the session replays its whole history (spec 001 §8)."""
        failure = self.store.attempt(lambda: save_checkpoint(self.store, self.ctx.session.id, checkpoint))
        if failure is not None:
            self._warn(warnings, f"the resume checkpoint could not be saved ({reason_of(failure)}); reopening the "
                                 "session replays its whole history")

    def _warn(self, warnings: list[str], message: str) -> None:
        warnings.append(message)
        self._emit(ev.Warning(kind="compaction", message=message))

    def chain(self, choice: SummarizerChoice | None = None) -> list[Summarizer]:
        """The summarisers to try in order; the heuristic is always the last before truncation."""
        choice = choice or self.config.summarizer
        provider, model = self.provider, self.model
        if provider is None or model is None:
            if choice == "llm":
                raise WorkbenchError("the llm summariser needs a model provider (an API key) and a model name")
            return [HeuristicSummarizer()]
        if choice == "llm" or (choice == "auto" and provider.name != "scripted"):  # a replay cannot summarise
            return [LLMSummarizer(provider, model, self.config.summary_max_tokens), HeuristicSummarizer()]
        return [HeuristicSummarizer()]

    # --- preview --------------------------------------------------------------

    async def preview(
        self,
        trigger: Trigger = "manual",
        focus: str | None = None,
        *,
        summarizer: SummarizerChoice | None = None,
        on_delta: DeltaSink | None = None,
        truncate_before: str | None = None,
    ) -> CompactionPreview:
        """The complete plan, measured, with what its preview shows: split, prompt, summary. Nothing is changed.

        ``truncate_before``: the tail starts at this message and what came before is dropped without a summary
        (the recovery's last step when a request still does not fit), the model told so in the summary's place.

        ``on_delta`` receives the summary as it streams (the model's, or the heuristic's at once). When a
        summariser fails part-way, a ``compaction`` warning is emitted before the next one starts: a live
        preview should start its text afresh then.
        """
        ctx, config = self.ctx, self.config
        warnings: list[str] = []
        budget = ctx.budget()
        items, split = self._split(truncate_before)
        older = len(split.conversation) + len(split.prior)
        if not older:
            if trigger == "auto":
                raise NothingToCompact(NOTHING_OLDER)
            self._warn(warnings, "nothing older than the kept tail to summarise; applying is refused, as a summary "
                                 "of nothing would only make the context bigger")
        tail_ids = set(_ids(split.tail))
        metadata = collect_metadata(ctx.messages, config, workspace=self.workspace, plan=ctx.config.prompt.plan,
                                    decision_scope={m.id for m in ctx.messages if m.id not in tail_ids})
        instructions = await self._pre_compact(trigger, focus, budget.used, older, warnings)
        chain = [] if truncate_before else self.chain(summarizer)
        if not older and len(chain) > 1:
            chain = chain[1:]  # nothing older than the tail: no model call for an empty summary
        tool_names = {p.id: p.name for i in items for p in i.parts if isinstance(p, ToolUsePart)}
        priors = [_text(i) for i in split.prior]
        prompt = build_prompt(PromptInput(
            conversation=split.conversation, preserved=split.preserved, prior_summaries=priors, metadata=metadata,
            tool_names=tool_names, focus=focus, instructions=instructions, clip_chars=config.tool_result_clip,
            max_chars=self._prompt_room(),  # the heuristic's preview shows what the model would be sent
        ))
        for warning in prompt.warnings if chain and isinstance(chain[0], LLMSummarizer) else ():
            self._warn(warnings, warning)
        data = SummaryInput(prompt=prompt, conversation=split.conversation, prior_summaries=priors, metadata=metadata,
                            tool_names=tool_names, focus=focus, instructions=instructions,
                            prior_clip=config.prior_summary_clip)
        output = (SummaryOutput(body=truncation_body(data, TRUNCATED), summarizer="truncation") if truncate_before
                  else await self._summarise(chain, data, on_delta, warnings))
        preview = CompactionPreview(
            plan=Plan(plan_id=f"compact-{uuid.uuid4().hex[:16]}", session_id=ctx.session.id, strategy=STRATEGY,
                      origin="compaction"),
            trigger=trigger, summarizer=output.summarizer, model=output.model, created_at=datetime.now(UTC),
            split_rule=config.split, tail_budget=split.budget,
            summarized=_ids(split.conversation + split.prior), preserved=_ids(split.preserved), tail=_ids(split.tail),
            prior_summaries=_ids(split.prior), pair_pins=split.pair_pins, turn_pin=split.turn_pin, focus=focus, instructions=instructions,
            system_prompt=prompt.system, prompt=prompt.text, summary=summary_text(output.body, metadata),
            metadata=metadata, warnings=warnings, basis=basis(ctx),
        )
        return self.with_summary(preview, preview.summary)

    async def _pre_compact(
        self, trigger: Trigger, focus: str | None, used: int, older: int, warnings: list[str]
    ) -> list[str]:
        """Run the PreCompact hooks: their instructions, or :class:`CompactionCancelled`."""
        ctx = self.ctx
        report = await self.hooks.run("PreCompact", {
            "session_id": ctx.session.id, "trigger": trigger, "custom_instructions": focus or "",
            "cwd": str(self.workspace or ""), "transcript_path": ctx.session.source_path or "",
            "before_tokens": used, "messages_to_summarize": older,
        })
        for failure in report.failures:
            self._warn(warnings, failure)
        if report.cancelled is not None:
            reason = report.cancelled.reply.reason or "no reason given"
            raise CompactionCancelled(f"a PreCompact hook cancelled the compaction: {reason}")
        return report.instructions

    async def _summarise(
        self, chain: list[Summarizer], data: SummaryInput, on_delta: DeltaSink | None, warnings: list[str]
    ) -> SummaryOutput:
        live: list[str] = []  # fallbacks are reported as they happen
        output = await summarize_with_fallback(chain, data, on_delta, lambda message: self._warn(live, message))
        warnings += live
        for warning in output.warnings:
            if warning not in live:
                self._warn(warnings, warning)
        return output

    def _prompt_room(self) -> int:
        """Characters of prompt the summariser's window takes, leaving room for the summary."""
        limits, _ = lookup(self.model, self.ctx.config.models)
        window = limits.context_window
        return int(max(window // 4, window - self.config.summary_max_tokens - 2_000) * CHARS_PER_TOKEN)

    # --- the plan -----------------------------------------------------------------

    def with_summary(self, preview: CompactionPreview, text: str) -> CompactionPreview:
        """``preview`` with ``text`` as its summary, its plan made again and measured by the one measure
        (``plans.measure.measure``): what an edited summary leaves."""
        summary = normalise(text)
        return preview.model_copy(update={"summary": summary, "plan": measured(self.ctx, preview, summary)})

    def _split(self, tail_from: str | None = None) -> tuple[list[ContextItem], Split]:
        """The view's messages, and where the kept tail starts among them (at ``tail_from`` when given)."""
        items = [i for i in self.ctx.view().items if i.kind == "message"]
        if tail_from is not None:
            start = next((p for p, i in enumerate(items) if i.message_id == tail_from), None)
            if start is None:
                raise NothingToCompact(f"nothing to truncate: message {tail_from} is not in the context")
            split = split_at(items, start, self.ctx.overlay.pinned)
            # Earlier summaries are kept (pinned by this plan): all the model would otherwise have of the past.
            kept = {i.message_id for i in (*split.preserved, *split.prior)}
            return items, replace(split, preserved=[i for i in items[:start] if i.message_id in kept], prior=[],
                                  pair_pins=[*split.pair_pins, *(i.message_id or "" for i in split.prior)])
        return items, split_view(items, self.ctx.overlay.pinned, self.config, self.ctx.budget().effective_window)

    def summarisable(self) -> int:
        """How many messages a compaction now would summarise: 0 when the whole conversation fits in the
        kept tail (then compacting would only add a summary)."""
        _, split = self._split()
        return len(split.conversation) + len(split.prior)

    # --- apply ------------------------------------------------------------------

    async def apply(self, preview: CompactionPreview) -> CompactionResult:
        """Commit the preview's plan, made again from its ``summary`` as given, in one transaction; then run the
        SessionStart hooks."""
        ctx = self.ctx
        if preview.session_id != ctx.session.id:
            raise WorkbenchError(f"the plan is for session {preview.session_id}, not {ctx.session.id}")
        if preview.basis != basis(ctx):
            raise StalePlan("the session changed since this compaction was previewed; preview it again")
        if not preview.summarized:
            raise NothingToCompact(NOTHING_OLDER)
        plan = measured(ctx, preview, normalise(preview.summary))
        before, after = plan.tokens_before, plan.tokens_after
        if after >= before:
            raise NothingToCompact(f"nothing to compact: the summary would not make the context smaller "
                                   f"({before:,} → {after:,} tokens), so nothing was changed")
        events, (marker, summary) = dated_events(plan), new_messages(ctx, plan)
        canonical = ViewBuilder(ctx.session.id, fold([*ctx.events, *events]), ctx.counter, None, ctx.session.model)
        canonical.add_all([*ctx.messages, marker, summary])
        checkpoint = capture(canonical, plan_id=plan.plan_id, summary=summary, message_count=len(ctx.messages) + 2,
                             token_count=after)
        warnings: list[str] = []
        commit(self.store, ctx, events, [marker, summary], within=lambda: self._checkpoint(checkpoint, warnings))
        for message in (marker, summary):
            self._emit(ev.MessageAdded(message_id=message.id, role=message.role, kind=message.kind))
        self._emit(ev.CompactBoundary(
            trigger=preview.trigger, pre_tokens=before, post_tokens=after, plan_id=plan.plan_id,
            summary_id=summary.id, summarizer=preview.summarizer, summarized=len(preview.summarized),
            preserved=len(preview.preserved), plan_files=preview.metadata.plan_files,
        ))
        report = await self.hooks.run("SessionStart", {
            "session_id": ctx.session.id, "source": "compact", "trigger": preview.trigger, "plan_id": plan.plan_id,
            "summary_id": summary.id, "pre_tokens": before, "post_tokens": after,
            "cwd": str(self.workspace or ""), "transcript_path": ctx.session.source_path or "",
        })
        for failure in report.failures:
            self._warn(warnings, failure)
        return CompactionResult(plan_id=plan.plan_id, marker_id=marker.id, summary_id=summary.id,
                                before_tokens=before, after_tokens=after, warnings=warnings,
                                context=report.context)

