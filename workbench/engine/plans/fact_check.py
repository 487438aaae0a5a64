"""Kept or lost: which facts of a span (``facts``) a summary still shows, for a preview, an edited summary,
a past compaction, or the agent's own summary in an imported transcript.

A path is kept when the summary names it or one of its tails (``src/app.py``, ``app.py``); a name or a
number when it appears as a whole token; an instruction, a decision, a command or an error when enough of
its key words appear (compared on their first five letters, so ``compiled`` finds ``compile``, and a shorter
word at the start of one, so ``pushed`` finds ``push``); a todo item
when its words appear on one line together with its status.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.facts import KINDS, Fact, extract, user_text
from workbench.engine.transcript.models import Message
from workbench.engine.transcript.overlay import OverlayEvent

STEM = 5
_WORD = re.compile(r"[a-z0-9][a-z0-9_-]*")
_PLAIN = re.compile(r"[a-z0-9][a-z0-9_-]*$")
_SUMMARY_TAG = re.compile(r"<summary>(.*?)(?:</summary>|$)", re.DOTALL)
_STATUS_WORDS = {
    "completed": ("completed", "complete", "done", "[x]", "finished", "✓", "✅"),
    "in_progress": ("in_progress", "in progress", "[~]", "ongoing", "current", "working on", "started"),
    "pending": ("pending", "[ ]", "todo", "to do", "not started", "remaining", "next", "open"),
}


@dataclass(frozen=True, slots=True)
class FactCheck:
    kept: int
    total: int
    lost: list[Fact] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"kept": self.kept, "total": self.total, "lost": [f.as_json() for f in self.lost]}

    def figure(self) -> str:
        return f"kept {self.kept} of {self.total}"

    def lost_by_kind(self) -> dict[str, list[Fact]]:
        out: dict[str, list[Fact]] = {}
        for fact in self.lost:
            out.setdefault(fact.kind, []).append(fact)
        return {kind: out[kind] for kind in KINDS if kind in out}


def _stems(text: str) -> frozenset[str]:
    """Each word's first two to five letters: a term shorter than five letters is found at the start of a longer
    word too (``push`` in ``pushed``)."""
    return frozenset(w[:n] for w in set(_WORD.findall(text)) for n in range(2, min(len(w), STEM) + 1))


def _joins(char: str) -> bool:
    """A character that continues a token."""
    return char.isalnum() or char in "._"


class Summary:
    """A summary text prepared once for checking many facts against it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lower = text.lower()
        self.stems = _stems(self.lower)
        self._lines: list[tuple[str, frozenset[str]]] | None = None

    def lines(self) -> list[tuple[str, frozenset[str]]]:
        if self._lines is None:
            self._lines = [(line, _stems(line)) for line in self.lower.splitlines() if line.strip()]
        return self._lines

    def has_token(self, token: str) -> bool:
        """``token`` as a whole token (``3.2`` is not in ``3.21`` nor in ``3.2.1``; ``v1.2`` matches ``1.2``)."""
        text, bare = self.text, token.removeprefix("v")
        start = text.find(bare)
        while start >= 0:
            before, end = text[start - 1:start], start + len(bare)
            after = text[end:end + 2]
            if not _joins(before) and not (_joins(after[:1]) and after[:1] != "." or after[:1] == "." and
                                           after[1:2].isdigit()):
                return True
            start = text.find(bare, start + 1)
        return False

    def has_term(self, term: str) -> bool:
        """A word by its stem; a term with dots or slashes in it (``a.exs``, ``.claude``) as it is."""
        return term[:STEM] in self.stems if _PLAIN.match(term) else term in self.lower

    def keeps(self, fact: Fact) -> bool:
        if fact.match == "path":
            return any(tail in self.text for tail in fact.terms)
        if fact.match == "exact":
            return self.has_token(fact.terms[0])
        if fact.status is None:
            return sum(self.has_term(t) for t in fact.terms) >= fact.need
        stems = [t[:STEM] for t in fact.terms]
        words = _STATUS_WORDS.get(fact.status, (fact.status.replace("_", " "),))
        return any(sum(s in line_stems for s in stems) >= fact.need and any(w in line for w in words)
                   for line, line_stems in self.lines())


