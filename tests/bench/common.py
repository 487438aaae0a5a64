"""What every benchmark shares: where things are, how a result is reported, small statistics."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures"


@dataclass(frozen=True)
class SummaryRow:
    """One line of the final table. ``passed`` is None for a figure that has no target."""

    name: str
    measured: str
    target: str
    baseline: str
    passed: bool | None


@dataclass
class BenchResult:
    name: str
    rows: list[SummaryRow] = field(default_factory=list)
    skipped: str | None = None
    """Why the benchmark did not run (missing fixtures); a skip is not a failure."""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(row.passed is False for row in self.rows)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), ``q`` in [0, 100]."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def pct(value: float, digits: int = 2) -> str:
    return "–" if math.isnan(value) else f"{100.0 * value:.{digits}f}%"


def ms(seconds: float) -> str:
    value = seconds * 1000.0
    if value >= 1000:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.3f} ms"
