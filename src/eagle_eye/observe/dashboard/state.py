"""The dashboard's model of the fleet: rows, totals, rates and a rolling history (pure).

``DashboardState.sample(now_mono_s, now_wall_s)`` is called on a fixed tick (a few times a
second). Each call reads the ``FleetView`` (the newest snapshot of every engine rank and
the router's own per-target counters) and, when there is one, the router's
``RouterStatsSource``; it returns a ``Frame`` (what the table shows now) and appends one
point to every chart series. Rates and percentiles are differences between the current
sample and the one ``rate_window_s`` / ``latency_window_s`` earlier, so the tick rate does
not change what a number means.

No I/O, no clocks: the web app and ``top`` own the timer and pass the time in, which is
what makes every number here unit-testable. The frame's record types are in ``frame.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from eagle_eye.fleet.stats import LatencyHistogram, RouterStats, RouterStatsSource
from eagle_eye.fleet.target import Target
from eagle_eye.fleet.view import FleetView, InstanceInfo
from eagle_eye.observe.dashboard.frame import FleetTotals, Frame, InstanceRow, RouterRow
from eagle_eye.settings import DEFAULT_STALE_AFTER_S
from eagle_eye.snapshot import EngineState

INSTANCE_SERIES: Final = ("running", "waiting", "kv_usage", "decisions_per_s", "tokens_per_s")
"""Per-instance chart series (history keys ``<series>@<instance key>``)."""
FLEET_SERIES: Final = (
    "running",
    "waiting",
    "kv_usage",
    "tokens_per_s",
    "decisions_per_s",
    "requests_per_s",
    "errors_per_s",
    "retries_per_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "duration_p50_s",
    "duration_p99_s",
)
"""Fleet-wide chart series (history keys ``fleet.<series>``)."""
MAX_CHART_INSTANCES: Final = 24
"""Per-instance chart lines are kept for this many ranks (the first by key): more lines
than that are unreadable on a chart and would make every tick cost more; the table and
the fleet series still cover every rank."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardConfig:
    """Timing of the live view. Defaults suit a laptop watching a fleet of tens."""

    tick_s: float = 0.25
    """How often a frame is computed and pushed (4 per second)."""
    history_s: float = 300.0
    """How much in-memory history the charts keep."""
    rate_window_s: float = 2.0
    """Rates (decisions, requests, errors, tokens) are averaged over this window."""
    latency_window_s: float = 10.0
    """Router latency percentiles cover the requests of this window."""
    stale_after_s: float = DEFAULT_STALE_AFTER_S
    """A row whose newest snapshot is older than this is marked stale."""

    @property
    def history_points(self) -> int:
        return max(2, round(self.history_s / self.tick_s))


_QUANTILES: Final = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass(slots=True)
class _Sample:
    mono_s: float
    decisions: dict[str, int]
    """Target URL -> decisions_total."""
    prefix: dict[str, tuple[int, int]]
    """Row key -> (queries_total, hits_total)."""
    router: RouterStats | None = None


class History:
    """Aligned columns for the charts: one timestamp column and one column per series,
    every column the same length (``None`` where a series had no value), oldest first."""

    def __init__(self, max_points: int) -> None:
        self.max_points = max_points
        self.t: deque[float] = deque(maxlen=max_points)
        self.series: dict[str, deque[float | None]] = {}
        self._empty_run: dict[str, int] = {}
        """Series -> how many of its newest values are None (dropped once all are)."""

    def append(self, t: float, point: dict[str, float | None]) -> None:
        length = len(self.t)
        self.t.append(t)
        for name in point.keys() - self.series.keys():
            column: deque[float | None] = deque([None] * length, maxlen=self.max_points)
            self.series[name] = column
            self._empty_run[name] = length
        gone = []
        for name, column in self.series.items():
            value = point.get(name)
            column.append(value)
            if value is None:
                run = self._empty_run[name] = self._empty_run[name] + 1
                if run >= self.max_points:
                    gone.append(name)
            else:
                self._empty_run[name] = 0
        for name in gone:
            del self.series[name]
            del self._empty_run[name]

    def to_json(self) -> dict[str, Any]:
        return {"t": list(self.t), "series": {k: list(v) for k, v in self.series.items()}}


