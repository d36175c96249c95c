"""What the router tells the dashboard about its own traffic, and the maths on it (pure).

The fleet's state comes from NATS snapshots; what only the router knows (latency as
clients see it, errors, retries) comes through one small seam, ``RouterStatsSource``:
anything with a ``router_stats()`` method returning a ``RouterStats``. Everything in a
``RouterStats`` is cumulative since the router started, like Prometheus counters, so any
number of readers can sample it at their own pace without resetting anything, and a missed
sample loses nothing: the dashboard takes differences between two samples to get rates and
windowed percentiles.

The router can implement the protocol itself or use ``RouterStatsRecorder``, which keeps
the counters and histograms for it (``observe_*`` calls are O(log buckets), no locks:
call them from the event loop that serves requests).

Routing decisions per instance are not in here: they are already counted by the
``FleetView`` (``Target.decisions_total``) that the dashboard reads directly.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol


def _geometric_bounds(start_s: float, stop_s: float, factor: float) -> tuple[float, ...]:
    bounds = []
    value = start_s
    while value < stop_s * factor:
        bounds.append(round(value, 6))
        value *= factor
    return tuple(bounds)


DEFAULT_LATENCY_BOUNDS_S: Final = _geometric_bounds(0.001, 300.0, 1.25)
"""Upper bucket bounds from 1 ms to about 300 s, 25 % apart: a percentile read from them is
within about 12 % of the true value, fine-grained enough for a live view."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyHistogram:
    """A cumulative histogram: ``counts[i]`` observations fell at or below ``bounds_s[i]``
    and above the previous bound; the last count is the overflow bucket (above every bound).
    """

    bounds_s: tuple[float, ...] = DEFAULT_LATENCY_BOUNDS_S
    """Ascending upper bounds, seconds."""
    counts: tuple[int, ...] = (0,) * (len(DEFAULT_LATENCY_BOUNDS_S) + 1)
    """Per-bucket counts (not summed across buckets), ``len(bounds_s) + 1`` of them."""
    sum_s: float = 0.0
    """Sum of every observation, seconds."""

    @property
    def count(self) -> int:
        return sum(self.counts)

    def minus(self, earlier: LatencyHistogram) -> LatencyHistogram:
        """The observations made since ``earlier`` (same bounds; a reset counts from zero)."""
        if earlier.bounds_s != self.bounds_s or any(
            a < b for a, b in zip(self.counts, earlier.counts, strict=True)
        ):
            return self
        return LatencyHistogram(
            bounds_s=self.bounds_s,
            counts=tuple(a - b for a, b in zip(self.counts, earlier.counts, strict=True)),
            sum_s=max(0.0, self.sum_s - earlier.sum_s),
        )

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0-1), interpolated linearly inside its bucket as Prometheus'
        ``histogram_quantile`` does; None when empty. The overflow bucket answers with the
        largest bound."""
        total = self.count
        if total == 0:
            return None
        rank = q * total
        seen = 0
        for i, n in enumerate(self.counts):
            if n and seen + n >= rank:
                if i >= len(self.bounds_s):
                    return self.bounds_s[-1] if self.bounds_s else None
                lower = self.bounds_s[i - 1] if i > 0 else 0.0
                upper = self.bounds_s[i]
                return lower + (upper - lower) * max(0.0, rank - seen) / n
            seen += n
        return self.bounds_s[-1] if self.bounds_s else None


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterStats:
    """The router's own counters, cumulative since it started."""

    policy: str = ""
    """The default routing policy's name, shown in the header."""
    requests_total: int = 0
    """Client requests received (any outcome)."""
    errors_total: Mapping[str, int] = field(default_factory=dict)
    """Requests that failed, by kind (``upstream_connect``, ``upstream_5xx``,
    ``no_instance``, ``bad_request``, ``timeout``, ...: the router chooses the words)."""
    retries_total: int = 0
    """Upstream attempts repeated on another instance."""
    ttft_s: LatencyHistogram = field(default_factory=LatencyHistogram)
    """Time to first token as the client sees it."""
    tpot_s: LatencyHistogram = field(default_factory=LatencyHistogram)
    """Time per output token after the first (streamed requests)."""
    duration_s: LatencyHistogram = field(default_factory=LatencyHistogram)
    """Whole request duration."""


class RouterStatsSource(Protocol):
    """What the dashboard needs from a router: one call, cheap, never raising."""

    def router_stats(self) -> RouterStats: ...


class _MutableHistogram:
    __slots__ = ("bounds_s", "counts", "sum_s")

    def __init__(self, bounds_s: tuple[float, ...]) -> None:
        self.bounds_s = bounds_s
        self.counts = [0] * (len(bounds_s) + 1)
        self.sum_s = 0.0

    def observe(self, value_s: float) -> None:
        if not math.isfinite(value_s) or value_s < 0:
            return
        self.counts[bisect.bisect_left(self.bounds_s, value_s)] += 1
        self.sum_s += value_s

    def frozen(self) -> LatencyHistogram:
        return LatencyHistogram(bounds_s=self.bounds_s, counts=tuple(self.counts), sum_s=self.sum_s)


class RouterStatsRecorder:
    """A ready-made ``RouterStatsSource``: the router calls ``observe_*`` as requests go."""

    def __init__(
        self, *, policy: str = "", bounds_s: tuple[float, ...] = DEFAULT_LATENCY_BOUNDS_S
    ) -> None:
        self.policy = policy
        self.requests_total = 0
        self.retries_total = 0
        self.errors_total: dict[str, int] = {}
        self._ttft = _MutableHistogram(bounds_s)
        self._tpot = _MutableHistogram(bounds_s)
        self._duration = _MutableHistogram(bounds_s)

    def observe_request(self) -> None:
        self.requests_total += 1

    def observe_error(self, kind: str) -> None:
        self.errors_total[kind] = self.errors_total.get(kind, 0) + 1

    def observe_retry(self) -> None:
        self.retries_total += 1

    def observe_ttft(self, seconds: float) -> None:
        self._ttft.observe(seconds)

    def observe_tpot(self, seconds: float) -> None:
        self._tpot.observe(seconds)

    def observe_duration(self, seconds: float) -> None:
        self._duration.observe(seconds)

    def router_stats(self) -> RouterStats:
        return RouterStats(
            policy=self.policy,
            requests_total=self.requests_total,
            errors_total=dict(self.errors_total),
            retries_total=self.retries_total,
            ttft_s=self._ttft.frozen(),
            tpot_s=self._tpot.frozen(),
            duration_s=self._duration.frozen(),
        )
