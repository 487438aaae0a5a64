"""Summarisers: the model (streamed, tool-less) and an offline heuristic checkpoint, with fallbacks.

Spec 004's graceful degradation: when the model's summary fails, the heuristic one is used, and if
that fails too, the old conversation is simply dropped (truncation) — each step with a warning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from workbench.engine.context.projection import ContextItem
from workbench.engine.errors import WorkbenchError, reason_of
from workbench.engine.plans.compaction_metadata import WRITE_TOOLS, CompactionMetadata
from workbench.engine.plans.compaction_prompt import SummaryPrompt, clip, prior_summary_body
from workbench.engine.providers.base import ModelRequest, ModelResponse, Provider, StreamDelta, SystemBlock
from workbench.engine.transcript.models import TextPart, ToolResultPart, ToolUsePart, Usage

DeltaSink = Callable[[str], None]
WarningSink = Callable[[str], None]
AUTO_CONTINUE = "Continue if you have next steps"
"""Spec 002 §4.3: the synthetic message after an automatic compaction (not a user request)."""
MAX_REQUESTS = 12
MAX_ERRORS = 5


class SummaryFailed(WorkbenchError):
    """The summariser produced nothing usable; the next one in the chain takes over."""


@dataclass(frozen=True)
class SummaryInput:
    prompt: SummaryPrompt
    conversation: Sequence[ContextItem]
    prior_summaries: Sequence[str]
    metadata: CompactionMetadata
    tool_names: Mapping[str, str]
    focus: str | None = None
    instructions: Sequence[str] = ()
    prior_clip: int = 6_000


@dataclass
class SummaryOutput:
    body: str
    """The summary itself, without the prefix and metadata block the compaction adds."""
    summarizer: str
    model: str | None = None
    usage: Usage | None = None
    warnings: list[str] = field(default_factory=list)


class Summarizer(Protocol):
    name: str

    async def summarize(self, data: SummaryInput, on_delta: DeltaSink | None = None) -> SummaryOutput: ...


class LLMSummarizer:
    """A tool-less, streamed request through the session's provider (spec 002 §4.2, spec 004)."""

    name = "llm"

    def __init__(self, provider: Provider, model: str, max_tokens: int = 8_192) -> None:
        self.provider = provider
        self.model = model
        self.max_tokens = max_tokens

    def request(self, prompt: SummaryPrompt) -> ModelRequest:
        return ModelRequest(
            model=self.model,
            system=[SystemBlock(text=prompt.system)],
            messages=[{"role": "user", "content": [{"type": "text", "text": prompt.text}]}],
            tools=[],
            max_tokens=self.max_tokens,
        )

    async def complete(self, prompt: SummaryPrompt, on_delta: DeltaSink | None = None) -> ModelResponse:
        """The model's answer to ``prompt`` (tool-less, streamed): the summary's call, and the archive digest's."""
        response: ModelResponse | None = None
        async for item in self.provider.stream(self.request(prompt)):
            if isinstance(item, StreamDelta) and item.kind == "text" and on_delta is not None:
                on_delta(item.text)
            elif isinstance(item, ModelResponse):
                response = item
        if response is None:
            raise SummaryFailed("the model stream ended without a response")
        return response

    async def summarize(self, data: SummaryInput, on_delta: DeltaSink | None = None) -> SummaryOutput:
        response = await self.complete(data.prompt, on_delta)
        warnings = [
            f"the summariser tried to call the tool {p.name!r}; tools are off during compaction, so it was ignored"
            for p in response.parts if isinstance(p, ToolUsePart)
        ]
        text = "\n".join(p.text for p in response.parts if isinstance(p, TextPart)).strip()
        if not text:
            raise SummaryFailed("the model returned no summary text")
        if response.stop_reason == "max_tokens":
            warnings.append(f"the summary was cut at {self.max_tokens:,} output tokens")
        return SummaryOutput(body=text, summarizer=self.name, model=response.model, usage=response.usage,
                             warnings=warnings)


def _one_line(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit).replace("\n", " ")


class HeuristicSummarizer:
    """A structured checkpoint from the transcript alone: offline and deterministic."""

    name = "heuristic"

    async def summarize(self, data: SummaryInput, on_delta: DeltaSink | None = None) -> SummaryOutput:
        body = heuristic_body(data)
        if on_delta is not None:
            on_delta(body)
        return SummaryOutput(body=body, summarizer=self.name)


