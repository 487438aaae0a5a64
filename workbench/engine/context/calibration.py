"""Online calibration of raw tiktoken counts against the token counts the API reports.

Claude's tokenizer is not public, so a raw count is biased by content type and
by framing the transcript does not show. Each time a request's usage is known,
the growth of the context since the previous request is compared with the raw
count of what was added, and a small ridge regression learns

    reported growth ≈ ratio × raw tokens + overhead × blocks

per model. The prior (ratio 1.1, no extra per-block overhead) keeps the first
estimates sane before any usage has been seen; the constants below were tuned on
the real transcripts in the shared fixtures (see ``python -m tests.bench``).

A response whose reported output is partial is counted from what it wrote: the
same calibration plus what the model's whole responses carried per block beyond
it (the framing of tool calls: about 20 tokens a block more, on the fixtures).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

PRIOR_RATIO = 1.1
PRIOR_BLOCK_OVERHEAD = 0.0
RATIO_STIFFNESS = 2.0e7
"""How many squared raw tokens the prior on the ratio weighs (about one mid-size observation)."""
OVERHEAD_STIFFNESS = 100.0
OUTLIER_FACTOR = 2.0
"""Observations this many times off the current prediction are not learned from (injected reminders, stripped thinking)."""


@dataclass
class ModelCalibration:
    """Sufficient statistics of the regression for one model."""

    sxx: float = 0.0
    sxn: float = 0.0
    snn: float = 0.0
    sxy: float = 0.0
    sny: float = 0.0
    observations: int = 0
    unseen_overhead: float | None = None
    """Tokens a request carries that no transcript shows (system prompt, tools)."""
    response_excess: float = 0.0
    """Over the model's whole responses: reported output less the calibrated count of what they wrote."""
    response_blocks: int = 0
    """Their blocks: ``response_excess`` per block is what a response's block carries beyond its content."""

    def coefficients(self) -> tuple[float, float]:
        a11 = self.sxx + RATIO_STIFFNESS
        a12 = self.sxn
        a22 = self.snn + OVERHEAD_STIFFNESS
        b1 = self.sxy + RATIO_STIFFNESS * PRIOR_RATIO
        b2 = self.sny + OVERHEAD_STIFFNESS * PRIOR_BLOCK_OVERHEAD
        det = a11 * a22 - a12 * a12
        ratio = (b1 * a22 - b2 * a12) / det
        overhead = (a11 * b2 - a12 * b1) / det
        return max(ratio, 0.5), max(overhead, 0.0)

    def calibrate(self, raw: int, blocks: int) -> float:
        ratio, overhead = self.coefficients()
        return ratio * raw + overhead * blocks

    def components(self, raw_by_component: Mapping[str, int], blocks: int) -> dict[str, int]:
        """A message's tokens by component as the view shows them: each raw count calibrated, the blocks'
        overhead shared evenly; the estimator counts an overlay change in the same figures."""
        ratio, overhead = self.coefficients()
        share = overhead * blocks / (len(raw_by_component) or 1)
        return {name: round(ratio * raw + share) for name, raw in raw_by_component.items()}

    def observe_growth(self, raw: int, blocks: int, reported: int) -> None:
        if raw <= 0 and blocks <= 0:
            return
        predicted = self.calibrate(raw, blocks)
        if reported <= 0 or reported > OUTLIER_FACTOR * predicted + 200 or reported * OUTLIER_FACTOR < predicted - 200:
            return
        self.sxx += raw * raw
        self.sxn += raw * blocks
        self.snn += blocks * blocks
        self.sxy += raw * reported
        self.sny += blocks * reported
        self.observations += 1

    def observe_response(self, raw: int, blocks: int, output: int) -> None:
        """A response its transcript says was reported whole: what the model wrote joins the next request as
        its output counted, the framing of its tool calls included, which the growth (mostly tool results)
        does not teach. The caller leaves out responses with thinking: their count is the whole thinking,
        which a transcript may show only summarised."""
        self.response_excess += output - self.calibrate(raw, blocks)
        self.response_blocks += blocks

    def response(self, raw: int, blocks: int) -> float:
        """A response of ``raw`` tokens in ``blocks`` blocks as the next request counts it, when its reported
        output is partial: calibrated, plus the excess per block its model's whole responses showed."""
        excess = self.response_excess / self.response_blocks if self.response_blocks else 0.0
        return self.calibrate(raw, blocks) + excess * blocks

    def relearn_unseen(self, overhead: float) -> None:
        """Replace, not smooth: the overhead changes with the context a pivot left and with the model's
        own system prompt and tools, and the latest measure describes the next request best."""
        self.unseen_overhead = max(0.0, overhead)


@dataclass
class Calibrator:
    """Calibration per model; copy it before learning if the original must stay as it was."""

    models: dict[str, ModelCalibration] = field(default_factory=dict)

    def for_model(self, model: str | None) -> ModelCalibration:
        key = model or "unknown"
        if key not in self.models:
            self.models[key] = ModelCalibration()
        return self.models[key]

    def copy(self) -> Calibrator:
        return copy.deepcopy(self)
