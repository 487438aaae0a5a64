"""The summariser's prompt: spec 000 §2's structure inside spec 002 §6's system prompt and final instruction.

Only what the model sees goes in (the projection's items, placeholders substituted), tool results
and inputs clipped (spec 003: 1,800 characters), images as one line, the previous summary once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from workbench.engine.context.projection import ContextItem
from workbench.engine.plans.compaction_metadata import CompactionMetadata, strip_metadata
from workbench.engine.transcript.blocks import image_line
from workbench.engine.transcript.models import ImagePart, TextPart, ThinkingPart, ToolResultPart, ToolUsePart

SUMMARY_PREFIX = "[Previous conversation summary]"

SUMMARIZER_SYSTEM = """You are a helpful AI assistant tasked with summarizing conversations.

When asked to summarize, provide a detailed but concise summary of the conversation.
Focus on information that would be helpful for continuing the conversation, including:
- What was done
- What is currently being worked on
- Which files are being modified
- What needs to be done next
- Key user requests, constraints, or preferences that should persist
- Important technical decisions and why they were made

Your summary should be comprehensive enough to provide context but concise enough to be quickly understood."""
"""Spec 002 §6.1."""

MARKER_QUESTION = "What did we do so far?"
"""Spec 002 §6.3."""

FINAL_INSTRUCTION = (
    "Provide a detailed prompt for continuing our conversation above. Focus on information that would be "
    "helpful for continuing the conversation, including what we did, what we're doing, which files we're "
    "working on, and what we're going to do next considering new session will not have access to our conversation."
)
"""Spec 002 §6.2."""

INSTRUCTIONS = """### Instructions
Summarize the REST of the conversation (everything NOT in preserved_messages) concisely.
Focus on: what was done, what was decided, what remains, what problems were encountered.
Do NOT summarize the preserved messages — they must appear exactly as-is (they stay in context verbatim, \
so do not repeat them).
If a prior summary is given, fold what still matters from it into your summary."""
"""Spec 000 §2."""

CHARS_PER_TOKEN = 3.5
"""For fitting the prompt into the summariser's window without counting it (spec 003's estimate, a bit safer)."""


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…[{len(text) - limit:,} more characters clipped]"


def item_text(item: ContextItem, tool_names: Mapping[str, str], limit: int) -> str:
    """One message as the summariser reads it: role, text verbatim, tool traffic clipped, no thinking."""
    lines: list[str] = []
    for part in item.parts:
        match part:
            case TextPart(text=text) if text.strip():
                lines.append(text)
            case ToolUsePart(name=name, input=tool_input):
                lines.append(f"[tool call: {name}] {clip(json.dumps(tool_input, ensure_ascii=False), limit)}")
            case ToolResultPart(tool_use_id=tool_id, text=text, images=images, is_error=is_error):
                label = f"{tool_names.get(tool_id, 'tool')}{' (error)' if is_error else ''}"
                body = clip(text, limit) + "".join("\n" + image_line(i) for i in images)
                lines.append(f"[tool result: {label}] {body}")
            case ImagePart():
                lines.append(image_line(part))
            case ThinkingPart():
                continue
    return f"[{item.role or 'user'}]\n" + ("\n".join(lines) if lines else "(empty)")


def prior_summary_body(text: str) -> str:
    """A previous summary without its prefix and metadata block, as the next prompt quotes it."""
    body = strip_metadata(text).strip()
    return body[len(SUMMARY_PREFIX) :].strip() if body.startswith(SUMMARY_PREFIX) else body


@dataclass(frozen=True)
class PromptInput:
    conversation: Sequence[ContextItem]
    """The items being summarised (preserved messages and earlier summaries left out)."""
    preserved: Sequence[ContextItem]
    prior_summaries: Sequence[str]
    metadata: CompactionMetadata
    tool_names: Mapping[str, str]
    focus: str | None = None
    instructions: Sequence[str] = ()
    """Extra instructions from PreCompact hooks."""
    clip_chars: int = 1_800
    max_chars: int | None = None
    """Fit the prompt into this many characters by leaving out the oldest conversation."""


@dataclass(frozen=True)
class SummaryPrompt:
    system: str
    text: str
    omitted: int = 0
    """Oldest messages left out to fit the summariser's window."""
    warnings: tuple[str, ...] = field(default=())


def _section(title: str, tag: str, body: str) -> str:
    return f"### {title}\n<{tag}>\n{body}\n</{tag}>"


def build_prompt(data: PromptInput) -> SummaryPrompt:
    preserved = "\n\n".join(item_text(i, data.tool_names, data.clip_chars) for i in data.preserved)
    head = [
        "## Compaction Instructions",
        "",
        "You are summarizing a conversation for continuity. Preserve the following VERBATIM:",
        "",
        _section("Preserved Messages (DO NOT SUMMARIZE)", "preserved_messages", preserved or "(none)"),
        "",
        data.metadata.as_text(),
    ]
    priors = [prior_summary_body(s) for s in data.prior_summaries if s.strip()]
    if priors:
        head += ["", _section("Prior Summary", "prior_summary", "\n\n".join(priors))]
    tail: list[str] = []
    focus = [f"- The user asks the summary to focus on: {data.focus}"] if data.focus else []
    focus += [f"- {i}" for i in data.instructions if i.strip()]
    if focus:
        tail += ["### Focus", *focus, ""]
    tail += [INSTRUCTIONS, "", MARKER_QUESTION, "", FINAL_INSTRUCTION]
    # Newest first, until the room is used up: only what fits is rendered (O(what fits), not O(session)).
    room = None if data.max_chars is None else data.max_chars - sum(len(s) + 1 for s in head + tail) - 200
    entries: list[str] = []
    used = 0
    for item in reversed(data.conversation):
        entry = item_text(item, data.tool_names, data.clip_chars)
        if room is not None and used + len(entry) + 2 > room:
            break
        entries.append(entry)
        used += len(entry) + 2
    entries.reverse()
    omitted = len(data.conversation) - len(entries)
    if omitted:
        entries.insert(0, f"[{omitted:,} earlier messages left out to fit the summariser's context window]")
    conversation = _section("Conversation to Summarize", "conversation", "\n\n".join(entries) or "(nothing new)")
    text = "\n".join([*head, "", conversation, "", *tail])
    warnings = (f"the summariser prompt leaves out the {omitted:,} oldest messages to fit its window",)
    return SummaryPrompt(system=SUMMARIZER_SYSTEM, text=text, omitted=omitted,
                         warnings=warnings if omitted else ())
