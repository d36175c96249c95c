"""Metric definitions of results.json rows, and the streaming client's SSE timing (pure)."""

from __future__ import annotations

import json
import math
from array import array

import numpy as np
import pytest

from eagle_eye.bench.routing.metrics import (
    METRIC_KEYS,
    LoadSample,
    RequestResult,
    coefficient_of_variation,
    error_kinds,
    load_cov,
    load_grid,
    prefix_hit_rate,
    quantile,
    summarize,
)
from eagle_eye.bench.routing.replay import ReplayConfig, StreamParser, request_body
from eagle_eye.bench.routing.trace import TraceRequest, prompt_text


@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 0.9, 0.99, 1.0])
def test_quantile_matches_numpy_linear_interpolation(q: float) -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))
    assert quantile([], q) is None


def _ok(i: int, arrival: float, ttft: float, e2e: float, tokens: int, gap: float) -> RequestResult:
    return RequestResult(
        index=i,
        arrival_s=arrival,
        ttft_s=ttft,
        e2e_s=e2e,
        output_tokens=tokens,
        itls_s=array("d", [gap] * (tokens - 1)),
    )


def test_summarize_computes_latency_throughput_and_errors() -> None:
    results = [
        _ok(0, 0.0, 0.1, 1.0, 10, 0.1),
        _ok(1, 1.0, 0.3, 2.0, 20, 0.05),
        RequestResult(index=2, arrival_s=2.0, error="http_503: no instance"),
        _ok(3, 3.0, 0.2, 1.0, 10, 0.1),
    ]
    row = summarize(results)
    assert set(METRIC_KEYS) <= set(row)
    assert row["ttft_p50_s"] == pytest.approx(0.2)
    assert row["ttft_p99_s"] == pytest.approx(float(np.quantile([0.1, 0.3, 0.2], 0.99)))
    assert row["e2e_p99_s"] == pytest.approx(float(np.quantile([1.0, 2.0, 1.0], 0.99)))
    assert row["itl_p99_s"] == pytest.approx(0.1)
    # Span: first arrival 0 to the last completion, 3.0 + 1.0 = 4.0 s.
    assert row["throughput_rps"] == pytest.approx(3 / 4.0)
    assert row["output_tokens_per_s"] == pytest.approx(40 / 4.0)
    assert row["errors"] == 1
    assert row["requests"] == 4
    assert error_kinds(results) == {"http_503": 1}


def test_summarize_with_no_success_reports_zero_throughput_and_no_latency() -> None:
    row = summarize([RequestResult(index=0, arrival_s=0.0, error="x: y")])
    assert row["ttft_p99_s"] is None
    assert row["throughput_rps"] == 0.0
    assert row["errors"] == 1


def test_load_grid_holds_each_engines_last_sample() -> None:
    samples = [
        LoadSample(0.0, "a", 1, 0),
        LoadSample(0.5, "b", 2, 1),
        LoadSample(1.5, "a", 4, 0),
    ]
    times, grid = load_grid(samples, step_s=1.0)
    assert times == [0.0, 1.0]
    assert grid == {"a": [1, 1], "b": [0, 3]}


def test_load_cov_is_zero_when_even_and_sqrt_n_minus_1_when_one_engine_has_all() -> None:
    even = [LoadSample(t, e, 5, 0) for t in (0.0, 1.0, 2.0) for e in "abcd"]
    assert load_cov(even) == 0.0
    skewed = [LoadSample(t, e, 8 if e == "a" else 0, 0) for t in (0.0, 1.0) for e in "abcd"]
    assert load_cov(skewed) == pytest.approx(math.sqrt(3))
    assert coefficient_of_variation([]) is None


def test_prefix_hit_rate_uses_counter_deltas_over_the_window() -> None:
    samples = [
        LoadSample(0.0, "a", 0, 0, 1000, 500),  # counters from before the window
        LoadSample(5.0, "a", 0, 0, 3000, 1500),
        LoadSample(0.0, "b", 0, 0, 0, 0),
        LoadSample(5.0, "b", 0, 0, 2000, 0),
        LoadSample(1.0, "c", 0, 0),  # engine without prefix counters: ignored
    ]
    assert prefix_hit_rate(samples) == pytest.approx(1000 / 4000)
    assert prefix_hit_rate([]) is None


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n"


def test_stream_parser_times_first_token_gaps_and_end_in_simulated_seconds() -> None:
    parser = StreamParser(sent_mono_s=100.0)
    parser.feed(b": keep-alive\n", 100.0)
    parser.feed(_sse({"choices": [{"text": ""}]}), 100.05)  # role/empty chunk: no token
    parser.feed(_sse({"choices": [{"text": " a"}]}), 100.1)
    parser.feed(_sse({"choices": [{"text": " b"}]}), 100.3)
    parser.feed(_sse({"choices": [{"delta": {"content": " c"}}]}), 100.4)
    parser.feed(_sse({"choices": [], "usage": {"completion_tokens": 3}}), 100.4)
    parser.feed(b"data: [DONE]\n", 100.41)
    result = parser.result(index=7, arrival_s=2.0, speedup=10.0)
    assert result.ok and parser.done
    assert result.ttft_s == pytest.approx(1.0)
    assert result.e2e_s == pytest.approx(4.0)
    assert list(result.itls_s) == pytest.approx([2.0, 1.0])
    assert result.output_tokens == 3


def test_stream_parser_reports_error_events_and_empty_streams() -> None:
    parser = StreamParser(sent_mono_s=0.0)
    parser.feed(_sse({"choices": [{"text": "x"}]}), 0.1)
    parser.feed(_sse({"error": {"message": "engine died"}}), 0.2)
    assert parser.result(0, 0.0, 1.0).error == "stream_error: engine died"
    empty = StreamParser(sent_mono_s=0.0).result(1, 0.0, 1.0)
    assert empty.error is not None and empty.error.startswith("no_tokens")


def test_request_body_carries_text_exact_length_and_optional_block_ids() -> None:
    request = TraceRequest(
        arrival_s=0.0, input_tokens=600, output_tokens=42, hash_ids=(3, 4), session="s1"
    )
    plain = request_body(request, ReplayConfig(base_url="http://x", model="m"))
    assert plain["prompt"] == prompt_text(request)
    assert plain["max_tokens"] == plain["min_tokens"] == 42
    assert plain["ignore_eos"] is True and plain["stream"] is True
    assert plain["user"] == "s1"
    assert "hash_ids" not in plain
    with_ids = request_body(
        request, ReplayConfig(base_url="http://x", model="m", hash_ids_field="hash_ids")
    )
    assert with_ids["hash_ids"] == [3, 4]


def test_engine_e2e_is_read_from_the_engines_metrics_page() -> None:
    from eagle_eye.bench.routing.online import parse_e2e_sum_count

    page = (
        "# HELP vllm:e2e_request_latency_seconds x\n"
        'vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 2\n'
        'vllm:e2e_request_latency_seconds_sum{model_name="m"} 3.5\n'
        'vllm:e2e_request_latency_seconds_count{model_name="m"} 2.0\n'
    )
    assert parse_e2e_sum_count(page) == (3.5, 2)
