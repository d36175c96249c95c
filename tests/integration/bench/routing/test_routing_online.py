"""End to end: `eagle-eye bench routing` over real HTTP + NATS in front of a simulated fleet.

A tiny slice at a high speedup keeps it under a minute; the full benchmark is a command,
not a test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_eye.bench.peers import available
from eagle_eye.bench.routing.cli import routing
from eagle_eye.bench.routing.trace import load_trace
from support import REPO_ROOT

SLICE = REPO_ROOT / "tests" / "unit" / "bench" / "routing" / "data" / "mooncake_slice.jsonl"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _run(tmp_path: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    out = tmp_path / "out"
    result = CliRunner().invoke(
        routing,
        [
            "--trace",
            str(SLICE),
            "--engines",
            "2",
            "--load",
            "0.5",
            "--speedup",
            "20",
            "--hash-ids-field",
            "eagle_eye_hash_ids",
            "--out",
            str(out),
            *extra,
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    data: dict = json.loads((out / "results.json").read_text())  # type: ignore[type-arg]
    assert (out / "report.md").read_text().startswith("# Routing benchmark")
    assert (out / "latency_cdf.png").stat().st_size > 1000
    assert (out / "engine_load.png").stat().st_size > 1000
    return data


def test_online_replay_through_our_router_measures_every_request(tmp_path: Path) -> None:
    requests = load_trace(SLICE)
    data = _run(tmp_path, "--policies", "default,round_robin", "--peers", "none")
    assert data["default_policy"]
    rows = data["rows"]
    assert [(r["router"], r["policy"]) for r in rows] == [
        ("eagle-eye", "default"),
        ("eagle-eye", "round_robin"),
    ]
    for row in rows:
        assert row["errors"] == 0, row
        assert row["requests"] == len(requests)
        assert 0 < row["ttft_p50_s"] <= row["ttft_p99_s"] <= row["e2e_p99_s"]
        assert row["output_tokens_per_s"] > 0
        # The conversations in the slice share prefixes: some prompt tokens hit the cache.
        assert row["prefix_hit_rate"] is not None and row["prefix_hit_rate"] > 0
        assert row["load_cov"] is not None


@pytest.mark.skipif(
    not available("sglang-router"), reason="sglang-router not installed in the peers venv"
)
def test_online_replay_through_a_peer_router(tmp_path: Path) -> None:
    data = _run(tmp_path, "--policies", "round_robin", "--peers", "sglang-router:cache_aware")
    peer = data["rows"][1]
    assert (peer["router"], peer["policy"]) == ("sglang-router", "cache_aware")
    assert peer["errors"] == 0 and peer["ttft_p99_s"] > 0