class DashboardState:
    """Samples a ``FleetView`` (and optionally a router) into frames and history."""

    def __init__(
        self,
        fleet: FleetView,
        *,
        router: RouterStatsSource | None = None,
        config: DashboardConfig | None = None,
    ) -> None:
        self.fleet = fleet
        self.router = router
        self.config = config or DashboardConfig()
        self.history = History(self.config.history_points)
        keep = max(self.config.rate_window_s, self.config.latency_window_s)
        self._samples: deque[_Sample] = deque(maxlen=int(keep / self.config.tick_s) + 8)
        self.latest: Frame | None = None

    def sample(self, now_mono_s: float, now_wall_s: float) -> Frame:
        """Read the fleet now, record one history point and return the frame."""
        cfg = self.config
        infos = sorted(
            self.fleet.instances(now_mono_s),
            key=lambda i: (i.snapshot.instance_id, i.snapshot.dp_rank),
        )
        targets = {t.url: t for t in self.fleet.targets()}
        current = _Sample(
            mono_s=now_mono_s,
            decisions={url: t.decisions_total for url, t in targets.items()},
            prefix=_prefix_counters(infos),
            router=self._read_router(),
        )
        rate_base = self._sample_before(now_mono_s - cfg.rate_window_s)
        latency_base = self._sample_before(now_mono_s - cfg.latency_window_s)
        self._samples.append(current)

        decision_rates = {
            url: _rate(
                n, rate_base.decisions.get(url) if rate_base else None, rate_base, now_mono_s
            )
            for url, n in current.decisions.items()
        }
        rows = [self._row(info, targets, current, rate_base, decision_rates) for info in infos]
        totals = _totals(rows, decision_rates, (t.inflight for t in targets.values()))
        router_row = self._router_row(current, rate_base, latency_base, now_mono_s)
        point = _point(rows, totals, router_row)
        self.history.append(now_wall_s, point)
        frame = Frame(t=now_wall_s, instances=rows, fleet=totals, router=router_row, point=point)
        self.latest = frame
        return frame

    def _row(
        self,
        info: InstanceInfo,
        targets: dict[str, Target],
        current: _Sample,
        rate_base: _Sample | None,
        decision_rates: dict[str, float],
    ) -> InstanceRow:
        """One table row: the rank's snapshot plus what the router knows of its endpoint."""
        s = info.snapshot
        key = _row_key(s.instance_id, s.dp_rank)
        target = targets.get(info.endpoint) if info.endpoint else None
        return InstanceRow(
            key=key,
            instance_id=s.instance_id,
            dp_rank=s.dp_rank,
            model=s.model,
            engine=s.engine,
            state=s.state.value,
            endpoint=info.endpoint or s.endpoint,
            running=s.running,
            waiting=s.waiting,
            kv_usage=_round(s.kv_usage, 4),
            age_s=round(info.age_s, 3),
            stale=info.age_s > self.config.stale_after_s,
            tokens_per_s=_round(s.generation_tokens_per_s, 1),
            ttft_recent_s=_round(s.ttft_recent_s, 5),
            itl_recent_s=_round(s.itl_recent_s, 5),
            prefix_hit_rate=_hit_rate(
                current.prefix.get(key), rate_base.prefix.get(key) if rate_base else None
            ),
            preemptions_total=s.preemptions_total,
            decisions_per_s=decision_rates.get(info.endpoint or "", 0.0),
            inflight=target.inflight if target is not None else 0,
            health=target.health.value if target is not None else "unrouted",
        )

    def _read_router(self) -> RouterStats | None:
        if self.router is None:
            return None
        return self.router.router_stats()

    def _sample_before(self, mono_s: float) -> _Sample | None:
        """The newest kept sample taken at or before ``mono_s`` (else the oldest one)."""
        best = None
        for sample in self._samples:
            if sample.mono_s <= mono_s:
                best = sample
            else:
                break
        if best is None and self._samples:
            best = self._samples[0]
        return best

    def _router_row(
        self,
        current: _Sample,
        rate_base: _Sample | None,
        latency_base: _Sample | None,
        now_mono_s: float,
    ) -> RouterRow | None:
        stats = current.router
        if stats is None:
            return None
        rbase = rate_base.router if rate_base else None
        lbase = latency_base.router if latency_base else None
        errors_total = sum(stats.errors_total.values())

        def window(h: LatencyHistogram, earlier: LatencyHistogram | None) -> LatencyHistogram:
            return h if earlier is None else h.minus(earlier)

        durations = window(stats.duration_s, lbase.duration_s if lbase else None)
        return RouterRow(
            policy=stats.policy,
            requests_total=stats.requests_total,
            requests_per_s=_rate(
                stats.requests_total, rbase.requests_total if rbase else None, rate_base, now_mono_s
            ),
            errors_total=errors_total,
            errors_by_kind=dict(stats.errors_total),
            errors_per_s=_rate(
                errors_total,
                sum(rbase.errors_total.values()) if rbase else None,
                rate_base,
                now_mono_s,
            ),
            retries_total=stats.retries_total,
            retries_per_s=_rate(
                stats.retries_total, rbase.retries_total if rbase else None, rate_base, now_mono_s
            ),
            window_requests=durations.count,
            ttft_s=_quantiles(window(stats.ttft_s, lbase.ttft_s if lbase else None)),
            tpot_s=_quantiles(window(stats.tpot_s, lbase.tpot_s if lbase else None)),
            duration_s=_quantiles(durations),
        )


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _row_key(instance_id: str, dp_rank: int) -> str:
    return instance_id if dp_rank == 0 else f"{instance_id}/dp{dp_rank}"


