"""Synthetic workloads and the capacity estimate behind ``--load`` (pure)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from eagle_eye.bench.routing.capacity import estimate_capacity, request_cost_s
from eagle_eye.bench.routing.trace import (
    MOONCAKE_BLOCK_TOKENS,
    TraceRequest,
    arrival_rate_rps,
    trace_stats,
)
from eagle_eye.bench.routing.workloads import (
    SCENARIOS,
    build_workload,
    bursts,
    fleet_speed_factors,
    multi_turn,
    short_chat,
    system_prompts,
)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_workload_is_deterministic_sorted_and_consistent(name: str) -> None:
    a = build_workload(name, duration_s=60.0, seed=3)
    b = build_workload(name, duration_s=60.0, seed=3)
    assert a == b and len(a) > 10
    assert all(x.arrival_s <= y.arrival_s for x, y in itertools.pairwise(a))
    for r in a:
        assert r.input_tokens >= 1 and r.output_tokens >= 1
        # hash_ids cover the prompt: one id per started 512-token block.
        assert len(r.hash_ids) == -(-r.input_tokens // MOONCAKE_BLOCK_TOKENS)


def test_unknown_workload_names_the_choices() -> None:
    with pytest.raises(ValueError, match="short_chat"):
        build_workload("nope", duration_s=1.0)


def test_short_chat_shares_nothing_and_system_prompts_share_a_lot() -> None:
    assert trace_stats(short_chat(duration_s=120.0)).block_reuse == 0.0
    assert trace_stats(system_prompts(duration_s=120.0)).block_reuse > 0.5


def test_multi_turn_sessions_extend_their_own_history() -> None:
    requests = multi_turn(duration_s=300.0, seed=1)
    by_session: dict[str, list[TraceRequest]] = {}
    for r in requests:
        assert r.session is not None
        by_session.setdefault(r.session, []).append(r)
    longest = max(by_session.values(), key=len)
    assert len(longest) >= 3
    for prev, nxt in itertools.pairwise(longest):
        shared = len(prev.hash_ids) - 1  # every complete block of the previous prompt
        assert nxt.hash_ids[:shared] == prev.hash_ids[:shared]


def test_bursts_arrive_faster_inside_the_burst_window() -> None:
    requests = bursts(duration_s=600.0, rate_rps=10.0, period_s=60.0, burst_s=6.0, burst_factor=6.0)
    inside = [r for r in requests if r.arrival_s % 60.0 < 6.0]
    rate_in = len(inside) / (10 * 6.0)
    rate_out = (len(requests) - len(inside)) / (10 * 54.0)
    assert rate_in / rate_out == pytest.approx(6.0, rel=0.25)
    assert arrival_rate_rps(requests) == pytest.approx(10.0, rel=0.15)


def test_heterogeneous_fleet_has_one_half_speed_engine() -> None:
    assert fleet_speed_factors(SCENARIOS["heterogeneous"], 4) == [0.5, 1.0, 1.0, 1.0]
    assert fleet_speed_factors(None, 2) == [1.0, 1.0]


@dataclass(frozen=True)
class _Profile:
    name: str = "toy"
    step_overhead_s: float = 0.01
    prefill_token_s: float = 1e-4
    decode_seq_s: float = 1e-3
    kv_read_token_s: float = 1e-6
    attention_pair_s: float = 1e-9
    max_num_batched_tokens: int = 1000


def test_request_cost_follows_the_documented_formula() -> None:
    p, o = 900, 100
    expected = (
        (p + o) / 1000 * 0.01
        + 1e-4 * p
        + 1e-9 * p * (p + 1) / 2
        + 1e-3 * o
        + 1e-6 * sum(p + k for k in range(o))
    )
    assert request_cost_s(_Profile(), p, o) == pytest.approx(expected)


def test_capacity_scales_with_engine_speed_and_sets_the_rate_factor() -> None:
    requests = [
        TraceRequest(arrival_s=float(i), input_tokens=900, output_tokens=100, hash_ids=(i, i + 1))
        for i in range(11)
    ]
    cost = request_cost_s(_Profile(), 900, 100)
    est = estimate_capacity(requests, _Profile(), [1.0, 1.0, 0.5], load=0.8, trace_rate_rps=1.0)
    assert est.capacity_rps == pytest.approx(2.5 / cost)
    assert est.rate_factor == pytest.approx(0.8 * 2.5 / cost)
    assert est.to_dict()["engines"] == 3
    with pytest.raises(ValueError):
        estimate_capacity([], _Profile(), [1.0], load=0.8, trace_rate_rps=1.0)
