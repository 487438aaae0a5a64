"""The archive digest written by the model (spec 003's ``llm`` tool-summary strategy).

The archive planner is synchronous and offline, so its plan carries the heuristic
digest. Before the agent applies an archive plan, :func:`with_model_digest` asks
the summariser (the model that writes compaction summaries) for the digest
instead: it reads at most 12,000 characters of the archived calls and results,
and what it writes is clipped to 1,200 characters, after spec 003's header. If
the model fails, or its digest would cost more than the archive saves, the
heuristic digest stays and the caller is told why.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

from workbench.engine.context.session import SessionContext
from workbench.engine.context.wire_archive import FILE_LINE
from workbench.engine.errors import WorkbenchError, reason_of
from workbench.engine.plans.compaction_prompt import SummaryPrompt
from workbench.engine.plans.measure import NEW_MESSAGE, measure
from workbench.engine.plans.plan import Plan
from workbench.engine.plans.strategies.archive import digest_header
from workbench.engine.plans.strategies.base import Rewrite, describe_call
from workbench.engine.plans.summarizers import LLMSummarizer, Summarizer, SummaryFailed
from workbench.engine.settings.strategies import DigestWriter
from workbench.engine.transcript.models import TextPart, ToolResultPart, ToolUsePart

INPUT_CHARS = 12_000
"""Spec 003: the model reads at most this many characters of the archived results."""
OUTPUT_CHARS = 1_200
"""Spec 003: the model's digest is clipped to this many characters."""
MAX_TOKENS = 1_024
"""Output tokens asked for: room for 1,200 characters of prose, and no more to pay for."""
CLIPPED = "\n…[clipped]"

SYSTEM = (
    "You write the digest of old tool calls and their results that an AI coding agent can no longer see: they "
    "were archived to save context. Keep what the agent may still need: for each call, what it did and what it "
    "found (file paths, names, numbers, errors and their causes). Plain text, no preamble, at most 1,200 "
    "characters. Do not call tools."
)

Warn = Callable[[str], None]


def model_writer(chain: Sequence[Summarizer]) -> LLMSummarizer | None:
    """The model of a summariser chain (``Compactor.chain``) asked for short digests; None when the chain
    has no model (no provider, a scripted replay, or ``heuristic`` chosen)."""
    first = chain[0] if chain else None
    return LLMSummarizer(first.provider, first.model, MAX_TOKENS) if isinstance(first, LLMSummarizer) else None


def digest_input(ctx: SessionContext, plan: Plan) -> str:
    """The archived calls and results as the model reads them, oldest first, clipped to :data:`INPUT_CHARS`."""
    archived = {item.message_id for item in plan.items if item.action == "archive"}
    calls: dict[str, str] = {}
    sections: list[str] = []
    for message in ctx.messages:
        if message.id not in archived:
            continue
        if message.kind == "tool_summary":  # the digest this one replaces: what it says is kept
            sections.append(f"## an earlier digest\n{message.text}")
            continue
        for part in message.parts:
            if isinstance(part, ToolUsePart):
                calls[part.id] = describe_call(part, width=200)
            elif isinstance(part, ToolResultPart):
                status = " (error)" if part.is_error else ""
                sections.append(f"## {calls.get(part.tool_use_id, 'tool')}{status}\n{part.text}")
            elif isinstance(part, TextPart) and part.text.strip() and message.role == "assistant":
                sections.append(f"## the agent said\n{part.text}")
    text = "\n\n".join(sections)
    if len(text) > INPUT_CHARS:
        text = text[: INPUT_CHARS - len(CLIPPED)] + CLIPPED
    return text


def _digest_item_spec(plan: Plan) -> dict[str, object] | None:
    for item in plan.items:
        spec = item.data.get(NEW_MESSAGE) if item.data else None
        if item.action == "summary" and isinstance(spec, dict):
            return spec
    return None


async def model_digest(ctx: SessionContext, plan: Plan, summarizer: LLMSummarizer) -> str:
    """The digest message's text as the model writes it: spec 003's header, then at most 1,200 characters."""
    spec = _digest_item_spec(plan)
    source = spec.get("source") if spec else None
    archived = source.get("archived_results") if isinstance(source, dict) else None
    if not isinstance(archived, int):
        ids = {item.message_id for item in plan.items if item.action == "archive"}
        archived = sum(isinstance(p, ToolResultPart) for m in ctx.messages if m.id in ids for p in m.parts)
    prompt = SummaryPrompt(system=SYSTEM, text=digest_input(ctx, plan))
    response = await summarizer.complete(prompt)
    body = "\n".join(p.text for p in response.parts if isinstance(p, TextPart)).strip()
    if not body:
        raise SummaryFailed("the model returned no digest text")
    if len(body) > OUTPUT_CHARS:
        body = body[: OUTPUT_CHARS - 1] + "…"
    return f"{digest_header(archived)}\n{body}"


async def with_model_digest(ctx: SessionContext, plan: Plan, summarizer: LLMSummarizer, warn: Warn) -> Plan:
    """``plan`` (an archive, measured on ``ctx``) with the model's digest, measured again; ``plan`` itself
    when it has no digest, the model fails, or the model's digest would leave the context no smaller."""
    spec = _digest_item_spec(plan)
    if spec is None:
        return plan
    try:
        text = await model_digest(ctx, plan, summarizer)
    except WorkbenchError as exc:
        warn(f"the model could not write the archive digest ({reason_of(exc)}); the offline digest is used")
        return plan
    except Exception as exc:  # noqa: BLE001 - as a failed summary degrades (spec 004): reported, never silent
        warn(f"the model could not write the archive digest ({type(exc).__name__}: {reason_of(exc)}); "
             "the offline digest is used")
        return plan
    rewritten = copy.deepcopy(plan)
    new_spec = _digest_item_spec(rewritten)
    assert new_spec is not None
    source = new_spec.get("source")
    named = [line for line in str(new_spec.get("text", "")).split("\n") if line.startswith(FILE_LINE)]
    new_spec["text"] = "\n".join([text, *named])  # a proxied agent's digest still names its file
    new_spec["source"] = {**(source if isinstance(source, dict) else {}), "summarizer": "llm",
                          "model": summarizer.model}
    measured = measure(ctx, rewritten)
    if measured.tokens_saved <= 0:
        warn("the model's archive digest is longer than what it archives; the offline digest is used")
        return plan
    return measured


def digest_rewrite(chain: Callable[[DigestWriter], Sequence[Summarizer]], warn: Warn) -> Rewrite:
    """For the automatic path (``registry.run_automatic_async``): an archive plan gets the model's digest when
    ``[strategies.archive] summary`` names a summariser with a model (``chain`` is ``Compactor.chain``)."""

    async def rewrite(ctx: SessionContext, plan: Plan) -> Plan:
        if plan.strategy != "archive":
            return plan
        writer = model_writer(chain(ctx.config.strategies.archive.summary))
        return plan if writer is None else await with_model_digest(ctx, plan, writer, warn)

    return rewrite