def check(facts: Sequence[Fact], summary: str) -> FactCheck:
    prepared = Summary(summary)
    lost = [f for f in facts if not prepared.keeps(f)]
    return FactCheck(kept=len(facts) - len(lost), total=len(facts), lost=lost)


# --- past compactions -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactedSpan:
    pivot_id: str
    """The compaction's pivot event."""
    message_id: str
    """Where the compaction took effect: its first kept message, or a transcript's boundary message."""
    messages: list[Message]
    """What the summary replaced: the messages from the previous compaction's pivot to this one's, without
    those the workbench's own compaction kept verbatim (pinned)."""
    summary: str | None
    """None when the summary is not in the session."""


def compacted_spans(ctx: SessionContext) -> list[CompactedSpan]:
    """Every compaction (pivot), oldest first, with the span it replaced and its summary: the workbench's own,
    a proxied agent's, and those a transcript recorded (a Claude Code ``compact_boundary``)."""
    position = {m.id: n for n, m in enumerate(ctx.messages)}
    pinned = ctx.overlay.pinned
    out: list[CompactedSpan] = []
    start = 0
    for event in ctx.events:
        if event.action != "pivot":
            continue
        at = position.get(event.message_id)
        if at is None:
            out.append(CompactedSpan(event.id, event.message_id, [], None))
            continue
        span = ctx.messages[start:at]
        if event.origin == "compaction":  # the workbench kept its pinned messages verbatim
            span = [m for m in span if m.id not in pinned]
        summary = _summary_of(ctx, event, at)
        if event.origin == "agent" and summary is not None:
            span = _without_request_for(span, summary)
        out.append(CompactedSpan(event.id, event.message_id, span, summary))
        start = at
    return out


def _summary_of(ctx: SessionContext, event: OverlayEvent, at: int) -> str | None:
    """The workbench's own summary (the pivot names it); a proxied agent's, the first message it sent after
    compacting (the pivot's); a transcript's, the summary message after its boundary."""
    summary_id = event.data.get("summary_id")
    if isinstance(summary_id, str):
        return next((m.text for m in ctx.messages if m.id == summary_id), None)
    if event.origin == "agent":
        return user_text(ctx.messages[at]) or None
    after = ctx.messages[at + 1:at + 6]  # the agent's summary follows its boundary (after any re-attached files)
    return next((m.text for m in after if m.kind == "summary" and not m.sidechain), None)


def _without_request_for(span: list[Message], summary: str) -> list[Message]:
    """``span`` without the request that made ``summary`` (its instruction and the answer the summary holds),
    which a proxied agent sends in the same conversation as what it summarises."""
    answer = next((n for n in range(len(span) - 1, -1, -1) if span[n].role == "assistant"), None)
    if answer is None:
        return span
    said = span[answer].text
    inside = _SUMMARY_TAG.search(said)  # Claude Code keeps the <summary> block of its answer, not the analysis
    head = " ".join((inside.group(1) if inside else said).split())[:200]
    if not head or head not in " ".join(summary.split()):
        return span
    asked = next((n for n in range(answer - 1, -1, -1) if span[n].role == "user" and span[n].kind == "message"), answer)
    return span[:asked]


def past_checks(ctx: SessionContext) -> list[tuple[str, FactCheck | None]]:
    """Each compaction (pivot), oldest first as ``compaction_history`` lists them, by the message where it took
    effect, with its check; None where the span or the summary is not known."""
    markers = ctx.config.compaction.decision_markers
    return [(span.message_id, check(extract(span.messages, markers), span.summary)
             if span.messages and span.summary is not None else None) for span in compacted_spans(ctx)]


def latest_check(ctx: SessionContext) -> FactCheck | None:
    """The check of the session's latest compaction whose span and summary are known (only that span's facts
    are extracted: what the app asks right after a compaction)."""
    markers = ctx.config.compaction.decision_markers
    span = next((s for s in reversed(compacted_spans(ctx)) if s.messages and s.summary is not None), None)
    return check(extract(span.messages, markers), span.summary) if span is not None and span.summary is not None \
        else None


def preview_facts(ctx: SessionContext, summarized: Collection[str]) -> list[Fact]:
    """The facts of the messages a previewed compaction would summarise (``CompactionPreview.summarized``)."""
    ids = set(summarized)
    return extract([m for m in ctx.messages if m.id in ids], ctx.config.compaction.decision_markers)
