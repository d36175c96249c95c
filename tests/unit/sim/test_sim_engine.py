"""Invariants of the engine model: capacity, conservation, latency bounds, caching."""

from __future__ import annotations

import random

import pytest

from eagle_eye.sim.cost_model import get_profile
from eagle_eye.sim.engine import EngineCore, RequestRejectedError, StepResult
from eagle_eye.sim.request import FinishReason, SimRequest
from eagle_eye.sim.tokens import text_block_hashes, text_token_count

H100 = get_profile("llama3.1-8b-h100")


def small_profile(blocks: int = 64, **changes: int) -> object:
    return H100.with_limits(num_gpu_blocks=blocks, max_model_len=blocks * 16, **changes)


def run_to_completion(core: EngineCore, *, check: bool = True) -> list[StepResult]:
    """Step until idle, asserting the KV capacity invariant after every plan."""
    results = []
    for _ in range(1_000_000):
        plan = core.plan_step(core.now_s)
        if plan is None:
            break
        if check:
            assert core.kv.used_blocks <= core.kv.num_blocks
            assert len(core.running) <= core.max_num_seqs
            assert sum(n for _, n in plan.scheduled) <= core.max_num_batched_tokens
        results.append(core.complete(plan))
    assert not core.has_work
    return results


def make(i: int, prompt: int, out: int, hashes: list[int] | None = None) -> SimRequest:
    return SimRequest(f"r{i}", prompt_tokens=prompt, max_tokens=out, block_hashes=hashes or [])


def test_tokens_are_conserved_and_every_request_finishes() -> None:
    core = EngineCore(H100)
    rng = random.Random(1)
    reqs = [make(i, rng.randint(1, 3000), rng.randint(1, 200)) for i in range(50)]
    for r in reqs:
        core.add_request(r)
    results = run_to_completion(core)
    assert all(r.finish_reason is FinishReason.LENGTH for r in reqs)
    assert all(r.output_tokens == r.max_tokens for r in reqs)
    generated = sum(res.iteration_stats.num_generation_tokens for res in results)  # type: ignore[union-attr]
    assert generated == sum(r.max_tokens for r in reqs) == core.counters.generation_tokens
    assert core.counters.prompt_tokens == sum(r.prompt_tokens for r in reqs)
    assert core.kv.used_blocks == 0


def test_kv_never_exceeds_capacity_and_preemption_happens_when_it_must() -> None:
    core = EngineCore(small_profile(blocks=40))  # 640 tokens of KV
    reqs = [make(i, 200, 150) for i in range(6)]  # 6 x 350 tokens cannot all fit
    for r in reqs:
        core.add_request(r)
    results = run_to_completion(core)
    assert core.counters.preemptions > 0
    assert (
        sum(res.iteration_stats.num_preempted_reqs for res in results) == core.counters.preemptions
    )  # type: ignore[union-attr]
    assert all(r.output_tokens == 150 for r in reqs)
    assert max(r.num_preemptions for r in reqs) >= 1
    # Preemption is by recompute: the victim starts over but keeps its output so far.
    assert core.counters.computed_prompt_tokens > sum(r.prompt_tokens for r in reqs)


def test_ttft_is_at_least_queueing_plus_one_prefill_step() -> None:
    core = EngineCore(small_profile(blocks=400, max_num_seqs=2))
    reqs = [make(i, 1000, 20) for i in range(6)]
    for r in reqs:
        core.add_request(r)
    run_to_completion(core)
    for r in reqs:
        assert r.ttft_s is not None and r.queued_s is not None
        prefill_s = H100.step_time_s(prefill_tokens=1000, decode_seqs=0, kv_tokens_read=1000)
        assert r.ttft_s >= r.queued_s + prefill_s * 0.999
    assert reqs[-1].queued_s > reqs[0].queued_s  # FCFS behind max_num_seqs=2


def test_shared_text_prefix_hits_the_cache() -> None:
    core = EngineCore(H100)
    system = "You are a helpful assistant. " * 40
    first, second = system + "Question one?", system + "Another question entirely"
    for i, text in enumerate((first, second)):
        r = SimRequest(f"q{i}", text_token_count(text), 8, block_hashes=text_block_hashes(text, 16))
        core.add_request(r)
        run_to_completion(core)
    shared_blocks = len(text_block_hashes(system, 16))
    assert core.counters.prefix_hits == shared_blocks * 16
    assert core.counters.prefix_queries == text_token_count(first) + text_token_count(second)


def test_full_prompt_hit_still_computes_one_token() -> None:
    core = EngineCore(H100)
    hashes = list(range(100, 104))
    for i in range(2):
        core.add_request(make(i, 64, 4, hashes))
        run_to_completion(core)
    assert core.counters.prefix_hits == 48  # (64 - 1) // 16 blocks at most


def test_long_prompt_is_chunked_over_the_token_budget() -> None:
    core = EngineCore(H100)
    r = make(0, 90_000, 2)
    core.add_request(r)
    results = run_to_completion(core)
    budget = H100.max_num_batched_tokens
    prefill_steps = -(-90_000 // budget)
    assert len(results) == prefill_steps + 1
    # the quadratic attention term makes a long prompt cost more than linear
    assert r.ttft_s is not None and r.ttft_s > 90_000 * H100.prefill_token_s


def test_eos_finishes_with_stop_before_max_tokens() -> None:
    core = EngineCore(H100)
    r = SimRequest("e", prompt_tokens=10, max_tokens=100, eos_after=7)
    core.add_request(r)
    run_to_completion(core)
    assert r.finish_reason is FinishReason.STOP
    assert r.output_tokens == 7


def test_requests_longer_than_the_context_are_rejected() -> None:
    core = EngineCore(H100)
    with pytest.raises(RequestRejectedError, match="maximum context length"):
        core.add_request(make(0, H100.max_model_len, 1))


def test_speed_factor_scales_step_time() -> None:
    times = []
    for factor in (1.0, 0.5):
        core = EngineCore(H100, speed_factor=factor)
        core.add_request(make(0, 500, 50))
        run_to_completion(core)
        times.append(core.now_s)
    assert times[1] == pytest.approx(2 * times[0])


def test_scheduler_stats_look_like_vllms() -> None:
    core = EngineCore(H100)
    core.add_request(make(0, 100, 3, list(range(6))))
    plan = core.plan_step(0.0)
    assert plan is not None
    result = core.complete(plan)
    s, it = result.scheduler_stats, result.iteration_stats
    assert s is not None and it is not None
    assert (s.num_running_reqs, s.num_waiting_reqs, s.step_counter) == (1, 0, 1)
    assert s.prefix_cache_stats.queries == 100
    assert 0 < s.kv_cache_usage <= 1
    assert it.num_prompt_tokens == 100 and it.num_generation_tokens == 1
    assert it.time_to_first_tokens_iter == [pytest.approx(plan.end_s)]
