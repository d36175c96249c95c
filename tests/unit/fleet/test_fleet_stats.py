"""Histograms and the recorder behind the router's ``RouterStatsSource`` seam."""

from __future__ import annotations

import random

import pytest

from eagle_eye.fleet.stats import (
    DEFAULT_LATENCY_BOUNDS_S,
    LatencyHistogram,
    RouterStats,
    RouterStatsRecorder,
    RouterStatsSource,
)


def test_default_bounds_cover_one_millisecond_to_five_minutes_in_ascending_order() -> None:
    assert DEFAULT_LATENCY_BOUNDS_S[0] == 0.001
    assert DEFAULT_LATENCY_BOUNDS_S[-1] >= 300.0
    assert list(DEFAULT_LATENCY_BOUNDS_S) == sorted(set(DEFAULT_LATENCY_BOUNDS_S))


def test_empty_histogram_has_no_quantile() -> None:
    assert LatencyHistogram().quantile(0.5) is None


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_quantiles_are_within_the_bucket_resolution_of_the_exact_value(q: float) -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(-2.0, 0.8) for _ in range(20_000)]
    recorder = RouterStatsRecorder()
    for v in values:
        recorder.observe_ttft(v)
    exact = sorted(values)[int(q * len(values)) - 1]
    estimate = recorder.router_stats().ttft_s.quantile(q)
    assert estimate is not None
    assert abs(estimate - exact) / exact < 0.13  # buckets are 25 % apart


def test_minus_keeps_only_the_observations_made_since_the_earlier_sample() -> None:
    recorder = RouterStatsRecorder()
    for _ in range(100):
        recorder.observe_duration(10.0)  # an old, slow period
    earlier = recorder.router_stats().duration_s
    for _ in range(10):
        recorder.observe_duration(0.1)
    window = recorder.router_stats().duration_s.minus(earlier)
    assert window.count == 10
    assert window.sum_s == pytest.approx(1.0)
    p99 = window.quantile(0.99)
    assert p99 is not None and abs(p99 - 0.1) / 0.1 < 0.13  # within one 25 % bucket


def test_minus_treats_a_counter_reset_as_counting_from_zero() -> None:
    before = RouterStatsRecorder()
    for _ in range(5):
        before.observe_tpot(0.02)
    after_restart = RouterStatsRecorder()
    after_restart.observe_tpot(0.05)
    window = after_restart.router_stats().tpot_s.minus(before.router_stats().tpot_s)
    assert window.count == 1


def test_overflow_bucket_answers_with_the_largest_bound() -> None:
    h = LatencyHistogram(bounds_s=(0.1, 1.0), counts=(0, 0, 3), sum_s=30.0)
    assert h.quantile(0.5) == 1.0


def test_recorder_ignores_negative_and_non_finite_latencies() -> None:
    recorder = RouterStatsRecorder()
    for bad in (-1.0, float("nan"), float("inf")):
        recorder.observe_ttft(bad)
    assert recorder.router_stats().ttft_s.count == 0


def test_recorder_counts_requests_errors_by_kind_and_retries() -> None:
    recorder = RouterStatsRecorder(policy="kv_aware")
    source: RouterStatsSource = recorder
    for _ in range(3):
        recorder.observe_request()
    recorder.observe_error("upstream_connect")
    recorder.observe_error("upstream_connect")
    recorder.observe_error("no_instance")
    recorder.observe_retry()
    stats = source.router_stats()
    assert isinstance(stats, RouterStats)
    assert stats.policy == "kv_aware"
    assert stats.requests_total == 3
    assert dict(stats.errors_total) == {"upstream_connect": 2, "no_instance": 1}
    assert stats.retries_total == 1


def test_a_stats_sample_is_a_frozen_copy_that_later_observations_do_not_change() -> None:
    recorder = RouterStatsRecorder()
    recorder.observe_error("timeout")
    sample = recorder.router_stats()
    recorder.observe_error("timeout")
    recorder.observe_ttft(0.5)
    assert sample.errors_total["timeout"] == 1
    assert sample.ttft_s.count == 0