def _prefix_counters(infos: Iterable[InstanceInfo]) -> dict[str, tuple[int, int]]:
    """Row key -> (prefix-cache queries, hits) for the ranks that report both."""
    prefix: dict[str, tuple[int, int]] = {}
    for info in infos:
        s = info.snapshot
        if s.prefix_cache_queries_total is not None and s.prefix_cache_hits_total is not None:
            prefix[_row_key(s.instance_id, s.dp_rank)] = (
                s.prefix_cache_queries_total,
                s.prefix_cache_hits_total,
            )
    return prefix


def _rate(now: int, before: int | None, base: _Sample | None, now_mono_s: float) -> float:
    """Per-second increase of a counter since ``base`` (0 with no earlier sample)."""
    if base is None or before is None or now_mono_s <= base.mono_s or now < before:
        return 0.0
    return round((now - before) / (now_mono_s - base.mono_s), 3)


def _hit_rate(now: tuple[int, int] | None, before: tuple[int, int] | None) -> float | None:
    if now is None:
        return None
    queries, hits = now
    if before is not None and queries >= before[0] and hits >= before[1]:
        dq, dh = queries - before[0], hits - before[1]
        if dq > 0:
            return round(min(1.0, dh / dq), 4)
    return round(min(1.0, hits / queries), 4) if queries > 0 else None


def _quantiles(h: LatencyHistogram) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, q in _QUANTILES:
        value = h.quantile(q)
        out[name] = None if value is None else round(value, 6)
    return out


def _totals(
    rows: list[InstanceRow], decision_rates: dict[str, float], inflight: Iterable[int]
) -> FleetTotals:
    by_state = {state.value: 0 for state in EngineState}
    for row in rows:
        by_state[row.state] = by_state.get(row.state, 0) + 1
    kv = [r.kv_usage for r in rows if r.kv_usage is not None]
    return FleetTotals(
        instances=len(rows),
        by_state=by_state,
        running=sum(r.running for r in rows),
        waiting=sum(r.waiting for r in rows),
        kv_usage=round(sum(kv) / len(kv), 4) if kv else None,
        tokens_per_s=round(sum(r.tokens_per_s or 0.0 for r in rows), 3),
        decisions_per_s=round(sum(decision_rates.values()), 3),
        inflight=sum(inflight),
    )


def _point(
    rows: list[InstanceRow], totals: FleetTotals, router: RouterRow | None
) -> dict[str, float | None]:
    point: dict[str, float | None] = {
        "fleet.running": totals.running,
        "fleet.waiting": totals.waiting,
        "fleet.kv_usage": totals.kv_usage,
        "fleet.tokens_per_s": totals.tokens_per_s,
        "fleet.decisions_per_s": totals.decisions_per_s,
    }
    if router is not None:
        point.update(
            {
                "fleet.requests_per_s": router.requests_per_s,
                "fleet.errors_per_s": router.errors_per_s,
                "fleet.retries_per_s": router.retries_per_s,
                "fleet.ttft_p50_s": router.ttft_s["p50"],
                "fleet.ttft_p99_s": router.ttft_s["p99"],
                "fleet.tpot_p50_s": router.tpot_s["p50"],
                "fleet.tpot_p99_s": router.tpot_s["p99"],
                "fleet.duration_p50_s": router.duration_s["p50"],
                "fleet.duration_p99_s": router.duration_s["p99"],
            }
        )
    for row in rows[:MAX_CHART_INSTANCES]:
        point[f"running@{row.key}"] = row.running
        point[f"waiting@{row.key}"] = row.waiting
        point[f"kv_usage@{row.key}"] = row.kv_usage
        point[f"decisions_per_s@{row.key}"] = row.decisions_per_s
        point[f"tokens_per_s@{row.key}"] = row.tokens_per_s
    return point
