"""Routing-quality metrics: from per-request timings and per-engine load to one result row.

Pure: the replayer (online, over HTTP) and the offline driver (virtual time) both produce
``RequestResult`` and ``LoadSample`` lists, and this module turns them into the row
``results.json`` carries, so the two modes are measured by exactly the same code.

All times are simulated seconds (the online replayer divides wall time by the speedup).

Definitions:

- ``ttft_*``: request sent to first generated token; ``itl_p99_s``: p99 over every gap
  between consecutive tokens of every successful request; ``e2e_*``: sent to last token.
- ``throughput_rps``/``output_tokens_per_s``: successful requests (their output tokens)
  divided by the span from the first arrival to the last completion.
- ``prefix_hit_rate``: prompt tokens found in the engines' prefix caches over prompt
  tokens looked up, fleet-wide, from the engines' own cumulative counters.
- ``load_cov``: coefficient of variation (std / mean) across engines of each engine's
  time-averaged load, load being running + waiting requests sampled on a fixed grid.
  0 is a perfectly even spread; a fleet where one engine holds everything scores
  ``sqrt(N - 1)``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

METRIC_KEYS: Final = (
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p99_s",
    "e2e_p99_s",
    "throughput_rps",
    "output_tokens_per_s",
    "prefix_hit_rate",
    "load_cov",
    "errors",
)


@dataclass(slots=True)
class RequestResult:
    """What one replayed request saw."""

    index: int
    arrival_s: float
    """Scheduled send time, from the start of the replay."""
    ttft_s: float | None = None
    e2e_s: float | None = None
    itls_s: array[float] = field(default_factory=lambda: array("d"))
    output_tokens: int = 0
    error: str | None = None
    engine: str | None = None
    """Which engine served it, when the replayer can tell."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.ttft_s is not None and self.e2e_s is not None


@dataclass(frozen=True, slots=True)
class LoadSample:
    """One engine's state at ``t_s`` (simulated seconds from the start of the replay)."""

    t_s: float
    engine: str
    running: int
    waiting: int
    prefix_queries_total: int | None = None
    prefix_hits_total: int | None = None


def quantile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated quantile (numpy's default method); None when empty."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def prefix_hit_rate(samples: Iterable[LoadSample]) -> float | None:
    """Fleet-wide hits / queries over the samples' window (counter deltas per engine)."""
    first: dict[str, LoadSample] = {}
    last: dict[str, LoadSample] = {}
    for s in samples:
        if s.prefix_queries_total is None or s.prefix_hits_total is None:
            continue
        first.setdefault(s.engine, s)
        if s.t_s >= last.get(s.engine, s).t_s:
            last[s.engine] = s
    queries = hits = 0
    for engine, a in first.items():
        b = last[engine]
        assert a.prefix_queries_total is not None and b.prefix_queries_total is not None
        assert a.prefix_hits_total is not None and b.prefix_hits_total is not None
        queries += max(0, b.prefix_queries_total - a.prefix_queries_total)
        hits += max(0, b.prefix_hits_total - a.prefix_hits_total)
    return hits / queries if queries else None


def load_grid(
    samples: Sequence[LoadSample], *, step_s: float, end_s: float | None = None
) -> tuple[list[float], dict[str, list[int]]]:
    """Each engine's load (running + waiting) held from its last sample, on a fixed grid."""
    engines = sorted({s.engine for s in samples})
    if not samples:
        return [], {}
    ordered = sorted(samples, key=lambda s: s.t_s)
    end = ordered[-1].t_s if end_s is None else end_s
    steps = max(1, int(end / step_s) + 1)
    times = [i * step_s for i in range(steps)]
    current = dict.fromkeys(engines, 0)
    grid: dict[str, list[int]] = {e: [] for e in engines}
    i = 0
    for t in times:
        while i < len(ordered) and ordered[i].t_s <= t:
            s = ordered[i]
            current[s.engine] = s.running + s.waiting
            i += 1
        for e in engines:
            grid[e].append(current[e])
    return times, grid


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """std / mean (population std); None for no values, 0 for an all-zero list."""
    if not values:
        return None
    mean = sum(values) / len(values)
    if mean == 0:
        return 0.0
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return math.sqrt(var) / mean


def load_cov(samples: Sequence[LoadSample], *, step_s: float = 1.0) -> float | None:
    """CV across engines of time-averaged load (see the module docstring)."""
    _, grid = load_grid(samples, step_s=step_s)
    if len(grid) < 2:
        return 0.0 if grid else None
    means = [sum(v) / len(v) for v in grid.values()]
    return coefficient_of_variation(means)


def summarize(
    results: Sequence[RequestResult],
    samples: Sequence[LoadSample] = (),
    *,
    load_step_s: float = 1.0,
) -> dict[str, Any]:
    """The metric fields of one ``results.json`` row (``METRIC_KEYS``)."""
    ok = [r for r in results if r.ok]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    e2es = [r.e2e_s for r in ok if r.e2e_s is not None]
    itls: list[float] = []
    for r in ok:
        itls.extend(r.itls_s)
    if ok:
        start = min(r.arrival_s for r in results)
        end = max(r.arrival_s + (r.e2e_s or 0.0) for r in ok)
        span = max(end - start, 1e-9)
        throughput = len(ok) / span
        tokens_per_s = sum(r.output_tokens for r in ok) / span
    else:
        throughput = tokens_per_s = 0.0
    return {
        "ttft_p50_s": _round(quantile(ttfts, 0.50)),
        "ttft_p99_s": _round(quantile(ttfts, 0.99)),
        "itl_p99_s": _round(quantile(itls, 0.99)),
        "e2e_p99_s": _round(quantile(e2es, 0.99)),
        "throughput_rps": _round(throughput),
        "output_tokens_per_s": _round(tokens_per_s),
        "prefix_hit_rate": _round(prefix_hit_rate(samples)),
        "load_cov": _round(load_cov(samples, step_s=load_step_s)),
        "errors": len(results) - len(ok),
        "requests": len(results),
    }


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def error_kinds(results: Iterable[RequestResult]) -> dict[str, int]:
    """How many requests failed, by the first word of their error (for the report)."""
    out: dict[str, int] = {}
    for r in results:
        if r.error is not None:
            kind = r.error.split(":", 1)[0][:60]
            out[kind] = out.get(kind, 0) + 1
    return out