def heuristic_body(data: SummaryInput) -> str:
    requests: list[str] = []
    read: dict[str, None] = {}
    changed: dict[str, None] = {}
    errors: list[str] = []
    calls: Counter[str] = Counter()
    last_reply = ""
    for item in data.conversation:
        for part in item.parts:
            if isinstance(part, TextPart) and part.text.strip():
                if item.role == "user" and part.text.strip() != AUTO_CONTINUE:
                    requests.append(part.text)
                elif item.role == "assistant":
                    last_reply = part.text
            elif isinstance(part, ToolUsePart):
                calls[part.name] += 1
                path = next((v for k, v in part.input.items() if k in ("path", "file_path", "filePath")), None)
                if isinstance(path, str):
                    (changed if part.name in WRITE_TOOLS else read).setdefault(path, None)
            elif isinstance(part, ToolResultPart) and part.is_error:
                errors.append(f"{data.tool_names.get(part.tool_use_id, 'tool')}: {_one_line(part.text, 160)}")
    shown = [_one_line(r, 300) for r in requests[-MAX_REQUESTS:]]  # only what is listed gets formatted
    lines = [f"Checkpoint of {len(data.conversation):,} earlier messages (heuristic summary, made offline)."]
    priors = [prior_summary_body(s) for s in data.prior_summaries if s.strip()]
    if priors:
        lines += ["", "Before that (from the previous summary):", clip("\n\n".join(priors), data.prior_clip)]
    lines += ["", "User requests:", *([f"- {r}" for r in shown] or ["- (none)"])]
    if len(requests) > MAX_REQUESTS:
        lines.append(f"- ({len(requests) - MAX_REQUESTS} earlier requests not listed)")
    lines += ["", "Files touched:"]
    lines += [f"- changed: {', '.join(changed)}"] if changed else []
    lines += [f"- read: {', '.join(p for p in read if p not in changed)}"] if set(read) - set(changed) else []
    if not changed and not read:
        lines.append("- (none)")
    if calls:
        lines += ["", "Tool calls: " + ", ".join(f"{name} ×{n}" for name, n in calls.most_common())]
    if errors:
        lines += ["", "Errors seen:", *[f"- {e}" for e in errors[-MAX_ERRORS:]]]
    if data.focus or data.instructions:
        lines += ["", "Focus:", *([f"- {data.focus}"] if data.focus else []), *[f"- {i}" for i in data.instructions]]
    lines += [
        "",
        "Where work stopped:",
        f"- Last request: {shown[-1] if shown else '(none)'}",
        f"- Last reply: {_one_line(last_reply, 600) if last_reply.strip() else '(no assistant reply yet)'}",
    ]
    return "\n".join(lines)


def truncation_body(data: SummaryInput, why: str = "because summarising them failed") -> str:
    """Spec 004's last resort: the old conversation is dropped, and the model is told so."""
    return (
        f"The {len(data.conversation):,} earlier messages of this conversation were dropped without a summary "
        f"{why}. Ask the user for any context you need that is not below."
    )


async def summarize_with_fallback(
    chain: Sequence[Summarizer],
    data: SummaryInput,
    on_delta: DeltaSink | None,
    warn: WarningSink,
) -> SummaryOutput:
    """The first summariser in ``chain`` that succeeds; truncation if none does. Each failure is warned."""
    failures: list[str] = []
    for position, summarizer in enumerate(chain):
        following = chain[position + 1].name if position + 1 < len(chain) else "truncation"
        try:
            output = await summarizer.summarize(data, on_delta)
        except WorkbenchError as exc:
            message = f"{summarizer.name} summary failed ({reason_of(exc)}); using {following} instead"
        except Exception as exc:  # noqa: BLE001 - spec 004: a failing summariser degrades, reported, never silent
            message = f"{summarizer.name} summary failed ({type(exc).__name__}: {reason_of(exc)}); using {following} instead"
        else:
            output.warnings[:0] = failures
            return output
        warn(message)
        failures.append(message)
    return SummaryOutput(body=truncation_body(data), summarizer="truncation", warnings=failures)
