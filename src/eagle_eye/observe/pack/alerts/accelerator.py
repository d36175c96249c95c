"""The accelerator next to the engine: a stuck engine, or one limited by memory, not compute.

Both alerts join engine series with GPU (DCGM) or NPU (Ascend npu-exporter) utilisation per
pod through the ``eagle_eye:pod_*`` recording rules.
"""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.alerts.model import (
    SGLANG_POD,
    Alert,
    Case,
    label,
    percent,
    selector,
    vllm_series,
)

IDLE_QUEUE_WAITING_REQUESTS_MIN: Final = 5
"""Waiting requests that prove there is work: more than a stray arrival between steps, so
an idle accelerator next to them cannot be a quiet moment."""

IDLE_ACCELERATOR_UTILIZATION_RATIO: Final = 0.1
"""Accelerator utilisation (0-1) below which it counts as idle: a decoding engine keeps its
GPU/NPU well above 10 % busy; under that with a queue, nothing is being scheduled."""

KV_FULL_RATIO: Final = 0.9
"""KV-cache usage (0-1) at which the cache counts as full (as for ``EagleEyeKVCacheSaturated``)."""

LOW_COMPUTE_UTILIZATION_RATIO: Final = 0.3
"""Accelerator utilisation (0-1) below which a full KV cache means memory is the limit: a
compute-bound engine with a full cache runs its accelerator well above 30 %."""

_DCGM: Final = {
    "namespace": "gpu-operator",
    "pod": "dcgm-exporter-x1",
    "exported_namespace": "ml",
    "exported_pod": "vllm-0",
    "gpu": "0",
    "modelName": "NVIDIA H100",
}
_NPU: Final = {"namespace": "ml", "pod_name": "sgl-0", "id": "0", "model_name": "Ascend910B"}
_UTIL: Final = "eagle_eye:pod_accelerator_utilization:ratio"

ACCELERATOR_IDLE_WHILE_QUEUED: Final = Alert(
    name="EagleEyeAcceleratorIdleWhileQueued",
    expr=(
        f"eagle_eye:pod_requests_waiting > {IDLE_QUEUE_WAITING_REQUESTS_MIN} "
        f"and on (namespace, pod) {_UTIL} < {IDLE_ACCELERATOR_UTILIZATION_RATIO}"
    ),
    for_="5m",
    severity="critical",
    summary=f"{label('pod')} has a queue but its accelerator is idle",
    description=(
        f"Requests wait on {label('pod')} while its GPU/NPU does almost nothing: "
        "the engine is stuck (hung collective, dead worker, deadlocked scheduler)."
    ),
    runbook=(
        "Take a stack dump (py-spy dump) of the engine, check NCCL/HCCL logs, then "
        "restart the pod; the router drains it once it stops publishing."
    ),
    fires=Case(
        series=(
            vllm_series("vllm:num_requests_waiting", "10x15"),
            (selector("DCGM_FI_DEV_GPU_UTIL", _DCGM), "2x15"),
        ),
        eval_time="10m",
        fired=({"namespace": "ml", "pod": "vllm-0", "model_name": "llama"},),
    ),
    silent=Case(
        series=(
            vllm_series("vllm:num_requests_waiting", "10x15"),
            (selector("DCGM_FI_DEV_GPU_UTIL", _DCGM), "85x15"),
        ),
        eval_time="10m",
    ),
)


def _sglang_with_npu(npu_utilization_pct: int) -> tuple[tuple[str, str], ...]:
    return (
        (selector("sglang:token_usage", {**SGLANG_POD, "tp_rank": "0"}), "0.95x25"),
        (selector("npu_chip_info_utilization", _NPU), f"{npu_utilization_pct}x25"),
    )


KV_HIGH_COMPUTE_LOW: Final = Alert(
    name="EagleEyeKVHighComputeLow",
    expr=(
        f"eagle_eye:pod_kv_cache_usage:ratio > {KV_FULL_RATIO} and on (namespace, pod) "
        f"{_UTIL} < {LOW_COMPUTE_UTILIZATION_RATIO}"
    ),
    for_="15m",
    severity="warning",
    summary=(
        f"{label('pod')}: KV cache full while compute sits below "
        f"{percent(LOW_COMPUTE_UTILIZATION_RATIO)}"
    ),
    description=(
        f"{label('pod')} ({label('model_name')}) fills its KV cache but barely "
        "uses its accelerator: memory, not compute, limits it (long contexts, few "
        "concurrent sequences, fragmentation)."
    ),
    runbook=(
        "Enable or tune prefix caching, cap max_model_len, use a KV-cache dtype of "
        "fp8, or move long-context traffic to pods with more KV memory."
    ),
    fires=Case(
        series=_sglang_with_npu(10),
        eval_time="20m",
        fired=({"namespace": "ml", "pod": "sgl-0", "model_name": "qwen"},),
    ),
    silent=Case(series=_sglang_with_npu(70), eval_time="20m"),
)

ALERTS: Final = (ACCELERATOR_IDLE_WHILE_QUEUED, KV_HIGH_COMPUTE_LOW)
