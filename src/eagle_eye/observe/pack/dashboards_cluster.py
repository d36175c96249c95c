"""Dashboards over series only a real cluster has: KV cache vs GPU/NPU, Ray Serve."""

# ruff: noqa: E501  -- a PromQL query reads (and greps) best on one line.

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.grafana import Dashboard, Panel, Row, Variable, q

RATE: Final = "$__rate_interval"
FA: Final = 'namespace=~"$namespace", pod=~"$instance"'
KV_ACCELERATOR: Final = Dashboard(
    uid="eagle-eye-kv-accelerator",
    title="Eagle Eye / KV cache vs accelerator",
    description=(
        "Seed 002's joint analysis: KV-cache occupancy next to real GPU (DCGM) or NPU "
        "(Ascend npu-exporter) utilisation per pod. Here the 'instance' variable selects pods."
    ),
    variables=(
        Variable("namespace", "namespace", "eagle_eye:pod_kv_cache_usage:ratio"),
        Variable(
            "model",
            "model_name",
            "eagle_eye:pod_kv_cache_usage:ratio",
            (("namespace", "namespace"),),
        ),
        Variable(
            "instance",
            "pod",
            "eagle_eye:pod_kv_cache_usage:ratio",
            (("namespace", "namespace"), ("model_name", "model")),
        ),
    ),
    rows=(
        Row(
            "Per pod",
            (
                Panel(
                    "KV-cache usage",
                    "How full each pod's KV cache is.",
                    (
                        q(
                            f'eagle_eye:pod_kv_cache_usage:ratio{{{FA}, model_name=~"$model"}}',
                            "{{pod}}",
                        ),
                    ),
                    unit="percentunit",
                    max_value=1,
                ),
                Panel(
                    "Accelerator utilisation",
                    "GPU/NPU busy share (DCGM_FI_DEV_GPU_UTIL, npu_chip_info_utilization); "
                    "simulated='true' marks the simulator's stand-in.",
                    (
                        q(
                            f"eagle_eye:accelerator_utilization:ratio{{{FA}}}",
                            "{{pod}} {{accelerator}}",
                        ),
                    ),
                    unit="percentunit",
                    max_value=1,
                ),
                Panel(
                    "KV minus compute",
                    "KV usage minus accelerator utilisation: high = memory-bound (KV full, "
                    "compute idle); negative = compute-bound.",
                    (
                        q(
                            f'eagle_eye:pod_kv_minus_accelerator_utilization:ratio{{{FA}, model_name=~"$model"}}',
                            "{{pod}}",
                        ),
                    ),
                    unit="percentunit",
                ),
                Panel(
                    "Accelerator memory used",
                    "Framebuffer / HBM in use per pod (vLLM preallocates, so this sits high).",
                    (
                        q(
                            f"eagle_eye:accelerator_memory_used:ratio{{{FA}}}",
                            "{{pod}} {{accelerator}}",
                        ),
                    ),
                    unit="percentunit",
                    max_value=1,
                ),
                Panel(
                    "Tensor-core activity",
                    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: the share of cycles the tensor pipes work; "
                    "a truer compute signal than GPU_UTIL (needs DCGM profiling metrics).",
                    (
                        q(
                            'avg by (exported_pod) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{exported_namespace=~"$namespace", exported_pod=~"$instance"})',
                            "{{exported_pod}}",
                        ),
                    ),
                    unit="percentunit",
                    max_value=1,
                ),
                Panel(
                    "Queue vs accelerator",
                    "Waiting requests next to accelerator utilisation: a queue on an idle "
                    "accelerator means a stuck engine.",
                    (
                        q(
                            f'eagle_eye:pod_requests_waiting{{{FA}, model_name=~"$model"}}',
                            "{{pod}} waiting",
                        ),
                        q(
                            f"eagle_eye:pod_accelerator_utilization:ratio{{{FA}}} * 100",
                            "{{pod}} utilisation %",
                        ),
                    ),
                ),
            ),
        ),
        Row(
            "Pods now",
            (
                Panel(
                    "KV cache and utilisation by pod",
                    "One row per pod: KV usage next to accelerator utilisation, now.",
                    (
                        q(
                            f'eagle_eye:pod_kv_cache_usage:ratio{{{FA}, model_name=~"$model"}}',
                            "kv",
                            instant=True,
                        ),
                        q(
                            f"eagle_eye:pod_accelerator_utilization:ratio{{{FA}}}",
                            "utilisation",
                            instant=True,
                        ),
                    ),
                    kind="table",
                    width=24,
                ),
            ),
        ),
    ),
)

