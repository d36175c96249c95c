"""A scrape target shaped like the exporters only a real cluster has (test helper).

DCGM's memory and profiling fields, Ascend's npu-exporter, Ray Serve, Ray-hosted vLLM,
TGI, llama.cpp and the vLLM features the simulator does not model: the series that
``eagle_eye.observe.pack.coverage`` lists. Values are pure functions of the time since
start (counters and histograms grow at fixed rates), written in the text exposition format
by hand so names keep exactly the real exporters' spelling (``tgi_request_success`` has
no ``_total``; DCGM's ``pod`` label becomes ``exported_pod`` when scraped).
"""

from __future__ import annotations

import time
from typing import Final

from aiohttp import web

Labels = dict[str, str]

VLLM_POD: Final = {"pod": "sim-vllm-0", "namespace": "ml"}
GAUGES: Final[tuple[tuple[str, Labels, float], ...]] = (
    ("DCGM_FI_DEV_FB_USED", {"gpu": "0", **VLLM_POD}, 60000),
    ("DCGM_FI_DEV_FB_FREE", {"gpu": "0", **VLLM_POD}, 20000),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", {"gpu": "0", **VLLM_POD}, 0.35),
    (
        "npu_chip_info_utilization",
        {"id": "0", "model_name": "Ascend910B", "pod_name": "npu-0", "namespace": "ml"},
        40,
    ),
    ("npu_chip_info_hbm_used_memory", {"id": "0", "pod_name": "npu-0", "namespace": "ml"}, 16384),
    ("npu_chip_info_hbm_total_memory", {"id": "0", "pod_name": "npu-0", "namespace": "ml"}, 65536),
    (
        "ray_serve_deployment_replica_healthy",
        {"application": "llm", "deployment": "LLMServer", "replica": "r1"},
        1,
    ),
    ("ray_serve_deployment_queued_queries", {"application": "llm", "deployment": "LLMServer"}, 2),
    (
        "ray_serve_replica_processing_queries",
        {"application": "llm", "deployment": "LLMServer", "replica": "r1"},
        3,
    ),
    ("ray_serve_num_ongoing_http_requests", {"node_id": "n1"}, 4),
    ("ray_vllm_num_requests_running", {"model_name": "ray-llama"}, 5),
    ("ray_vllm_num_requests_waiting", {"model_name": "ray-llama"}, 1),
    ("ray_vllm_kv_cache_usage_perc", {"model_name": "ray-llama"}, 0.6),
    ("tgi_batch_current_size", {}, 3),
    ("tgi_queue_size", {}, 1),
    ("llamacpp:requests_processing", {}, 1),
    ("llamacpp:requests_deferred", {}, 0),
    ("llamacpp:kv_cache_usage_ratio", {}, 0.3),
    (
        "vllm:lora_requests_info",
        {
            "model_name": "sim-llama",
            "running_lora_adapters": "sql-lora",
            "waiting_lora_adapters": "",
            "max_lora": "4",
        },
        1.7e9,
    ),
)
# name, labels, increase per second
COUNTERS: Final[tuple[tuple[str, Labels, float], ...]] = (
    (
        "ray_serve_num_http_requests_total",
        {"application": "llm", "route": "/v1", "method": "POST"},
        10,
    ),
    (
        "ray_serve_num_http_error_requests_total",
        {"application": "llm", "route": "/v1", "error_code": "500"},
        0.1,
    ),
    ("ray_vllm_prompt_tokens_total", {"model_name": "ray-llama"}, 500),
    ("ray_vllm_generation_tokens_total", {"model_name": "ray-llama"}, 200),
    ("ray_vllm_request_success_total", {"model_name": "ray-llama", "finished_reason": "stop"}, 2),
    ("ray_vllm_num_preemptions_total", {"model_name": "ray-llama"}, 0.05),
    ("ray_vllm_prefix_cache_queries_total", {"model_name": "ray-llama"}, 500),
    ("ray_vllm_prefix_cache_hits_total", {"model_name": "ray-llama"}, 200),
    ("tgi_request_success", {}, 2),
    ("llamacpp:prompt_tokens_total", {}, 100),
    ("llamacpp:tokens_predicted_total", {}, 40),
    ("vllm:spec_decode_num_accepted_tokens_total", {"model_name": "sim-llama"}, 60),
    ("vllm:spec_decode_num_draft_tokens_total", {"model_name": "sim-llama"}, 100),
    ("vllm:spec_decode_num_drafts_total", {"model_name": "sim-llama"}, 25),
)
# name, labels, bucket bounds, share of observations at or under each bound, obs/s, mean
_LAT_S = (0.05, 0.1, 0.5, 1.0, 5.0)
_CUM = (0.2, 0.5, 0.8, 0.95, 1.0)
HISTOGRAMS: Final[
    tuple[tuple[str, Labels, tuple[float, ...], tuple[float, ...], float, float], ...]
] = (
    (
        "ray_serve_deployment_processing_latency_ms",
        {"application": "llm", "deployment": "LLMServer"},
        (50, 100, 500, 1000, 5000),
        _CUM,
        10,
        300,
    ),
    (
        "ray_serve_multiplexed_model_load_latency_ms",
        {"application": "llm", "deployment": "LLMServer"},
        (1000, 10000, 60000, 120000, 300000),
        _CUM,
        0.05,
        20000,
    ),
    ("ray_vllm_time_to_first_token_seconds", {"model_name": "ray-llama"}, _LAT_S, _CUM, 2, 0.3),
    ("ray_vllm_inter_token_latency_seconds", {"model_name": "ray-llama"}, _LAT_S, _CUM, 100, 0.05),
    ("ray_vllm_e2e_request_latency_seconds", {"model_name": "ray-llama"}, _LAT_S, _CUM, 2, 2.0),
    ("ray_vllm_request_queue_time_seconds", {"model_name": "ray-llama"}, _LAT_S, _CUM, 2, 0.1),
    ("tgi_request_input_length", {}, (16, 64, 256, 1024, 4096), _CUM, 2, 200),
    ("tgi_request_generated_tokens", {}, (16, 64, 256, 1024, 4096), _CUM, 2, 100),
    ("tgi_request_mean_time_per_token_duration", {}, _LAT_S, _CUM, 2, 0.05),
    ("tgi_request_duration", {}, _LAT_S, _CUM, 2, 2.0),
    ("tgi_request_queue_duration", {}, _LAT_S, _CUM, 2, 0.1),
    ("vllm:request_params_n", {"model_name": "sim-llama"}, (1, 2, 5, 10, 20), _CUM, 2, 1.5),
)


def _fmt(name: str, labels: Labels, value: float) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {value!r}" if inner else f"{name} {value!r}"


def exposition(elapsed_s: float) -> str:
    """The whole /metrics text ``elapsed_s`` seconds after start. Pure."""
    t = max(elapsed_s, 0.0) + 1.0
    lines = [_fmt(name, labels, float(v)) for name, labels, v in GAUGES]
    lines += [_fmt(name, labels, per_s * t) for name, labels, per_s in COUNTERS]
    for name, labels, bounds, cumulative, per_s, mean in HISTOGRAMS:
        count = per_s * t
        for bound, share in zip(bounds, cumulative, strict=True):
            lines.append(
                _fmt(f"{name}_bucket", {**labels, "le": repr(float(bound))}, count * share)
            )
        lines.append(_fmt(f"{name}_bucket", {**labels, "le": "+Inf"}, count))
        lines.append(_fmt(f"{name}_count", labels, count))
        lines.append(_fmt(f"{name}_sum", labels, count * mean))
    return "\n".join(lines) + "\n"


class SyntheticTarget:
    """An aiohttp server on 127.0.0.1, port 0, serving ``exposition`` on /metrics."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=exposition(time.monotonic() - self._start))

    async def start(self) -> SyntheticTarget:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
