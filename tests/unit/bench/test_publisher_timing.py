"""The publisher benchmark's timing loop and the JSON numbers it comes to (no vLLM)."""

from __future__ import annotations

from typing import Any

from eagle_eye.bench.publisher_timing import (
    P99_GOAL_US,
    RATIO_GOAL,
    TOTAL_RATIO_GOAL,
    Timings,
    goals_met,
    measure_interleaved,
    phase_keys,
    total_goal_met,
)

PHASE_KEYS = {
    "back_to_back_record_us_p50",
    "back_to_back_record_us_p99",
    "back_to_back_vllm_prometheus_us_p50",
    "back_to_back_vllm_prometheus_us_p99",
    "back_to_back_ratio_p50",
    "noise_floor_us_p99",
    "noise_floor_us_max",
    "sender_cpu_us_per_step",
    "nats_down_sender_cpu_us_per_step",
    "record_us_p50",
    "record_us_p90",
    "record_us_p99",
    "record_us_max",
    "vllm_prometheus_us_p50",
    "vllm_prometheus_us_p99",
    "ratio_p50",
    "nats_down_record_us_p50",
    "nats_down_record_us_p99",
    "nats_down_record_us_max",
    "nats_down_vllm_prometheus_us_p50",
    "nats_down_ratio_p50",
    "total_cpu_us_per_step",
    "vllm_prometheus_us_mean",
    "total_ratio",
    "nats_down_total_cpu_us_per_step",
    "nats_down_vllm_prometheus_us_mean",
    "nats_down_total_ratio",
    "sender_wakeups_per_step",
}


class _Logger:
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls

    def record(self, *_args: Any) -> None:
        self.calls.append(self.name)


def test_loggers_take_turns_going_first_on_the_same_objects() -> None:
    calls: list[str] = []
    ours, theirs = _Logger("ours", calls), _Logger("theirs", calls)
    timings = measure_interleaved(ours, theirs, [(object(), object())] * 4, step_s=0.0)
    assert calls == ["ours", "theirs", "theirs", "ours"] * 2
    assert len(timings.ours_ns) == len(timings.theirs_ns) == len(timings.noop_ns) == 4


def test_phase_keys_are_the_json_numbers_in_microseconds() -> None:
    def phase(ours_us: int, theirs_us: int) -> Timings:
        return Timings(
            ours_ns=[ours_us * 1000] * 10,
            theirs_ns=[theirs_us * 1000] * 10,
            noop_ns=[100] * 10,
            background_cpu_s=0.001,
        )

    phases = {"back_to_back": phase(1, 10), "nats_up": phase(2, 20), "nats_down": phase(3, 20)}
    keys = phase_keys(phases, steps=10)
    assert set(keys) == PHASE_KEYS
    assert keys["record_us_p99"] == 2.0 and keys["nats_down_record_us_p99"] == 3.0
    assert (
        keys["ratio_p50"] == 0.1
        and keys["nats_down_ratio_p50"] == 0.15
        and keys["back_to_back_ratio_p50"] == 0.1
    )
    assert keys["noise_floor_us_max"] == 0.1
    assert keys["sender_cpu_us_per_step"] == 100.0
    # record() 2 us + sender 100 us per step, against vLLM's 20 us.
    assert keys["total_cpu_us_per_step"] == 102.0 and keys["total_ratio"] == 5.1
    assert keys["nats_down_total_ratio"] == 5.15
    assert not total_goal_met(keys)
    cheap = {**keys, "total_ratio": TOTAL_RATIO_GOAL, "nats_down_total_ratio": 0.1}
    assert total_goal_met(cheap)
    assert goals_met(keys)
    assert not goals_met({**keys, "nats_down_ratio_p50": RATIO_GOAL * 2})
    assert not goals_met({**keys, "record_us_p99": P99_GOAL_US + 1})
