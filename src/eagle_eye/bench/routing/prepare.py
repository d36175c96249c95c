"""The requests every row of a ``bench routing`` run replays, scaled to the asked load.

Every row must see byte-identical requests, so they are built once, here: read from a
trace or generated from a synthetic workload, their arrival rate rescaled to ``load`` x
the fleet's estimated capacity (``capacity.py`` says how), then cut to ``duration_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from eagle_eye.bench.routing.capacity import estimate_capacity
from eagle_eye.bench.routing.trace import (
    TraceRequest,
    arrival_rate_rps,
    cap_duration,
    load_trace,
    scale_rate,
    span_s,
    trace_stats,
)
from eagle_eye.bench.routing.workloads import build_workload


@dataclass(frozen=True, slots=True)
class PreparedRequests:
    """The replayed requests and what ``results.json`` says about them."""

    requests: list[TraceRequest]
    """Arrival-ordered, already rescaled and cut."""
    capacity: dict[str, Any]
    """``CapacityEstimate.to_dict()``: the fleet's capacity and the rate factor applied."""
    info: dict[str, Any]
    """Source, request count, span, mean lengths, block reuse and cost profile."""


def prepare_requests(
    *,
    trace: str | None,
    workload: str | None,
    engines: int,
    speed_factors: Sequence[float],
    profile_name: str | None,
    load: float,
    duration_s: float | None,
    seed: int,
) -> PreparedRequests:
    """Load or generate the requests and scale them to ``load`` x capacity."""
    from eagle_eye.sim.cost_model import DEFAULT_PROFILE, get_profile

    if workload is not None:
        # Generate twice the span needed at nominal rate; the cap below trims it.
        base = build_workload(workload, duration_s=max(600.0, 2 * (duration_s or 600.0)), seed=seed)
        source = f"workload:{workload}"
    else:
        assert trace is not None
        base = load_trace(trace)
        source = trace
    profile = get_profile(profile_name or DEFAULT_PROFILE)
    rate = arrival_rate_rps(base)
    capacity = estimate_capacity(base, profile, speed_factors, load=load, trace_rate_rps=rate)
    requests = cap_duration(scale_rate(base, capacity.rate_factor), duration_s)
    if not requests:
        raise click.ClickException("no requests left after --duration")
    stats = trace_stats(requests)
    info = {
        "source": source,
        "requests": len(requests),
        "span_s": round(span_s(requests), 3),
        "mean_input_tokens": round(stats.mean_input_tokens, 1),
        "mean_output_tokens": round(stats.mean_output_tokens, 1),
        "block_reuse": round(stats.block_reuse, 4),
        "profile": profile.name,
    }
    return PreparedRequests(requests=requests, capacity=capacity.to_dict(), info=info)
