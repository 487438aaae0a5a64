"""Projection: what the next model request will contain, item by item, with tokens, and its estimate.

``project(messages, overlay, ...)`` is pure. It is built on :class:`ViewBuilder`, which takes messages one
at a time, so a live session can append a message in O(that message) and still get exactly what a full
``project`` would give. The builder is the composition of the :class:`Projector` (the items, what is left
out, the pivots, and each message's record) and the :class:`Estimator` fed those records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableSequence
from dataclasses import asdict
from typing import Any

from workbench.engine.context.calibration import Calibrator, ModelCalibration
from workbench.engine.context.effective import (  # re-exported: placeholders are part of the projection's contract
    KEPT_INPUT_KEYS,
    PRUNED_INPUT_PLACEHOLDER,
    PRUNED_PLACEHOLDER,
    offload_reference,
    preview_text,
    pruned_input,
    pruned_part,
)
from workbench.engine.context.estimation import Estimator
from workbench.engine.context.projector import Projector, estimate_key
from workbench.engine.context.records import SUMMARISER, MessageRecord, PivotRecord, Restart
from workbench.engine.context.request_log import RequestEstimate
from workbench.engine.context.view import (  # re-exported: the view is the projection's result
    CompactionRecord,
    ContextItem,
    ContextView,
    EstimateSource,
    component_of,
)
from workbench.engine.transcript.models import Message
from workbench.engine.transcript.overlay import OverlayState
from workbench.engine.transcript.tokens import TokenCounter

__all__ = [
    "KEPT_INPUT_KEYS",
    "PRUNED_INPUT_PLACEHOLDER",
    "PRUNED_PLACEHOLDER",
    "SUMMARISER",
    "CompactionRecord",
    "ContextItem",
    "ContextView",
    "RequestEstimate",
    "ViewBuilder",
    "component_of",
    "estimate_key",
    "offload_reference",
    "preview_text",
    "project",
    "pruned_input",
    "pruned_part",
]


class ViewBuilder:
    """Accumulates the view one message at a time; :meth:`freeze` freezes it.

    The projector reads each message; the estimator takes its record before the projector counts the item,
    since the calibration both share may learn from that message's usage."""

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
        self.calibrator = calibrator.copy() if calibrator else Calibrator()
        self.projector = Projector(overlay, counter, self.calibrator, model, fixed_items)
        self.estimator = Estimator(self.calibrator, sum(i.tokens for i in self.projector.fixed_items))
        self.compactions: list[CompactionRecord] = []
        self._last_usage_hit: float | None = None
        self._source: EstimateSource = "estimated"
        self._scripted = False
        """The usage the figure builds on was counted by a scripted provider (the offline demo), not an API."""

    # --- adding -------------------------------------------------------------

    def add_all(self, messages: Iterable[Message]) -> ViewBuilder:
        for message in messages:
            self.add(message)
        return self

    def add(self, message: Message) -> None:
        step = self.projector.read(message)
        if step.pivot is not None:
            self._pivot(step.pivot)
        if step.restart is not None:
            self._restart(step.restart)
        if step.record is not None:
            self._take(step.record)
        restart = self.projector.count(step)
        if restart is not None:
            self._restart(restart)

    def _pivot(self, pivot: PivotRecord) -> None:
        self.compactions.append(
            CompactionRecord(
                message_id=pivot.message_id,
                trigger=pivot.trigger,
                reported_pre_tokens=pivot.reported_pre_tokens,
                estimated_pre_tokens=self.estimator.estimate(pivot.model),
            )
        )

    def _take(self, record: MessageRecord) -> None:
        self.estimator.take(record)
        if record.reported and record.usage is not None:
            self._last_usage_hit = record.usage.cache_hit_rate
            self._source = "reported"
            self._scripted = record.usage.synthetic
        elif not record.left and self.estimator.anchored:
            self._source = "calibrated"

    def _restart(self, restart: Restart) -> None:
        self.estimator.restart(restart)
        self._source = "estimated"

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
        restart = self.projector.seed(items, excluded)
        self.compactions.extend(compactions)
        self.estimator.resume(tuple(requests))
        self._last_usage_hit = cache_hit_rate
        self._restart(restart)
        return self

    def replace_fixed(self, items: Iterable[ContextItem]) -> None:
        self.projector.replace_fixed(items)
        self.estimator.fixed_tokens = sum(i.tokens for i in self.projector.fixed_items)

    # --- a stored state ----------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What a replay left here, as JSON-ready data, but the items, exclusions and requests (the caller
        stores those compactly): the projector's state, the estimator's, the calibration they share, and the
        builder's own. :meth:`restore` continues from it exactly where the replay stopped."""
        return {
            "projector": self.projector.state(),
            "estimator": self.estimator.state(),
            "calibration": {key: asdict(model) for key, model in self.calibrator.models.items()},
            "compactions": [[c.message_id, c.trigger, c.reported_pre_tokens, c.estimated_pre_tokens]
                            for c in self.compactions],
            "last_usage_hit": self._last_usage_hit,
            "source": self._source,
            "scripted": self._scripted,
        }

    def restore(
        self,
        state: Mapping[str, Any],
        items: MutableSequence[ContextItem],
        excluded: dict[str, str],
        requests: Iterable[RequestEstimate],
    ) -> None:
        """Continue from :meth:`state` (of a builder of the same session, overlay and fixed items, before any
        message was added here) and the items, exclusions and requests it had."""
        self.calibrator.models.clear()
        self.calibrator.models.update(
            {key: ModelCalibration(**fields) for key, fields in state["calibration"].items()}
        )
        self.projector.restore(state["projector"], items, excluded)
        self.estimator.restore(state["estimator"], requests)
        self.compactions = [CompactionRecord(*record) for record in state["compactions"]]
        self._last_usage_hit = state["last_usage_hit"]
        self._source = state["source"]
        self._scripted = bool(state.get("scripted", False))  # (a state stored before it was kept: not scripted)

    # --- reading ------------------------------------------------------------

    @property
    def items(self) -> MutableSequence[ContextItem]:
        """The message items of the view (a compaction replaces the list: read it anew)."""
        return self.projector.items

    @property
    def totals(self) -> dict[str, int]:
        return self.projector.totals

    @property
    def excluded(self) -> dict[str, str]:
        return self.projector.excluded

    @property
    def fixed_items(self) -> tuple[ContextItem, ...]:
        return self.projector.fixed_items

    @property
    def model(self) -> str | None:
        return self.projector.model

    @property
    def generation(self) -> int:
        """Changes whenever :attr:`items` stop being a prefix of what they were (a compaction, a summary moved
        first): while it stays, the view only grew, and what was read of it holds."""
        return self.projector.generation

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

    @property
    def scripted(self) -> bool:
        """Whether the usage the figure builds on came from a scripted provider (no API reported it)."""
        return self._scripted

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
            wire_source=self.projector.wire_source(),
        )


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
