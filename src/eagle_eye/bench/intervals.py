"""Means with 95% confidence intervals, for benchmarks that repeat a measurement.

Student's t, so a handful of repeats gives an honest interval; the critical values are a
table (no SciPy in the benchmark's dependencies).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

_T_975: Final = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
"""Two-sided 95% critical values of Student's t for 1..30 degrees of freedom."""
_Z_975: Final = 1.960


def t_critical_95(degrees_of_freedom: int) -> float:
    """The 0.975 quantile of Student's t (the normal one beyond 30 degrees of freedom)."""
    if degrees_of_freedom < 1:
        raise ValueError("an interval needs at least two values")
    if degrees_of_freedom <= len(_T_975):
        return _T_975[degrees_of_freedom - 1]
    return _Z_975


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean and its 95% confidence interval."""

    mean: float
    low: float
    high: float
    n: int

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def as_dict(self, digits: int = 4) -> dict[str, float | int]:
        return {
            "mean": round(self.mean, digits),
            "ci95_low": round(self.low, digits),
            "ci95_high": round(self.high, digits),
            "n": self.n,
        }


def mean_ci95(values: Sequence[float]) -> Interval:
    """Mean of ``values`` with a t-based 95% interval (needs two or more values)."""
    n = len(values)
    mean = statistics.fmean(values)
    half = t_critical_95(n - 1) * statistics.stdev(values) / math.sqrt(n)
    return Interval(mean=mean, low=mean - half, high=mean + half, n=n)
