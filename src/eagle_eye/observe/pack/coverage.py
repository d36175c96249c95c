"""Which panels and rules need series that only a real cluster (or a real engine) has.

The integration test scrapes simulated vLLM and SGLang engines, the router and the
exporter. The series below do not come from them: DCGM's memory and profiling fields,
Ascend's npu-exporter, Ray Serve, Ray-hosted vLLM (``ray_vllm_*``), TGI, llama.cpp and
the vLLM features the simulator does not model (LoRA, speculative decoding, ``n``). The
integration test serves them from a synthetic target shaped like the real exporters
(labels included, e.g. DCGM's ``pod`` becoming ``exported_pod``), and the promtool tests in
``deploy/prometheus/tests`` check the recording rules over the same sources with exact
expected values. ``docs/monitoring.md`` prints this list.
"""

from __future__ import annotations

from typing import Final

REAL_CLUSTER_PANELS: Final[dict[tuple[str, str], str]] = {
    ("eagle-eye-engine", "Request n"): "vllm:request_params_n (the simulator sends n=1 only)",
    ("eagle-eye-engine", "LoRA adapters running / waiting"): "vllm:lora_requests_info (LoRA)",
    ("eagle-eye-engine", "Speculative decoding acceptance"): "vllm:spec_decode_* (draft model)",
    ("eagle-eye-kv-accelerator", "Accelerator memory used"): "DCGM FB_USED/FB_FREE, npu HBM",
    ("eagle-eye-kv-accelerator", "Tensor-core activity"): "DCGM profiling metrics",
    ("eagle-eye-ray-serve", "HTTP requests"): "ray_serve_num_http_requests_total",
    ("eagle-eye-ray-serve", "HTTP errors"): "ray_serve_num_http_error_requests_total",
    ("eagle-eye-ray-serve", "Processing latency"): "ray_serve_deployment_processing_latency_ms",
    ("eagle-eye-ray-serve", "Queued and ongoing"): "ray_serve_* queue gauges",
    ("eagle-eye-ray-serve", "Healthy replicas"): "ray_serve_deployment_replica_healthy",
    ("eagle-eye-ray-serve", "Model load latency"): "ray_serve_multiplexed_model_load_latency_ms",
    ("eagle-eye-ray-serve", "Queue state"): "ray_vllm_* (Ray Serve LLM)",
    ("eagle-eye-ray-serve", "KV-cache usage"): "ray_vllm_* (Ray Serve LLM)",
    ("eagle-eye-ray-serve", "TTFT p99"): "ray_vllm_* (Ray Serve LLM)",
}

REAL_CLUSTER_RULES: Final[dict[str, str]] = {
    'engine_kind="ray-vllm"': "every eagle_eye.engine rule for Ray Serve LLM (ray_vllm_*)",
    'engine_kind="tgi"': "every eagle_eye.engine rule for TGI (tgi_*)",
    'engine_kind="llamacpp"': "every eagle_eye.engine rule for llama.cpp (llamacpp:*)",
    'accelerator="ascend-npu"': "Ascend npu-exporter utilisation and HBM",
    "eagle_eye:accelerator_memory_used:ratio": "DCGM framebuffer / npu HBM memory",
    'source="ray-serve"': "Ray Serve HTTP error ratio",
}
