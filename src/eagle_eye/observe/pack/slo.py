"""Latency SLOs and the multi-window, multi-burn-rate alerting parameters.

The thresholds must be histogram bucket boundaries present in every engine's buckets:
1 s is one for TTFT in vLLM (… 0.75 1 2.5 …) and SGLang (… 0.8 1 2 …), 0.2 s for ITL in
both. Windows and burn rates follow the Google SRE workbook: page when 2 % of a 30-day
budget burns in an hour (14.4x over 1 h and 5 m), open a ticket when 5 % burns in six hours
(6x over 6 h and 30 m).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from eagle_eye.observe.pack.sources import SIGNALS_BY_NAME, Signal


@dataclass(frozen=True, slots=True)
class Slo:
    name: str
    signal: Signal
    threshold_s: float
    objective: float
    """Fraction of requests that must be at or under ``threshold_s``."""

    @property
    def error_budget(self) -> float:
        return round(1.0 - self.objective, 6)


@dataclass(frozen=True, slots=True)
class BurnWindow:
    long: str
    short: str
    burn_rate: float
    for_: str
    severity: str


SLOS: Final = (
    Slo("ttft", SIGNALS_BY_NAME["ttft_seconds"], threshold_s=1.0, objective=0.95),
    Slo("itl", SIGNALS_BY_NAME["itl_seconds"], threshold_s=0.2, objective=0.99),
)
BURN_WINDOWS: Final = (
    BurnWindow("1h", "5m", 14.4, "2m", "critical"),
    BurnWindow("6h", "30m", 6.0, "15m", "warning"),
)
SLO_WINDOWS: Final = ("5m", "30m", "1h", "6h")
