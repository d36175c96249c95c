"""Rendering of report.md, results.json goal checks and docs/BENCHMARKS.md (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_eye.bench.report import report_command
from eagle_eye.bench.report_render import render_json, render_report
from eagle_eye.bench.report_runs import (
    BenchOutcome,
    last_json_object,
    routing_suite,
    run_json_benchmark,
)
from eagle_eye.bench.routing.metrics import METRIC_KEYS
from eagle_eye.bench.routing.report import goal_check, markdown_table, metric_row, render_markdown


def _row(router: str, policy: str, p99: float, errors: int = 0) -> dict[str, object]:
    summary = dict.fromkeys(METRIC_KEYS, 0.5)
    summary.update(ttft_p99_s=p99, errors=errors, requests=100)
    return metric_row(router, policy, summary)


RESULTS = {
    "default_policy": "cost",
    "rows": [
        _row("eagle-eye", "cost", 1.0),
        _row("eagle-eye", "round_robin", 4.0),
        _row("sglang-router", "cache_aware", 1.5),
        _row("vllm-router", "power_of_two", 3.0, errors=2),
    ],
    "config": {
        "mode": "online",
        "workload": "t.jsonl",
        "requests": 100,
        "command": "eagle-eye bench routing --out x",
    },
    "capacity": {
        "capacity_rps": 2.0,
        "engines": 8,
        "mean_request_cost_s": 4.0,
        "trace_rate_rps": 1.0,
        "rate_factor": 1.7,
    },
}


def test_metric_row_has_the_results_json_shape() -> None:
    row = RESULTS["rows"][0]
    assert list(row)[:2] == ["router", "policy"]
    assert all(k in row for k in METRIC_KEYS)


def test_goal_check_compares_default_with_round_robin_and_best_peer() -> None:
    goals = goal_check(RESULTS)
    assert goals["ttft_p99_vs_round_robin"] == 0.25
    assert goals["beats_round_robin_by_2x"] is True
    assert goals["best_peer"] == "sglang-router:cache_aware"
    assert goals["ttft_p99_vs_best_peer"] == pytest.approx(0.667, abs=1e-3)
    assert goals["beats_best_peer_by_20pct"] is True
    assert goals["no_more_errors_than_peers"] is True
    assert goal_check({"default_policy": "cost", "rows": []}) == {}


def test_markdown_table_formats_numbers_and_missing_values() -> None:
    table = markdown_table(
        [{"router": "a", "policy": "b", "ttft_p99_s": 12.3456, "errors": 0, "load_cov": None}]
    )
    lines = table.splitlines()
    assert lines[0].startswith("| router | policy | TTFT p50 (s) | TTFT p99 (s)")
    assert "| a | b | n/a | 12.35 |" in lines[2]


def test_report_md_names_the_default_policy_capacity_and_plots() -> None:
    text = render_markdown(RESULTS, ["/tmp/out/latency_cdf.png"])
    assert "Default policy: `cost`" in text
    assert "Capacity estimate: 2.000 req/s for 8 engines" in text
    assert "![latency_cdf](latency_cdf.png)" in text
    assert "eagle-eye bench routing --out x" in text


def test_render_json_turns_lists_and_objects_of_objects_into_tables() -> None:
    text = render_json(
        {
            "goal_met": True,
            "levels": [{"publishers": 8, "p99_ms": 1.25}, {"publishers": 64, "p99_ms": 2.5}],
            "routers": {"eagle-eye": {"max_rps": 900.0}, "litellm": {"max_rps": 120.0}},
        }
    )
    assert "- goal_met: True" in text
    assert "| publishers | p99_ms |" in text and "| 64 | 2.5 |" in text
    assert "| name | max_rps |" in text and "| litellm | 120 |" in text


def test_last_json_object_skips_log_lines() -> None:
    assert last_json_object('{"a": 1}') == {"a": 1}
    assert last_json_object('log line\n{\n  "b": 2\n}\n') == {"b": 2}
    with pytest.raises(ValueError):
        last_json_object("nothing here")


def test_missing_benchmark_is_skipped_with_a_reason() -> None:
    outcome = run_json_benchmark("nope", "eagle_eye.bench.does_not_exist", "x", timeout_s=5)
    assert outcome.result is None
    assert outcome.skipped is not None and "not available yet" in outcome.skipped


def test_benchmarks_md_has_machine_routing_and_every_benchmark(tmp_path: Path) -> None:
    routing = [
        BenchOutcome(
            name="r1",
            command="eagle-eye bench routing --out d",
            description="Run 1",
            result=RESULTS,
        )
    ]
    others = [
        BenchOutcome(
            name="freshness",
            command="eagle-eye bench freshness --json",
            description="F",
            result={"p99_ms": 1.0},
        ),
        BenchOutcome(
            name="agent",
            command="eagle-eye bench agent --json",
            description="A",
            skipped="not available yet",
        ),
    ]
    text = render_report({"cores": 2, "cpu": "test"}, routing, others, doc_dir=tmp_path)
    assert "- cores: 2" in text
    assert "### Run 1" in text and "| eagle-eye | cost |" in text
    assert "Goal check: ttft_p99_vs_round_robin = 0.25" in text
    assert "## Freshness" in text and "- p99_ms: 1" in text and '"p99_ms": 1.0' in text
    assert "_Not included: not available yet._" in text


def test_routing_suite_covers_the_trace_online_and_every_synthetic_workload() -> None:
    suite = routing_suite("quick", "trace.jsonl")
    names = [e.name for e in suite]
    assert names[0] == "mooncake-online" and "--offline" not in suite[0].args
    for workload in ("system_prompts", "multi_turn", "short_chat", "bursts", "heterogeneous"):
        assert f"{workload}-offline" in names
    assert routing_suite("none", "t") == []
    assert all(isinstance(a, str) for e in suite for a in e.args)


def test_report_names_the_command_it_was_generated_by() -> None:
    assert report_command(["bench", "report", "--routing", "none"]) == (
        "eagle-eye bench report --routing none"
    )
    assert report_command(["-c"]) == "eagle-eye bench report"


def test_every_routing_run_of_the_report_uses_the_same_fleet() -> None:
    for entry in routing_suite("full", "trace.jsonl"):
        args = list(entry.args)
        assert args[args.index("--engines") + 1] == "8"
        assert args[args.index("--load") + 1] == "0.85"
        if "--offline" in args:
            assert "--policies" in args and "--speedup" not in args
