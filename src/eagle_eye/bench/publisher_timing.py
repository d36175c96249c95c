"""Timing two stat loggers' ``record()`` side by side, and what the timings come to.

Both loggers are called on the same objects in the same loop, interleaved call by call
(who goes first alternates, so neither always meets the coldest caches), next to an empty
call that measures the machine's own noise. ``phase_keys`` turns the timings of the
three phases into the benchmark's JSON numbers; nothing here knows about vLLM or NATS.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

RATIO_GOAL = 0.25
"""Our ``record()`` p50 may cost at most this fraction of vLLM's Prometheus logger's."""
P99_GOAL_US = 50.0
"""Our ``record()`` p99 bound, microseconds, with NATS up and down."""
TOTAL_RATIO_GOAL = 0.5
"""Everything the plugin costs per step (``record()`` plus the sender thread's CPU) may
cost at most this fraction of vLLM's Prometheus logger's ``record()``."""


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def _summary_us(samples_ns: list[int]) -> dict[str, float]:
    values = sorted(ns / 1000.0 for ns in samples_ns)
    return {
        "p50": round(_percentile(values, 0.50), 3),
        "p90": round(_percentile(values, 0.90), 3),
        "p99": round(_percentile(values, 0.99), 3),
        "max": round(values[-1], 3),
    }


def _noop_record(_scheduler: Any, _iteration: Any, *_args: Any) -> None:
    """Times nothing but the call itself: the machine's noise floor in the same loop."""


@dataclass
class Timings:
    """One phase: per-call durations of each logger and of the empty call."""

    ours_ns: list[int] = field(default_factory=list)
    theirs_ns: list[int] = field(default_factory=list)
    noop_ns: list[int] = field(default_factory=list)
    background_cpu_s: float = 0.0
    """CPU the process spent outside the measuring thread (our sender thread)."""
    sender_wakeups: int = 0
    """Times our sender thread woke up during the phase."""


def measure_interleaved(
    ours: Any, theirs: Any, steps: list[tuple[Any, Any]], step_s: float
) -> Timings:
    """Timings of both loggers' ``record()`` on the same objects, interleaved; who goes
    first after the pause (and meets the coldest caches) alternates step by step."""
    out = Timings()
    cpu_all_s, cpu_main_s = time.process_time(), time.thread_time()
    clock = time.perf_counter_ns
    next_step = time.perf_counter()
    for i, (scheduler, iteration) in enumerate(steps):
        first, second = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        t0 = clock()
        first.record(scheduler, iteration, None, 0)
        t1 = clock()
        second.record(scheduler, iteration, None, 0)
        t2 = clock()
        _noop_record(scheduler, iteration, None, 0)
        t3 = clock()
        (out.ours_ns if i % 2 == 0 else out.theirs_ns).append(t1 - t0)
        (out.theirs_ns if i % 2 == 0 else out.ours_ns).append(t2 - t1)
        out.noop_ns.append(t3 - t2)
        next_step += step_s
        delay = next_step - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # pacing like engine steps, not synchronisation
    out.background_cpu_s = (time.process_time() - cpu_all_s) - (time.thread_time() - cpu_main_s)
    return out


def _mean_us(samples_ns: list[int]) -> float:
    return sum(samples_ns) / len(samples_ns) / 1000.0 if samples_ns else float("nan")


def _total_keys(timings: Timings, steps: int, prefix: str) -> dict[str, float]:
    """Our whole cost per step (mean ``record()`` plus the sender's CPU) against vLLM's
    mean ``record()``: both are CPU the API-server process spends per engine step."""
    sender_us = timings.background_cpu_s / steps * 1e6
    total_us = _mean_us(timings.ours_ns) + sender_us
    return {
        f"{prefix}total_cpu_us_per_step": round(total_us, 3),
        f"{prefix}vllm_prometheus_us_mean": round(_mean_us(timings.theirs_ns), 3),
        f"{prefix}total_ratio": round(total_us / _mean_us(timings.theirs_ns), 4),
    }


def phase_keys(phases: dict[str, Timings], steps: int) -> dict[str, float]:
    """The JSON numbers from the phases' timings (pure)."""
    up, down, warm = phases["nats_up"], phases["nats_down"], phases["back_to_back"]
    up_ours, up_theirs = _summary_us(up.ours_ns), _summary_us(up.theirs_ns)
    down_ours, down_theirs = _summary_us(down.ours_ns), _summary_us(down.theirs_ns)
    # Back to back (warm caches, the sender mostly coalescing): the code path's own cost.
    warm_ours, warm_theirs = _summary_us(warm.ours_ns), _summary_us(warm.theirs_ns)
    return {
        "back_to_back_record_us_p50": warm_ours["p50"],
        "back_to_back_record_us_p99": warm_ours["p99"],
        "back_to_back_vllm_prometheus_us_p50": warm_theirs["p50"],
        "back_to_back_vllm_prometheus_us_p99": warm_theirs["p99"],
        "back_to_back_ratio_p50": round(warm_ours["p50"] / warm_theirs["p50"], 4),
        # An empty call timed in the same paced loop: what the machine adds by itself.
        "noise_floor_us_p99": _summary_us(up.noop_ns)["p99"],
        "noise_floor_us_max": _summary_us(up.noop_ns)["max"],
        # Not part of record(): what the background sender (snapshot, JSON, socket) costs.
        "sender_cpu_us_per_step": round(up.background_cpu_s / steps * 1e6, 3),
        "nats_down_sender_cpu_us_per_step": round(down.background_cpu_s / steps * 1e6, 3),
        "sender_wakeups_per_step": round(up.sender_wakeups / steps, 3),
        "record_us_p50": up_ours["p50"],
        "record_us_p90": up_ours["p90"],
        "record_us_p99": up_ours["p99"],
        "record_us_max": up_ours["max"],
        "vllm_prometheus_us_p50": up_theirs["p50"],
        "vllm_prometheus_us_p99": up_theirs["p99"],
        "ratio_p50": round(up_ours["p50"] / up_theirs["p50"], 4),
        "nats_down_record_us_p50": down_ours["p50"],
        "nats_down_record_us_p99": down_ours["p99"],
        "nats_down_record_us_max": down_ours["max"],
        "nats_down_vllm_prometheus_us_p50": down_theirs["p50"],
        "nats_down_ratio_p50": round(down_ours["p50"] / down_theirs["p50"], 4),
        **_total_keys(up, steps, ""),
        **_total_keys(down, steps, "nats_down_"),
    }


def total_goal_met(result: dict[str, Any]) -> bool:
    """Both total ratios (NATS up and down) within ``TOTAL_RATIO_GOAL``."""
    return bool(
        result["total_ratio"] <= TOTAL_RATIO_GOAL
        and result["nats_down_total_ratio"] <= TOTAL_RATIO_GOAL
    )


def goals_met(result: dict[str, Any]) -> bool:
    """Both ratios within ``RATIO_GOAL`` and both p99s within ``P99_GOAL_US``."""
    return bool(
        result["ratio_p50"] <= RATIO_GOAL
        and result["nats_down_ratio_p50"] <= RATIO_GOAL
        and result["record_us_p99"] <= P99_GOAL_US
        and result["nats_down_record_us_p99"] <= P99_GOAL_US
    )
