"""The offline driver: our policy code against the virtual-time simulator (in-process)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from eagle_eye.bench.routing.metrics import summarize
from eagle_eye.bench.routing.offline import run_offline
from eagle_eye.bench.routing.trace import load_trace, scale_rate
from eagle_eye.bench.routing.workloads import system_prompts

SLICE = Path(__file__).parent / "data" / "mooncake_slice.jsonl"


def test_round_robin_spreads_requests_evenly_and_all_finish() -> None:
    requests = load_trace(SLICE)
    run = run_offline("round_robin", requests, engines=4, speed_factors=[1.0] * 4)
    assert len(run.results) == len(requests)
    assert all(
        r.ok and r.output_tokens == q.output_tokens
        for r, q in zip(run.results, requests, strict=True)
    )
    counts = Counter(r.engine for r in run.results)
    assert sorted(counts.values()) == [6, 6, 6, 6]
    row = summarize(run.results, run.samples)
    assert row["errors"] == 0 and row["ttft_p50_s"] is not None
    assert {s.engine for s in run.samples} == set(counts)


def test_default_policy_keeps_shared_prefixes_warm_unlike_round_robin() -> None:
    requests = scale_rate(system_prompts(duration_s=60.0, rate_rps=2.0, groups=8, seed=5), 1.0)
    rr = summarize(*_run("round_robin", requests))
    default = summarize(*_run("default", requests))
    assert default["prefix_hit_rate"] > rr["prefix_hit_rate"]
    assert default["errors"] == rr["errors"] == 0


def test_offline_runs_are_deterministic() -> None:
    requests = load_trace(SLICE)
    a = summarize(*_run("default", requests))
    b = summarize(*_run("default", requests))
    assert a == b


def _run(policy: str, requests: list) -> tuple:  # type: ignore[type-arg]
    run = run_offline(policy, requests, engines=4, speed_factors=[1.0, 1.0, 1.0, 0.5])
    return run.results, run.samples
