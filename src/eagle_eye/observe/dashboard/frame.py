"""What the dashboard and ``top`` show at one instant: table rows, totals, router figures.

Plain frozen records, built by ``DashboardState.sample`` (``state.py``) and read by the
web app (``Frame.to_json`` is the SSE payload) and by ``top``'s renderer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceRow:
    """One engine rank as the table shows it."""

    key: str
    """``instance_id``, with ``/dp<rank>`` for ranks above 0: unique per row."""
    instance_id: str
    dp_rank: int
    model: str
    engine: str
    state: str
    endpoint: str | None
    running: int
    waiting: int
    kv_usage: float | None
    age_s: float
    stale: bool
    tokens_per_s: float | None
    ttft_recent_s: float | None
    itl_recent_s: float | None
    prefix_hit_rate: float | None
    """Prompt tokens found in the prefix cache over the rate window (cumulative before)."""
    preemptions_total: int | None
    decisions_per_s: float
    """Routing decisions to this rank's endpoint per second (shared by its dp ranks)."""
    inflight: int
    health: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetTotals:
    instances: int
    by_state: dict[str, int]
    running: int
    waiting: int
    kv_usage: float | None
    """Mean KV-cache usage over ranks that report it."""
    tokens_per_s: float
    decisions_per_s: float
    inflight: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterRow:
    """The router's own view; None in a frame when there is no router (standalone mode)."""

    policy: str
    requests_total: int
    requests_per_s: float
    errors_total: int
    errors_by_kind: dict[str, int]
    errors_per_s: float
    retries_total: int
    retries_per_s: float
    window_requests: int
    """Requests behind the percentiles below (those finished in ``latency_window_s``)."""
    ttft_s: dict[str, float | None]
    tpot_s: dict[str, float | None]
    duration_s: dict[str, float | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """Everything the page or ``top`` shows at one instant."""

    t: float
    """Wall-clock Unix seconds of this sample (the charts' x axis)."""
    instances: list[InstanceRow]
    fleet: FleetTotals
    router: RouterRow | None
    point: dict[str, float | None]
    """This sample's value of every chart series."""

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "instances": [_asdict(r) for r in self.instances],
            "fleet": _asdict(self.fleet),
            "router": None if self.router is None else _asdict(self.router),
            "point": self.point,
        }


def _asdict(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}
