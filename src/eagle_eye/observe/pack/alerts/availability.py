"""Availability: an engine stopped answering, or a model has no ready instance left."""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.alerts.model import (
    VLLM_POD,
    Alert,
    Case,
    label,
    selector,
    vllm_series,
)

ENGINE_RECENTLY_SERVING_WINDOW_H: Final = 1
"""A down target counts as an engine only if it reported running requests this many hours
ago or less: long enough to span a crash loop's restarts, short enough that an engine
scaled away on purpose stops alerting within the hour, and it keeps the alert off every
other ``up == 0`` target (node exporters and the like)."""

_WINDOW_WORDS: Final = (
    "hour" if ENGINE_RECENTLY_SERVING_WINDOW_H == 1 else f"{ENGINE_RECENTLY_SERVING_WINDOW_H} hours"
)
_UP_LABELS: Final = {k: VLLM_POD[k] for k in ("namespace", "pod", "instance", "job")}

ENGINE_DOWN: Final = Alert(
    name="EagleEyeEngineDown",
    expr=(
        "up == 0 and on (job, instance) "
        f"last_over_time(eagle_eye:requests_running[{ENGINE_RECENTLY_SERVING_WINDOW_H}h])"
    ),
    for_="2m",
    severity="critical",
    summary=f"Engine {label('pod')} is not answering scrapes",
    description=(
        f"Prometheus cannot scrape {label('instance')} (job {label('job')}), "
        f"which served inference-engine metrics within the last {_WINDOW_WORDS}."
    ),
    runbook=(
        "kubectl describe pod / logs --previous for the pod: look for CUDA OOM, "
        "NCCL errors or a failed health check; the router stops sending to it once "
        "its snapshots go stale."
    ),
    fires=Case(
        series=(
            (selector("up", _UP_LABELS), "1x5 0x10"),
            vllm_series("vllm:num_requests_running", "3x5"),
        ),
        eval_time="10m",
        fired=(_UP_LABELS,),
    ),
    silent=Case(
        series=(
            (selector("up", _UP_LABELS), "1x15"),
            vllm_series("vllm:num_requests_running", "3x15"),
            (selector("up", {"job": "node-exporter", "instance": "10.0.0.7:9100"}), "0x15"),
        ),
        eval_time="10m",
    ),
)

_READY: Final = "eagle_eye_model_ready_instances"
NO_HEALTHY_BACKEND: Final = Alert(
    name="EagleEyeNoHealthyBackend",
    expr=f"max by (model_name) ({_READY}) == 0",
    for_="1m",
    severity="critical",
    summary=f"No ready instance serves {label('model_name')}",
    description=(
        f"Every engine that published snapshots for {label('model_name')} is "
        "loading, draining, stopped or silent: requests for it fail or queue."
    ),
    runbook=(
        "eagle-eye watch (or the fleet dashboard) shows each instance's state; check "
        "the engine pods and the NATS connection of their plugin/agent."
    ),
    fires=Case(
        series=((selector(_READY, {"model_name": "llama"}), "2x3 0x10"),),
        eval_time="10m",
        fired=({"model_name": "llama"},),
    ),
    silent=Case(
        series=((selector(_READY, {"model_name": "llama"}), "1x15"),),
        eval_time="10m",
    ),
)

ALERTS: Final = (ENGINE_DOWN, NO_HEALTHY_BACKEND)