FR: Final = 'namespace=~"$namespace", application=~"$model", instance=~"$instance"'
RAY_SERVE: Final = Dashboard(
    uid="eagle-eye-ray-serve",
    title="Eagle Eye / Ray Serve",
    description=(
        "Ray Serve applications (seed 004): HTTP traffic, replica queues and health, model "
        "loading, and the vLLM engines inside (ray_vllm_*). 'model' selects the application."
    ),
    variables=(
        Variable("namespace", "namespace", "ray_serve_deployment_replica_healthy"),
        Variable(
            "model",
            "application",
            "ray_serve_deployment_replica_healthy",
            (("namespace", "namespace"),),
        ),
        Variable(
            "instance",
            "instance",
            "ray_serve_deployment_replica_healthy",
            (("namespace", "namespace"), ("application", "model")),
        ),
    ),
    rows=(
        Row(
            "Serve",
            (
                Panel(
                    "HTTP requests",
                    "Requests per second by application and route.",
                    (
                        q(
                            f"sum by (application, route) (rate(ray_serve_num_http_requests_total{{{FR}}}[{RATE}]))",
                            "{{application}} {{route}}",
                        ),
                    ),
                    unit="reqps",
                ),
                Panel(
                    "HTTP errors",
                    "Error responses per second by application and code.",
                    (
                        q(
                            f"sum by (application, error_code) (rate(ray_serve_num_http_error_requests_total{{{FR}}}[{RATE}]))",
                            "{{application}} {{error_code}}",
                        ),
                    ),
                    unit="reqps",
                ),
                Panel(
                    "Processing latency",
                    "ray_serve_deployment_processing_latency_ms p50/p99 per deployment.",
                    tuple(
                        q(
                            f"histogram_quantile({x}, sum by (deployment, le) (rate(ray_serve_deployment_processing_latency_ms_bucket{{{FR}}}[{RATE}])))",
                            f"{{{{deployment}}}} p{round(x * 100)}",
                        )
                        for x in (0.5, 0.99)
                    ),
                    unit="ms",
                ),
                Panel(
                    "Queued and ongoing",
                    "Queries queued in deployments, processing in replicas, open HTTP requests.",
                    (
                        q(
                            f"sum by (deployment) (ray_serve_deployment_queued_queries{{{FR}}})",
                            "{{deployment}} queued",
                        ),
                        q(
                            f"sum by (deployment) (ray_serve_replica_processing_queries{{{FR}}})",
                            "{{deployment}} processing",
                        ),
                        q(
                            'sum(ray_serve_num_ongoing_http_requests{namespace=~"$namespace", instance=~"$instance"})',
                            "ongoing HTTP",
                        ),
                    ),
                ),
                Panel(
                    "Healthy replicas",
                    "Replicas reporting healthy per deployment.",
                    (
                        q(
                            f"sum by (deployment) (ray_serve_deployment_replica_healthy{{{FR}}})",
                            "{{deployment}}",
                        ),
                    ),
                ),
                Panel(
                    "Model load latency",
                    "Multiplexed model load time p90 per deployment: the cost of a cold model.",
                    (
                        q(
                            f"histogram_quantile(0.9, sum by (deployment, le) (rate(ray_serve_multiplexed_model_load_latency_ms_bucket{{{FR}}}[{RATE}])))",
                            "{{deployment}} p90",
                        ),
                    ),
                    unit="ms",
                ),
            ),
        ),
        Row(
            "vLLM inside Ray (ray_vllm_*)",
            (
                Panel(
                    "Queue state",
                    "Running and waiting requests of the Ray-hosted vLLM engines.",
                    (
                        q(
                            'eagle_eye:requests_running{engine_kind="ray-vllm", namespace=~"$namespace"}',
                            "{{pod}} running",
                        ),
                        q(
                            'eagle_eye:requests_waiting{engine_kind="ray-vllm", namespace=~"$namespace"}',
                            "{{pod}} waiting",
                        ),
                    ),
                ),
                Panel(
                    "KV-cache usage",
                    "KV cache in use per Ray-hosted engine.",
                    (
                        q(
                            'eagle_eye:kv_cache_usage:ratio{engine_kind="ray-vllm", namespace=~"$namespace"}',
                            "{{pod}}",
                        ),
                    ),
                    unit="percentunit",
                    max_value=1,
                ),
                Panel(
                    "TTFT p99",
                    "Time to first token of the Ray-hosted engines.",
                    (
                        q(
                            'eagle_eye:ttft_seconds:p99_5m{engine_kind="ray-vllm", namespace=~"$namespace"}',
                            "{{pod}}",
                        ),
                    ),
                    unit="s",
                ),
            ),
        ),
    ),
)
