"""The tracing-overhead summary: medians across rounds, paired differences, the goal."""

from __future__ import annotations

from typing import Any

import pytest

from eagle_eye.bench.router_load import LoadPlan
from eagle_eye.bench.router_tracing import CONFIGS, summarise


def run(p50: float, p99: float) -> dict[str, Any]:
    return {
        "overhead_ms_p50": p50,
        "overhead_ms_p99": p99,
        "latency_ms_p50": p50 + 1,
        "latency_ms_p99": p99 + 1,
        "errors": 0,
    }


def test_the_summary_pairs_rounds_and_judges_the_1pct_goal_on_them() -> None:
    plan = LoadPlan(rate_rps=300, concurrency=8, duration_s=2)
    runs = {
        # A noisy third round hits every configuration alike; pairing cancels it.
        "off": [run(1.00, 2.0), run(1.10, 2.2), run(3.00, 9.0)],
        "off_again": [run(1.01, 2.0), run(1.09, 2.2), run(3.00, 9.1)],
        "sampled_1pct": [run(1.02, 2.1), run(1.13, 2.2), run(3.03, 9.5)],
        "sampled_100pct": [run(1.50, 20.0), run(1.70, 30.0), run(3.60, 40.0)],
    }
    summary = summarise(runs, plan, rounds=3)
    assert set(summary["median"]) == set(CONFIGS)
    assert summary["median"]["off"]["overhead_ms_p50"] == 1.10
    one = summary["added_by_tracing"]["sampled_1pct"]
    assert one["paired_overhead_us_p50"] == pytest.approx(30.0)
    assert one["paired_fraction_p50"] == pytest.approx(30.0 / 1100.0)
    assert summary["goals"] == {"tracing_1pct_adds_le_5pct": True}
    assert summary["added_by_tracing"]["off_again"]["paired_overhead_us_p50"] == pytest.approx(0.0)
    assert summary["resolves_the_goal"]
    assert summary["spread_min_max"]["off"]["overhead_ms_p50"] == [1.00, 3.00]
    full = summary["added_by_tracing"]["sampled_100pct"]
    assert full["paired_overhead_us_p50"] == pytest.approx(600.0)


def test_the_goal_fails_when_1pct_adds_more_than_5pct() -> None:
    plan = LoadPlan(rate_rps=300, concurrency=8, duration_s=2)
    runs = {
        "off": [run(1.0, 2.0)],
        "off_again": [run(1.0, 2.0)],
        "sampled_1pct": [run(1.06, 2.0)],
        "sampled_100pct": [run(2.0, 9.0)],
    }
    assert summarise(runs, plan, rounds=1)["goals"] == {"tracing_1pct_adds_le_5pct": False}


def test_an_a_a_difference_over_half_the_goal_means_the_run_cannot_judge_it() -> None:
    plan = LoadPlan(rate_rps=300, concurrency=8, duration_s=2)
    runs = {
        "off": [run(1.0, 2.0)],
        "off_again": [run(1.04, 2.0)],  # 4 % apart with nothing changed
        "sampled_1pct": [run(1.01, 2.0)],
        "sampled_100pct": [run(2.0, 9.0)],
    }
    assert not summarise(runs, plan, rounds=1)["resolves_the_goal"]
