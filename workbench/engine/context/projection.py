"""Projection: what the next model request will contain, item by item, with tokens.

``project(messages, overlay, ...)`` is pure. It is built on :class:`ViewBuilder`,
which takes messages one at a time, so a live session can append a message in
O(that message) and still get exactly what a full ``project`` would give.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from workbench.engine.context.calibration import Calibrator
from workbench.engine.context.effective import (  # re-exported: placeholders are part of the projection's contract
    KEPT_INPUT_KEYS,
    PRUNED_INPUT_PLACEHOLDER,
    PRUNED_PLACEHOLDER,
    badges_of,
    effective_parts,
    offload_reference,
    preview_text,
    pruned_input,
    pruned_part,
)
from workbench.engine.context.estimation import SUMMARISER, Change, Estimator, RequestEstimate
from workbench.engine.context.view import (  # re-exported: the view is the projection's result
    PART_COMPONENTS,
    CompactionRecord,
    ContextItem,
    ContextView,
    EstimateSource,
    component_of,
    text_component,
)
from workbench.engine.context.wire_cache import WireCache
from workbench.engine.settings.limits import keeps_thinking
from workbench.engine.transcript.models import Message, Part, TextPart, ThinkingPart
from workbench.engine.transcript.overlay import OverlayState, Pivot
from workbench.engine.transcript.tokens import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TokenCounter

__all__ = [
    "KEPT_INPUT_KEYS",
    "PRUNED_INPUT_PLACEHOLDER",
    "PRUNED_PLACEHOLDER",
    "CompactionRecord",
    "ContextItem",
    "ContextView",
    "SUMMARISER",
    "RequestEstimate",
    "ViewBuilder",
    "component_of",
    "offload_reference",
    "preview_text",
    "project",
    "pruned_input",
    "pruned_part",
]

ERROR_BADGES = ("error",)


def estimate_key(message: Message, model: str | None) -> str | None:
    """Whose anchor, calibration and overhead a message's request uses: its model, or its model's summariser."""
    if model and message.role == "assistant" and message.kind == "summary":
        return model + SUMMARISER
    return model


class ViewBuilder:
    """Accumulates the view one message at a time; :meth:`freeze` freezes it."""

    def __init__(
        self,
        session_id: str,
        overlay: OverlayState,
        counter: TokenCounter,
        calibrator: Calibrator | None = None,
        model: str | None = None,
        fixed_items: Iterable[ContextItem] = (),
    ) -> None:
        self.session_id = session_id
        self.overlay = overlay
        self.counter = counter
        self.calibrator = calibrator.copy() if calibrator else Calibrator()
        self.model = model
        self.fixed_items = tuple(fixed_items)
        """System prompt, tool definitions and other sections that precede the messages."""
        self._pivots = {p.message_id: p for p in overlay.pivots}
        self._summary_ids = {p.summary_id for p in overlay.pivots if p.summary_id}
        self._touched = {message_id for message_id, _ in (*overlay.pruned, *overlay.offloaded)}
        """Messages with a part the overlay replaces: the others are sent as written."""
        self._plain_badge_exceptions = overlay.pinned | overlay.summaries
        self._front = 0
        self._awaiting_summary: str | None = None
        self.items: list[ContextItem] = []
        self._wire = WireCache(self.items)
        self.totals: dict[str, int] = {}
        self.compactions: list[CompactionRecord] = []
        self.excluded: dict[str, str] = {}
        self.estimator = Estimator(self.calibrator, sum(i.tokens for i in self.fixed_items))
        self._last_usage_hit: float | None = None
        self._source: EstimateSource = "estimated"
        for item in self.fixed_items:
            self._count(item)

    # --- adding -------------------------------------------------------------

    def add_all(self, messages: Iterable[Message]) -> ViewBuilder:
        for message in messages:
            self.add(message)
        return self

    def add(self, message: Message) -> None:
        if message.sidechain:
            self.excluded[message.id] = "sidechain"
            return
        pivot = self._pivots.get(message.id)
        if pivot is not None:
            self._reset_at(message.id, pivot)
            if message.kind == "compact_boundary":
                self.excluded[message.id] = "marker"
                return
        if not message.agent_visible:
            self.excluded[message.id] = "hidden"
            return
        if message.id in self.overlay.archived:
            self.excluded[message.id] = "archived"
            self._forget(message)
            return
        if message.kind == "compact_boundary":
            self.excluded[message.id] = "marker"
            return
        if message.kind == "summary" and message.source.get("compaction") and message.id not in self._summary_ids:
            self.excluded[message.id] = "undone-summary"
            return
        if message.kind == "tool_summary" and message.source.get("archive_plan") and message.id not in self.overlay.summaries:
            self.excluded[message.id] = "undone-summary"  # the digest of an archive plan that was undone
            return
        self._add_visible(message)

    def _forget(self, message: Message) -> None:
        """An archived message left the context: requests that counted it report more than is there now.

        Its usage still anchors the estimate (the request happened, though it is not listed or learned
        from); what it held comes off as an overlay change dated when it was archived, like a pruned part.
        """
        usage = message.usage
        model = usage.model if usage and usage.model else message.model
        if message.role == "assistant" and model:
            self.model = model
        if usage is not None and usage.total_input > 0:
            self._last_usage_hit = usage.cache_hit_rate
            self._source = "reported"
        touched = message.id in self._touched
        parts = tuple(effective_parts(self.overlay, message)) if touched else tuple(message.parts)
        shown, blocks = self._raw_components(message.role, parts)
        calibrated = self._calibrated(shown, blocks)
        changes = self._overlay_changes(message, parts, sum(calibrated.values())) if touched else []
        # What it held as the view showed it goes (a pruning before stays a change of its own); thinking a
        # later turn strips anyway is not counted twice.
        kept_thinking = any(isinstance(p, ThinkingPart) for p in parts) and keeps_thinking(model)
        strip = "" if kept_thinking else "thinking"
        gone_raw = sum(raw for name, raw in shown.items() if name != strip)
        gone = sum(tokens for name, tokens in calibrated.items() if name != strip)
        changes.append((-gone_raw, -gone, self.overlay.archived_at.get(message.id)))
        self.estimator.add(
            raw=0, blocks=0, visible_raw=0, visible_blocks=0, has_thinking=False,
            new_turn=message.role == "user" and message.kind in ("message", "summary"),
            model=estimate_key(message, model), usage=usage,
            at=message.created_at, changes=changes,
        )

    def _raw_components(self, role: str, parts: tuple[Part, ...]) -> tuple[dict[str, int], int]:
        """Raw tokens of ``parts`` by budget component (framing included), and their block count."""
        count = self.counter.count_part
        role_component = "assistant" if role == "assistant" else "user"
        raw_by_component: dict[str, int] = {}
        for part in parts:
            name = text_component(role, part.text) if isinstance(part, TextPart) else PART_COMPONENTS.get(part.kind, role_component)
            raw_by_component[name] = raw_by_component.get(name, 0) + count(part) + BLOCK_OVERHEAD
        if raw_by_component:
            raw_by_component[next(iter(raw_by_component))] += MESSAGE_OVERHEAD
        return raw_by_component, max(1, len(parts))

    def _calibrated(self, raw_by_component: Mapping[str, int], blocks: int) -> dict[str, int]:
        """A message's tokens by component as its item shows them: the current calibration of the raw counts."""
        ratio, overhead = self.calibrator.for_model(self.model).coefficients()
        share = overhead * blocks / (len(raw_by_component) or 1)
        return {name: round(ratio * raw + share) for name, raw in raw_by_component.items()}

    def _add_visible(self, message: Message) -> None:
        touched = message.id in self._touched
        parts = tuple(effective_parts(self.overlay, message)) if touched else tuple(message.parts)
        role = message.role
        raw_by_component, blocks = self._raw_components(role, parts)
        thinking = sum(1 for part in parts if part.kind == "thinking")
        raw_total = sum(raw_by_component.values()) or MESSAGE_OVERHEAD
        usage = message.usage
        model = usage.model if usage and usage.model else message.model
        if role == "assistant" and model:
            self.model = model
        key = estimate_key(message, model)
        if usage is not None and usage.total_input > 0:
            self.estimator.request(message.id, key, usage, at=message.created_at)
            self._last_usage_hit = usage.cache_hit_rate
            self._source = "reported"
        elif self.estimator.anchored:
            self._source = "calibrated"
        components = self._calibrated(raw_by_component, blocks)
        changes = self._overlay_changes(message, parts, sum(components.values())) if touched else []
        self.estimator.add(
            raw=raw_total,
            blocks=blocks,
            visible_raw=raw_total - raw_by_component.get("thinking", 0),
            visible_blocks=max(1, blocks - thinking),
            has_thinking=thinking > 0,
            new_turn=role == "user" and message.kind in ("message", "summary"),
            model=key,
            usage=usage,
            at=message.created_at,
            changes=changes,
        )
        item = ContextItem(
            kind="message",
            tokens=sum(components.values()),
            components=components,
            message_id=message.id,
            index=message.index,
            role=role,
            badges=self._badges(message, touched),
            parts=parts,
            raw_tokens=raw_total,
        )
        self._keep(item, front=message.id in self._summary_ids)
        if message.id == self._awaiting_summary:
            self._restart_estimate()

    def _badges(self, message: Message, touched: bool) -> tuple[str, ...]:
        """``badges_of``, without its overlay lookups for the many messages the overlay never mentions."""
        if touched or message.kind == "summary" or message.id in self._plain_badge_exceptions:
            return badges_of(self.overlay, message)
        for part in message.parts:
            if part.kind == "tool_result" and part.is_error:
                return ERROR_BADGES
        return ()

    def _reset_at(self, message_id: str, pivot: Pivot) -> None:
        self.compactions.append(
            CompactionRecord(
                message_id=message_id,
                trigger=pivot.trigger,
                reported_pre_tokens=pivot.pre_tokens,
                estimated_pre_tokens=self.estimate(),
            )
        )
        preserved = [i for i in self.items if i.message_id in self.overlay.pinned]
        for item in self.items:
            if item.message_id and item.message_id not in self.overlay.pinned:
                self.excluded[item.message_id] = "before-compaction"
        self.items = []
        self._wire.restart(self.items)
        self.totals = {}
        for item in self.fixed_items:
            self._count(item)
        self._front = 0
        for item in preserved:
            self._keep(item, front=False)
        if pivot.summary_id is None:
            self._restart_estimate()
        else:
            # The kept tail was written before the compaction and its usage describes the old
            # context: keep estimating as before until the summary arrives, then start afresh.
            self._awaiting_summary = pivot.summary_id

    def _restart_estimate(self) -> None:
        """Nothing reported describes the context any more: estimate it from its items alone."""
        self.estimator.reset()
        for item in self.items:
            blocks = max(1, len(item.parts))
            self.estimator.add(
                raw=item.raw_tokens, blocks=blocks, visible_raw=item.raw_tokens, visible_blocks=blocks,
                has_thinking=False, new_turn=False, model=self.model, usage=None,
            )
        self._source = "estimated"
        self._awaiting_summary = None

    def _keep(self, item: ContextItem, *, front: bool) -> None:
        """Add an item to the view; a compaction summary goes before everything after the pivot."""
        if front:
            self.items.insert(self._front, item)
            self._wire.restart(self.items)
        else:
            self.items.append(item)
        self._count(item)

    def _count(self, item: ContextItem, sign: int = 1) -> None:
        for name, tokens in item.components.items():
            self.totals[name] = self.totals.get(name, 0) + sign * tokens

    def seed(
        self,
        items: Iterable[ContextItem],
        *,
        compactions: Iterable[CompactionRecord] = (),
        excluded: Mapping[str, str] | None = None,
        requests: Iterable[RequestEstimate] = (),
        cache_hit_rate: float | None = None,
    ) -> ViewBuilder:
        """Start from message items already projected (a compaction checkpoint, or a compaction's
        preview) instead of replaying the history behind them.

        This is the state a replay reaches right after a compaction summary: the items as they
        were counted, and an estimate restarted from them alone. Messages added afterwards
        continue exactly as in a full replay.
        """
        for item in items:
            self._keep(item, front=False)
        self.compactions.extend(compactions)
        self.excluded.update(excluded or {})
        self.estimator.resume(tuple(requests))
        self._last_usage_hit = cache_hit_rate
        self._restart_estimate()
        return self

    def replace_fixed(self, items: Iterable[ContextItem]) -> None:
        for item in self.fixed_items:
            self._count(item, -1)
        self.fixed_items = tuple(items)
        for item in self.fixed_items:
            self._count(item)
        self.estimator.fixed_tokens = sum(i.tokens for i in self.fixed_items)

    # --- reading ------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Changes whenever :attr:`items` stop being a prefix of what they were (a compaction, a summary moved
        first): while it stays, the view only grew, and what was read of it holds."""
        return self._wire.generation

    def estimate(self) -> int:
        """The live estimate of the next request's input tokens."""
        return self.estimator.estimate(self.model)

    def unattributed(self) -> int:
        return max(0, self.estimate() - sum(self.totals.values()))

    def source(self) -> EstimateSource:
        """``reported`` only while the context is what the API last reported on: steering since makes it
        ``calibrated`` (the report less what was steered, see :meth:`steered`)."""
        if self._source == "reported" and self.steered():
            return "calibrated"
        return self._source

    def steered(self) -> int:
        """Tokens steering took out of (negative: put back into) what the latest report counted."""
        return self.estimator.steered(self.model)

    @property
    def cache_hit_rate(self) -> float | None:
        return self._last_usage_hit

    def freeze(self) -> ContextView:
        items = [*self.fixed_items, *self.items]
        unattributed = self.unattributed()
        if unattributed:
            items.append(
                ContextItem(kind="unattributed", tokens=unattributed, components={"unattributed": unattributed})
            )
        return ContextView(
            session_id=self.session_id,
            model=self.model,
            items=tuple(items),
            estimate_source=self.source(),
            requests=tuple(self.estimator.requests),
            compactions=tuple(self.compactions),
            excluded=dict(self.excluded),
            cache_hit_rate=self._last_usage_hit,
            wire_source=self._wire.source(len(self.items)),
        )

    # --- overlay ------------------------------------------------------------

    def _overlay_changes(self, message: Message, parts: tuple[Part, ...], shown: int) -> list[Change]:
        """What the overlay took out of this message (``shown``: its calibrated tokens now), one change per
        time it was changed: a request made between two changes counted the first and not the second.

        The calibrated changes add up to the item's own change, so the budget moves by what the item shows."""
        by_time: dict[datetime | None, int] = {}
        for position, (original, now) in enumerate(zip(message.parts, parts, strict=True)):
            if original is not now:
                when = self.overlay.change_time(message.id, position)
                by_time[when] = by_time.get(when, 0) + self.counter.count_part(now) - self.counter.count_part(original)
        left = shown - sum(self._calibrated(*self._raw_components(message.role, tuple(message.parts))).values())
        ratio = self.calibrator.for_model(self.model).coefficients()[0]
        times = sorted(by_time, key=lambda t: (t is None, t or datetime.min))  # oldest first; live ones last
        changes: list[Change] = []
        for n, when in enumerate(times):  # older changes keep their figure whatever came after; the newest takes the rest
            tokens = left if n == len(times) - 1 else round(ratio * by_time[when])
            left -= tokens
            changes.append((by_time[when], tokens, when))
        return changes


def project(
    session_id: str,
    messages: Iterable[Message],
    overlay: OverlayState,
    counter: TokenCounter,
    calibrator: Calibrator | None = None,
    model: str | None = None,
    fixed_items: Iterable[ContextItem] = (),
) -> ContextView:
    """The exact context of the next request, as a frozen view."""
    builder = ViewBuilder(session_id, overlay, counter, calibrator, model, fixed_items)
    return builder.add_all(messages).freeze()
