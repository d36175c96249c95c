"""``eagle-eye bench router --tracing-overhead``: what tracing adds to the router's overhead.

Method. The same fake backend and paired open-loop latency job as the router benchmark
(``router_load.paired_latency``: the router and the direct path interleaved request by
request, so background noise hits both alike), run against three routers, each started
alone: tracing off, tracing at 1 % sampling and at 100 % (parent-based ratio, new traces
only: the load carries no ``traceparent``). Spans are exported over OTLP/HTTP to the fake
backend, which drops them, so the export's cost is in the numbers.

A 2-core machine shared with other work is noisy, so the three configurations run in
``rounds``, each round in a rotated order (no configuration always goes first or last),
and the result is the median across rounds; ``spread`` gives each configuration's
min-max so a reader sees how much the medians can be trusted.

The goal: at 1 % sampling, tracing adds at most 5 % to the router's added latency (the
median over rounds of the difference to tracing off within the round, relative to the
median ``overhead_ms_p50`` with tracing off). Very small overheads make that ratio jumpy,
which is why the absolute difference in microseconds is reported next to it. A fourth
router, tracing off again (the A/A control), runs in every round: its difference to
``off`` is the benchmark's own resolution, and ``resolves_the_goal`` is false when that
is over half the goal (the verdict on 5 % then cannot be trusted).
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from typing import Any, Final

from eagle_eye.bench.router_contenders import start_eagle_eye
from eagle_eye.bench.router_load import LoadPlan, paired_latency

CONFIGS: Final = {
    "off": (),
    "off_again": (),
    "sampled_1pct": ("--trace-sample-ratio", "0.01"),
    "sampled_100pct": ("--trace-sample-ratio", "1.0"),
}
"""Name -> the router's tracing flags (the endpoint is added per run). ``off_again`` is
the A/A control: a second router with tracing off, measured like the others, so the
report shows how large a difference the benchmark reports when there is none."""
GOAL_1PCT_ADDED_FRACTION: Final = 0.05
"""At 1 % sampling tracing may add at most this fraction to the added latency."""


async def _one_run(name: str, backend_url: str, plan: LoadPlan) -> dict[str, Any]:
    flags: Sequence[str] = CONFIGS[name]
    if flags:
        flags = ("--otlp-traces-endpoint", backend_url + "/v1/traces", *flags)
    router = await start_eagle_eye(backend_url, flags)
    try:
        return await asyncio.to_thread(paired_latency, router.url, plan, backend_url)
    finally:
        router.handle.stop()


async def measure_tracing_overhead(backend_url: str, plan: LoadPlan, rounds: int) -> dict[str, Any]:
    """Every configuration ``rounds`` times, rotated; medians, spreads and the goal."""
    names = list(CONFIGS)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            runs[name].append(await _one_run(name, backend_url, plan))
    return summarise(runs, plan, rounds)


def summarise(runs: dict[str, list[dict[str, Any]]], plan: LoadPlan, rounds: int) -> dict[str, Any]:
    """Medians across rounds per configuration, the added cost of tracing, the goal."""
    keys = ("overhead_ms_p50", "overhead_ms_p99", "latency_ms_p50", "latency_ms_p99")
    medians = {
        name: {k: statistics.median(run[k] for run in got) for k in keys}
        for name, got in runs.items()
    }
    spread = {
        name: {
            k: [min(run[k] for run in got), max(run[k] for run in got)]
            for k in ("overhead_ms_p50", "overhead_ms_p99")
        }
        for name, got in runs.items()
    }
    off = medians["off"]["overhead_ms_p50"]
    added = {
        name: {
            "overhead_us_p50": (m["overhead_ms_p50"] - off) * 1000,
            "overhead_us_p99": (m["overhead_ms_p99"] - medians["off"]["overhead_ms_p99"]) * 1000,
            "fraction_of_added_latency_p50": (m["overhead_ms_p50"] - off) / off
            if off > 0
            else None,
        }
        for name, m in medians.items()
        if name != "off"
    }
    # Round by round (the configurations of one round ran back to back): the median of
    # the differences is steadier than the difference of the medians on a noisy machine.
    for name in added:
        diffs = [
            (run["overhead_ms_p50"] - base["overhead_ms_p50"]) * 1000
            for run, base in zip(runs[name], runs["off"], strict=True)
        ]
        added[name]["paired_overhead_us_p50"] = statistics.median(diffs)
        added[name]["paired_fraction_p50"] = (
            statistics.median(diffs) / (off * 1000) if off > 0 else None
        )
    fraction = added["sampled_1pct"]["paired_fraction_p50"]
    control = added.get("off_again", {}).get("paired_fraction_p50")
    return {
        "method": {
            "rounds": rounds,
            "rate_rps": plan.rate_rps,
            "duration_s": plan.duration_s,
            "order": "rotated each round; medians across rounds",
            "export": "OTLP/HTTP to the fake backend (dropped there)",
        },
        "median": medians,
        "spread_min_max": spread,
        "added_by_tracing": added,
        "errors": sum(run["errors"] for got in runs.values() for run in got),
        "goals": {
            "tracing_1pct_adds_le_5pct": fraction is not None
            and fraction <= GOAL_1PCT_ADDED_FRACTION
        },
        # The goal is only judged when the A/A control differs by under half of it.
        "resolves_the_goal": control is not None and abs(control) <= GOAL_1PCT_ADDED_FRACTION / 2,
        "runs": runs,
    }
