"""The plugin A/B benchmark's statistics (pure: no vLLM)."""

from __future__ import annotations

import math

import pytest

from eagle_eye.bench.intervals import mean_ci95, t_critical_95
from eagle_eye.bench.plugin_ab import Burst, summarize
from eagle_eye.bench.stream_load import BurstResult


def _burst(
    arm: str, tok_s: float, *, tokens: int = 1000, engine: int = 1000, cpu_s: float = 0.2
) -> Burst:
    result = BurstResult(
        requests=10,
        errors=0,
        error_kinds=(),
        output_tokens=tokens,
        wall_s=tokens / tok_s,
        throughput_tok_s=tok_s,
        ttft_p50_ms=50.0,
        tpot_p50_ms=3.0,
        client_cpu_s=0.1,
    )
    return Burst(
        arm=arm,
        result=result,
        engine_tokens=engine,
        engine_steps=100,
        messages=95,
        api_server_cpu_s=cpu_s,
    )


def test_an_interval_uses_students_t() -> None:
    interval = mean_ci95([1.0, 2.0, 3.0])
    assert interval.mean == 2.0
    assert interval.high - interval.mean == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert t_critical_95(100) == 1.96
    with pytest.raises(ValueError):
        t_critical_95(0)


def test_the_paired_change_is_a_ratio_per_repeat_and_the_goal_needs_the_interval() -> None:
    # The plugin arm is exactly 0.5% slower in every repeat: a tight interval above -1%.
    bursts = [b for base in (1000.0, 2000.0, 1500.0) for b in (
        _burst("plugin", base * 0.995), _burst("baseline", base))]  # fmt: skip
    report = summarize(bursts)
    change = report["paired"]["throughput_tok_s_change"]
    assert change["mean"] == pytest.approx(-0.005, abs=1e-4) and change["n"] == 3
    assert report["goal_met"] and report["validity"]["valid"]
    assert report["plugin_messages_per_step"] == 0.95
    # Noisy repeats: the mean says "no loss", but the interval cannot rule out 1%.
    noisy = [b for p, base in ((900.0, 1000.0), (1150.0, 1000.0), (1000.0, 1000.0))
             for b in (_burst("plugin", p), _burst("baseline", base))]  # fmt: skip
    assert not summarize(noisy)["goal_met"]


def test_tokens_the_engine_did_not_count_make_the_run_invalid() -> None:
    bursts = [_burst("plugin", 1000.0, engine=990), _burst("baseline", 1000.0)] * 2
    report = summarize(bursts)
    assert not report["validity"]["valid"]
    assert not report["validity"]["client_tokens_equal_engine_tokens"]
    assert not report["goal_met"]


def test_the_api_servers_added_cpu_is_paired_per_step() -> None:
    # 100 steps per burst: 0.25 s vs 0.2 s of API-server CPU is 500 us more per step.
    bursts = [b for _ in range(3) for b in (
        _burst("plugin", 1000.0, cpu_s=0.25), _burst("baseline", 1000.0, cpu_s=0.2))]  # fmt: skip
    report = summarize(bursts)
    assert report["api_server_cpu_us_per_step"]["baseline"]["mean"] == pytest.approx(2000.0)
    assert report["api_server_cpu_us_per_step_added"]["mean"] == pytest.approx(500.0)
