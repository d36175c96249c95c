"""The simulated engine's ``/metrics``: the spec tables yield vLLM's and SGLang's series."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from eagle_eye.sim.cost_model import get_profile
from eagle_eye.sim.engine import EngineCore
from eagle_eye.sim.metrics import EngineMetrics, build_1_2_5_buckets
from eagle_eye.sim.request import SimRequest

PROFILE = get_profile("tiny-cpu")

VLLM_FAMILIES = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("vllm:num_requests_running", "gauge"),
    ("vllm:num_requests_waiting", "gauge"),
    ("vllm:kv_cache_usage_perc", "gauge"),
    ("vllm:cache_config_info", "gauge"),
    ("vllm:prompt_tokens", "counter"),
    ("vllm:generation_tokens", "counter"),
    ("vllm:prefix_cache_queries", "counter"),
    ("vllm:prefix_cache_hits", "counter"),
    ("vllm:num_preemptions", "counter"),
    ("vllm:request_success", "counter"),
    ("vllm:time_to_first_token_seconds", "histogram"),
    ("vllm:inter_token_latency_seconds", "histogram"),
    ("vllm:request_time_per_output_token_seconds", "histogram"),
    ("vllm:e2e_request_latency_seconds", "histogram"),
    ("vllm:request_queue_time_seconds", "histogram"),
    ("vllm:request_prefill_time_seconds", "histogram"),
    ("vllm:request_decode_time_seconds", "histogram"),
    ("vllm:request_inference_time_seconds", "histogram"),
    ("vllm:request_prompt_tokens", "histogram"),
    ("vllm:request_generation_tokens", "histogram"),
    ("vllm:request_params_max_tokens", "histogram"),
    ("vllm:iteration_tokens_total", "histogram"),
]
SGLANG_FAMILIES = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("sglang:num_running_reqs", "gauge"),
    ("sglang:num_queue_reqs", "gauge"),
    ("sglang:token_usage", "gauge"),
    ("sglang:cache_hit_rate", "gauge"),
    ("sglang:gen_throughput", "gauge"),
    ("sglang:utilization", "gauge"),
    ("sglang:max_total_num_tokens", "gauge"),
    ("sglang:time_to_first_token_seconds", "histogram"),
    ("sglang:inter_token_latency_seconds", "histogram"),
    ("sglang:e2e_request_latency_seconds", "histogram"),
    ("sglang:queue_time_seconds", "histogram"),
    ("sglang:prompt_tokens", "counter"),
    ("sglang:generation_tokens", "counter"),
    ("sglang:num_requests", "counter"),
]


def serve_one(flavor: str) -> dict[str, float]:
    """Run one 100-token prompt for 5 tokens through a fresh engine; sample name -> value."""
    core = EngineCore(PROFILE)
    metrics = EngineMetrics(flavor=flavor, model="m", engine_index=0, core=core, gpu_uuid="G")
    core.add_request(SimRequest("r0", prompt_tokens=100, max_tokens=5))
    while (plan := core.plan_step(core.now_s)) is not None:
        metrics.observe_step(core.complete(plan))
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics.render(gen_throughput=2.5).decode()):
        for s in family.samples:
            key = s.name + "".join(f"|{k}={v}" for k, v in sorted(s.labels.items()) if k != "le")
            if "le" not in s.labels:
                out[key] = s.value
    return out


@pytest.mark.parametrize(
    ("flavor", "families"), [("vllm", VLLM_FAMILIES), ("sglang", SGLANG_FAMILIES)]
)
def test_series_are_exposed_in_the_engines_order(
    flavor: str, families: list[tuple[str, str]]
) -> None:
    core = EngineCore(PROFILE)
    text = EngineMetrics(flavor=flavor, model="m", engine_index=0, core=core, gpu_uuid="G")
    exposed = [
        (f.name, f.type)
        for f in text_string_to_metric_families(text.render().decode())
        if not f.name.endswith("_created")
    ]
    assert exposed == families


def test_a_finished_request_lands_in_every_vllm_per_request_series() -> None:
    got = serve_one("vllm")
    labels = "|engine=0|model_name=m"
    for name in (
        "e2e_request_latency_seconds",
        "request_queue_time_seconds",
        "request_prefill_time_seconds",
        "request_decode_time_seconds",
        "request_inference_time_seconds",
        "request_prompt_tokens",
        "request_generation_tokens",
        "request_params_max_tokens",
        "request_time_per_output_token_seconds",
        "time_to_first_token_seconds",
    ):
        assert got[f"vllm:{name}_count{labels}"] == 1, name
    assert got[f"vllm:request_prompt_tokens_sum{labels}"] == 100
    assert got[f"vllm:request_generation_tokens_sum{labels}"] == 5
    assert got[f"vllm:inter_token_latency_seconds_count{labels}"] == 4
    assert got["vllm:request_success_total|engine=0|finished_reason=length|model_name=m"] == 1
    assert got["vllm:request_success_total|engine=0|finished_reason=stop|model_name=m"] == 0
    assert got[f"vllm:prompt_tokens_total{labels}"] == 100
    assert got[f"vllm:generation_tokens_total{labels}"] == 5


def test_a_finished_request_lands_in_the_sglang_series() -> None:
    got = serve_one("sglang")
    labels = "|dp_rank=0|model_name=m|tp_rank=0"
    assert got[f"sglang:num_requests_total{labels}"] == 1
    assert got[f"sglang:e2e_request_latency_seconds_count{labels}"] == 1
    assert got[f"sglang:queue_time_seconds_count{labels}"] == 1
    assert got[f"sglang:inter_token_latency_seconds_count{labels}"] == 4
    assert got[f"sglang:gen_throughput{labels}"] == 2.5
    assert got[f"sglang:max_total_num_tokens{labels}"] == PROFILE.kv_capacity_tokens


def test_length_and_iteration_buckets_follow_the_profile() -> None:
    got = serve_one("vllm")
    core = EngineCore(PROFILE)
    metrics = EngineMetrics(flavor="vllm", model="m", engine_index=0, core=core, gpu_uuid="G")
    text = metrics.render().decode()
    bounds = {
        f.name: [s.labels["le"] for s in f.samples if s.name.endswith("_bucket")]
        for f in text_string_to_metric_families(text)
        if f.type == "histogram"
    }
    assert bounds["vllm:request_prompt_tokens"][:-1] == [
        str(float(b)) for b in build_1_2_5_buckets(PROFILE.max_model_len)
    ]
    iteration = [float(b) for b in bounds["vllm:iteration_tokens_total"][:-1]]
    assert iteration and max(iteration) <= PROFILE.max_num_batched_tokens
    assert got["vllm:iteration_tokens_total_count|engine=0|model_name=m"] >= 2
