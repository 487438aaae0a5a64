"""The live estimate of the next request's input tokens.

Anchored on the last reported input total of the same model since the last
compaction, plus the response to it, plus the calibrated estimate of what was
added since. Without an anchor: the calibrated estimate of the whole view
plus the learned unseen overhead (system prompt and tools a transcript does
not show).

Thinking follows the API's rule: thinking blocks stay in context during a
tool-use loop and are dropped once a new user prompt starts a new turn,
except on models that keep earlier thinking (Opus 4.5 and later).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workbench.engine.calibration import Calibrator, ModelCalibration
from workbench.engine.limits import keeps_thinking
from workbench.engine.models import Usage


PARTIAL_OUTPUT_SHARE = 0.5
"""Reported output below this share of the transcript's raw count is taken as a partial report."""


@dataclass
class _Anchor:
    input_total: int
    output: int
    adjust: int = 0
    """Tokens known to have left the context since the anchor (stripped thinking)."""
    pending_raw: int = 0
    pending_blocks: int = 0
    at: datetime | None = None
    """When the anchoring response was written."""
    seq: int = 0
    """How many context changes had been seen when it was set."""

    def base(self) -> int:
        return self.input_total + self.output + self.adjust


@dataclass(frozen=True, slots=True)
class RequestEstimate:
    """One API request: what was reported, and what the engine estimated just before it."""

    message_id: str
    model: str | None
    reported_input_tokens: int
    estimated_input_tokens: int
    anchor_input_tokens: int | None


class Estimator:
    def __init__(self, calibrator: Calibrator, fixed_tokens: int = 0) -> None:
        self.calibrator = calibrator
        self.fixed_tokens = fixed_tokens
        self.requests: list[RequestEstimate] = []
        self.reset()

    def reset(self) -> None:
        """A compaction: nothing before it is in context any more."""
        self._anchors: dict[str | None, _Anchor] = {}
        self._raw = 0
        self._blocks = 0
        self._loop_thinking = 0
        self._changes: list[tuple[int, datetime | None]] = []
        """(raw token change, when) for messages whose content the overlay replaced."""

    def _overlay_adjust(self, anchor: _Anchor, cal: ModelCalibration) -> float:
        """What changed since the anchor's request in messages it had already counted."""
        raw = sum(
            delta for delta, when in self._changes[: anchor.seq]
            if when is None or anchor.at is None or when > anchor.at
        )
        return cal.calibrate(raw, 0) if raw else 0.0

    @property
    def anchored(self) -> bool:
        return bool(self._anchors)

    def estimate(self, model: str | None) -> int:
        cal = self.calibrator.for_model(model)
        anchor = self._anchors.get(model)
        if anchor is not None:
            return round(
                anchor.base() + self._overlay_adjust(anchor, cal) + cal.calibrate(anchor.pending_raw, anchor.pending_blocks)
            )
        unseen = cal.unseen_overhead or 0.0
        return round(self.fixed_tokens + cal.calibrate(self._raw, self._blocks) + unseen)

    def request(self, message_id: str, model: str | None, usage: Usage) -> None:
        """A response arrived: score the estimate made before it, then learn from it."""
        reported = usage.total_input
        cal = self.calibrator.for_model(model)
        anchor = self._anchors.get(model)
        self.requests.append(
            RequestEstimate(
                message_id=message_id,
                model=model,
                reported_input_tokens=reported,
                estimated_input_tokens=self.estimate(model),
                anchor_input_tokens=anchor.input_total if anchor else None,
            )
        )
        if anchor is not None:
            growth = reported - anchor.base() - self._overlay_adjust(anchor, cal)
            cal.observe_growth(anchor.pending_raw, anchor.pending_blocks, round(growth))
        else:
            cal.observe_unseen(reported - self.fixed_tokens - cal.calibrate(self._raw, self._blocks))

    def add(
        self,
        *,
        raw: int,
        blocks: int,
        visible_raw: int,
        visible_blocks: int,
        has_thinking: bool,
        new_turn: bool,
        model: str | None,
        usage: Usage | None,
        at: datetime | None = None,
        overlay_delta: int = 0,
        changed_at: datetime | None = None,
    ) -> None:
        """A message joined the context; ``visible_*`` leave out its thinking.

        ``overlay_delta`` is how many raw tokens the overlay removed from (or added to)
        the message as originally sent; responses reported before ``changed_at`` counted
        the original.
        """
        if overlay_delta:
            self._changes.append((overlay_delta, changed_at))
        if new_turn and self._loop_thinking:
            for anchor in self._anchors.values():
                anchor.adjust -= self._loop_thinking
            self._loop_thinking = 0
        for anchor in self._anchors.values():
            anchor.pending_raw += raw
            anchor.pending_blocks += blocks
        self._raw += raw
        self._blocks += blocks
        if usage is None or usage.total_input <= 0:
            return
        cal = self.calibrator.for_model(model)
        # The response joins the next request as reported, unless the report is clearly
        # partial (Claude Code sometimes keeps a usage line written mid-stream).
        output = usage.output_tokens
        if output < PARTIAL_OUTPUT_SHARE * raw:
            output = round(cal.calibrate(raw, blocks))
        if has_thinking and not keeps_thinking(model):
            visible = round(cal.calibrate(visible_raw, visible_blocks))
            self._loop_thinking += max(0, output - visible)
        self._anchors[model] = _Anchor(input_total=usage.total_input, output=output, at=at, seq=len(self._changes))
