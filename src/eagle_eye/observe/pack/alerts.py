"""Alert rules, each with the ``promtool test rules`` cases that prove it.

An ``Alert`` carries its own evidence: a ``fires`` case (input series under which it must
fire, with the exact labels it fires with) and a ``silent`` case (series under which it
must stay quiet). ``promtool.py`` turns both into test files, and a unit test refuses an
alert without them. Annotations use only ``{{ $labels.x }}`` so that the expected text in
the tests is derived here, not copied by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from eagle_eye.observe.pack.rules import ROUTER_REQUESTS
from eagle_eye.observe.pack.slo import BURN_WINDOWS, SLOS, BurnWindow, Slo

Series = tuple[str, str]
"""(series selector in promtool notation, values such as ``'0+1x10'``)."""


@dataclass(frozen=True, slots=True)
class Case:
    """Input series, when to look, and the label sets of the alerts expected to fire."""

    series: tuple[Series, ...]
    eval_time: str
    fired: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    runbook: str
    fires: Case
    silent: Case
    labels: dict[str, str] = field(default_factory=dict)

    def annotations(self) -> dict[str, str]:
        return {"summary": self.summary, "description": self.description, "runbook": self.runbook}

    def to_rule(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity, **self.labels},
            "annotations": self.annotations(),
        }


def _sel(metric: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{metric}{{{inner}}}"


# The pods the test cases talk about.
VLLM_POD: Final = {
    "namespace": "ml",
    "pod": "vllm-0",
    "instance": "10.0.0.1:8000",
    "job": "ml/vllm",
    "model_name": "llama",
}
SGLANG_POD: Final = {
    "namespace": "ml",
    "pod": "sgl-0",
    "instance": "10.0.0.2:30000",
    "job": "ml/sglang",
    "model_name": "qwen",
}
EXPORTED: Final = {
    "job": "eagle-eye-exporter",
    "instance": "10.0.0.9:9400",
    "instance_id": "vllm-0",
    "dp_rank": "0",
    "model_name": "llama",
    "engine_kind": "vllm",
}


def _vllm(metric: str, values: str, **extra: str) -> Series:
    return (_sel(metric, {**VLLM_POD, "engine": "0", **extra}), values)


def _pod(labels: dict[str, str], **extra: str) -> dict[str, str]:
    return {**labels, **extra}


def _slo_case(slo: Slo, window: BurnWindow, error_ratio: float, fires: bool) -> Case:
    """The vLLM histogram of ``slo`` with ``error_ratio`` of requests over the threshold."""
    total_per_min = 100
    good = round(total_per_min * (1 - error_ratio), 3)
    metric = slo.signal.sources[0].names[0]
    le = repr(float(slo.threshold_s))
    return Case(
        series=(
            _vllm(f"{metric}_count", f"0+{total_per_min}x25"),
            _vllm(f"{metric}_bucket", f"0+{good}x25", le=le),
        ),
        # rate() over the 1 h and 6 h windows uses the samples there are, so 20 minutes
        # of history is enough to pass both windows' thresholds and the 15 m ``for``.
        eval_time="20m",
        fired=({"namespace": "ml", "model_name": "llama"},) if fires else (),
    )


def _slo_alert(slo: Slo, window: BurnWindow) -> Alert:
    threshold = round(window.burn_rate * slo.error_budget, 6)
    speed = "Fast" if window.long == "1h" else "Slow"
    label = slo.name.upper()
    ratio = f"eagle_eye:{slo.name}_slo_errors:ratio_rate"
    return Alert(
        name=f"EagleEye{label}BudgetBurn{speed}",
        expr=(f"{ratio}{window.long} > {threshold} and {ratio}{window.short} > {threshold}"),
        for_=window.for_,
        severity=window.severity,
        summary=(
            f"{label} SLO of {{{{ $labels.model_name }}}} burning {window.burn_rate:g}x too fast"
        ),
        description=(
            f"More than {threshold:.1%} of requests for {{{{ $labels.model_name }}}} in "
            f"{{{{ $labels.namespace }}}} took over {slo.threshold_s:g} s ({label}) in both the "
            f"last {window.long} and {window.short}; the SLO allows {slo.error_budget:.1%} "
            f"({slo.objective:.1%} within {slo.threshold_s:g} s)."
        ),
        runbook=(
            "Check the fleet dashboard for queue build-up and KV saturation on this model; "
            "add replicas or shed load if the queue grows; if one pod is slow, drain it."
            if slo.name == "ttft"
            else "Inter-token latency rises with batch size and long contexts: check running "
            "requests per pod and preemptions; lower max_num_seqs or add replicas."
        ),
        fires=_slo_case(slo, window, min(0.95, slo.error_budget * window.burn_rate * 1.3), True),
        silent=_slo_case(slo, window, slo.error_budget * 0.5, False),
    )


def _alerts() -> tuple[Alert, ...]:
    pod_out = {**VLLM_POD, "engine_kind": "vllm"}
    up_labels = {k: VLLM_POD[k] for k in ("namespace", "pod", "instance", "job")}
    dcgm = {
        "namespace": "gpu-operator",
        "pod": "dcgm-exporter-x1",
        "exported_namespace": "ml",
        "exported_pod": "vllm-0",
        "gpu": "0",
        "modelName": "NVIDIA H100",
    }
    npu = {"namespace": "ml", "pod_name": "sgl-0", "id": "0", "model_name": "Ascend910B"}
    alerts: list[Alert] = [
        Alert(
            name="EagleEyeEngineDown",
            expr=("up == 0 and on (job, instance) last_over_time(eagle_eye:requests_running[1h])"),
            for_="2m",
            severity="critical",
            summary="Engine {{ $labels.pod }} is not answering scrapes",
            description=(
                "Prometheus cannot scrape {{ $labels.instance }} (job {{ $labels.job }}), "
                "which served inference-engine metrics within the last hour."
            ),
            runbook=(
                "kubectl describe pod / logs --previous for the pod: look for CUDA OOM, "
                "NCCL errors or a failed health check; the router stops sending to it once "
                "its snapshots go stale."
            ),
            fires=Case(
                series=(
                    (_sel("up", up_labels), "1x5 0x10"),
                    _vllm("vllm:num_requests_running", "3x5"),
                ),
                eval_time="10m",
                fired=(up_labels,),
            ),
            silent=Case(
                series=(
                    (_sel("up", up_labels), "1x15"),
                    _vllm("vllm:num_requests_running", "3x15"),
                    (_sel("up", {"job": "node-exporter", "instance": "10.0.0.7:9100"}), "0x15"),
                ),
                eval_time="10m",
            ),
        ),
        Alert(
            name="EagleEyeNoHealthyBackend",
            expr="max by (model_name) (eagle_eye_model_ready_instances) == 0",
            for_="1m",
            severity="critical",
            summary="No ready instance serves {{ $labels.model_name }}",
            description=(
                "Every engine that published snapshots for {{ $labels.model_name }} is "
                "loading, draining, stopped or silent: requests for it fail or queue."
            ),
            runbook=(
                "eagle-eye watch (or the fleet dashboard) shows each instance's state; check "
                "the engine pods and the NATS connection of their plugin/agent."
            ),
            fires=Case(
                series=(
                    (_sel("eagle_eye_model_ready_instances", {"model_name": "llama"}), "2x3 0x10"),
                ),
                eval_time="10m",
                fired=({"model_name": "llama"},),
            ),
            silent=Case(
                series=(
                    (_sel("eagle_eye_model_ready_instances", {"model_name": "llama"}), "1x15"),
                ),
                eval_time="10m",
            ),
        ),
        Alert(
            name="EagleEyeQueueBuildUp",
            expr="eagle_eye:requests_waiting > 20",
            for_="5m",
            severity="warning",
            summary="{{ $labels.pod }} has had more than 20 requests queued for 5 minutes",
            description=(
                "Requests for {{ $labels.model_name }} wait in the {{ $labels.engine_kind }} "
                "scheduler of {{ $labels.pod }} instead of running: the engine is at its "
                "batch or KV-cache limit."
            ),
            runbook=(
                "Compare with the other pods of the model: if only this one queues, the "
                "router is not balancing (check routing-metrics freshness); if all do, add "
                "replicas."
            ),
            fires=Case(
                series=(_vllm("vllm:num_requests_waiting", "30x15"),),
                eval_time="10m",
                fired=(pod_out,),
            ),
            silent=Case(
                series=(_vllm("vllm:num_requests_waiting", "0x5 30x3 0x7"),),
                eval_time="10m",
            ),
        ),
        Alert(
            name="EagleEyeKVCacheSaturated",
            expr="eagle_eye:kv_cache_usage:ratio > 0.9",
            for_="10m",
            severity="warning",
            summary="KV cache of {{ $labels.pod }} above 90 % for 10 minutes",
            description=(
                "{{ $labels.pod }} ({{ $labels.model_name }}) has almost no free KV-cache "
                "blocks: new requests queue and running ones get preempted."
            ),
            runbook=(
                "Check preemptions and TTFT for the pod; raise gpu_memory_utilization, lower "
                "max_num_seqs or max_model_len, or add replicas."
            ),
            fires=Case(
                # The name vLLM removed: old deployments must still alert.
                series=(_vllm("vllm:gpu_cache_usage_perc", "0.97x20"),),
                eval_time="15m",
                fired=(pod_out,),
            ),
            silent=Case(
                series=(_vllm("vllm:kv_cache_usage_perc", "0.5x20"),),
                eval_time="15m",
            ),
        ),
        Alert(
            name="EagleEyePreemptionStorm",
            expr="eagle_eye:preemptions:rate5m > 0.2",
            for_="5m",
            severity="warning",
            summary="{{ $labels.pod }} preempts more than 0.2 requests per second",
            description=(
                "{{ $labels.pod }} keeps evicting running requests because its KV cache is "
                "full; each preemption recomputes the request's prefix and wastes compute."
            ),
            runbook=(
                "Lower max_num_seqs or max_num_batched_tokens, give the KV cache more memory, "
                "or route long-context requests to pods with more KV capacity."
            ),
            fires=Case(
                series=(_vllm("vllm:num_preemptions_total", "0+30x20"),),
                eval_time="15m",
                fired=(pod_out,),
            ),
            silent=Case(
                series=(_vllm("vllm:num_preemptions_total", "0+3x20"),),
                eval_time="15m",
            ),
        ),
        Alert(
            name="EagleEyeHighErrorRate",
            expr="eagle_eye:request_errors:ratio_rate5m > 0.05",
            for_="5m",
            severity="critical",
            summary="More than 5 % of {{ $labels.model_name }} requests fail",
            description=(
                "The {{ $labels.source }} reports server errors for more than 5 % of the "
                "requests for {{ $labels.model_name }} over the last 5 minutes."
            ),
            runbook=(
                "Router dashboard: which upstream returns errors? Check those engine pods' "
                "logs (OOM, bad requests, max_model_len exceeded)."
            ),
            fires=Case(
                series=(
                    (
                        _sel(ROUTER_REQUESTS, {"gen_ai_request_model": "llama", "code": "200"}),
                        "0+90x20",
                    ),
                    (
                        _sel(ROUTER_REQUESTS, {"gen_ai_request_model": "llama", "code": "502"}),
                        "0+10x20",
                    ),
                ),
                eval_time="15m",
                fired=({"model_name": "llama", "source": "router"},),
            ),
            silent=Case(
                series=(
                    (
                        _sel(ROUTER_REQUESTS, {"gen_ai_request_model": "llama", "code": "200"}),
                        "0+99x20",
                    ),
                    (
                        _sel(ROUTER_REQUESTS, {"gen_ai_request_model": "llama", "code": "502"}),
                        "0+1x20",
                    ),
                ),
                eval_time="15m",
            ),
        ),
        Alert(
            name="EagleEyeRoutingMetricsStale",
            expr=(
                "eagle_eye_snapshot_age_seconds > 10 and on (instance_id, dp_rank) "
                'eagle_eye_instance_state{state="ready"} == 1'
            ),
            for_="1m",
            severity="warning",
            summary="No fresh snapshot from {{ $labels.instance_id }} for over 10 s",
            description=(
                "{{ $labels.instance_id }} (rank {{ $labels.dp_rank }}, "
                "{{ $labels.model_name }}) said it was ready but has published nothing on "
                "NATS for over 10 s; routers fall back to their own accounting for it."
            ),
            runbook=(
                "Is the engine hung (check its /health) or has its publisher lost NATS "
                "(engine logs: eagle_eye.publish)? Check the NATS server's connections."
            ),
            fires=Case(
                series=(
                    (_sel("eagle_eye_snapshot_age_seconds", EXPORTED), "0.5x3 30+60x12"),
                    (_sel("eagle_eye_instance_state", {**EXPORTED, "state": "ready"}), "1x15"),
                ),
                eval_time="10m",
                fired=(EXPORTED,),
            ),
            silent=Case(
                series=(
                    (_sel("eagle_eye_snapshot_age_seconds", EXPORTED), "0.5x15"),
                    (_sel("eagle_eye_instance_state", {**EXPORTED, "state": "ready"}), "1x15"),
                ),
                eval_time="10m",
            ),
        ),
        Alert(
            name="EagleEyeAcceleratorIdleWhileQueued",
            expr=(
                "eagle_eye:pod_requests_waiting > 5 and on (namespace, pod) "
                "eagle_eye:pod_accelerator_utilization:ratio < 0.1"
            ),
            for_="5m",
            severity="critical",
            summary="{{ $labels.pod }} has a queue but its accelerator is idle",
            description=(
                "Requests wait on {{ $labels.pod }} while its GPU/NPU does almost nothing: "
                "the engine is stuck (hung collective, dead worker, deadlocked scheduler)."
            ),
            runbook=(
                "Take a stack dump (py-spy dump) of the engine, check NCCL/HCCL logs, then "
                "restart the pod; the router drains it once it stops publishing."
            ),
            fires=Case(
                series=(
                    _vllm("vllm:num_requests_waiting", "10x15"),
                    (_sel("DCGM_FI_DEV_GPU_UTIL", dcgm), "2x15"),
                ),
                eval_time="10m",
                fired=({"namespace": "ml", "pod": "vllm-0", "model_name": "llama"},),
            ),
            silent=Case(
                series=(
                    _vllm("vllm:num_requests_waiting", "10x15"),
                    (_sel("DCGM_FI_DEV_GPU_UTIL", dcgm), "85x15"),
                ),
                eval_time="10m",
            ),
        ),
        Alert(
            name="EagleEyeKVHighComputeLow",
            expr=(
                "eagle_eye:pod_kv_cache_usage:ratio > 0.9 and on (namespace, pod) "
                "eagle_eye:pod_accelerator_utilization:ratio < 0.3"
            ),
            for_="15m",
            severity="warning",
            summary="{{ $labels.pod }}: KV cache full while compute sits below 30 %",
            description=(
                "{{ $labels.pod }} ({{ $labels.model_name }}) fills its KV cache but barely "
                "uses its accelerator: memory, not compute, limits it (long contexts, few "
                "concurrent sequences, fragmentation)."
            ),
            runbook=(
                "Enable or tune prefix caching, cap max_model_len, use a KV-cache dtype of "
                "fp8, or move long-context traffic to pods with more KV memory."
            ),
            fires=Case(
                series=(
                    (_sel("sglang:token_usage", {**SGLANG_POD, "tp_rank": "0"}), "0.95x25"),
                    (_sel("npu_chip_info_utilization", npu), "10x25"),
                ),
                eval_time="20m",
                fired=({"namespace": "ml", "pod": "sgl-0", "model_name": "qwen"},),
            ),
            silent=Case(
                series=(
                    (_sel("sglang:token_usage", {**SGLANG_POD, "tp_rank": "0"}), "0.95x25"),
                    (_sel("npu_chip_info_utilization", npu), "70x25"),
                ),
                eval_time="20m",
            ),
        ),
        Alert(
            name="EagleEyeSlowModelLoad",
            expr="eagle_eye_instance_loading_seconds > 600",
            for_="1m",
            severity="warning",
            summary="{{ $labels.instance_id }} has been loading its model for over 10 minutes",
            description=(
                "{{ $labels.instance_id }} ({{ $labels.model_name }}) reported state "
                "'loading' for more than 10 minutes: weights download or load is slow, or it "
                "is stuck compiling."
            ),
            runbook=(
                "Check the pod's logs and its volume/network throughput; pre-pull weights to "
                "a node-local cache or a PVC, and set startup probes longer than load time."
            ),
            fires=Case(
                series=((_sel("eagle_eye_instance_loading_seconds", EXPORTED), "0+60x15"),),
                eval_time="14m",
                fired=(EXPORTED,),
            ),
            silent=Case(
                series=((_sel("eagle_eye_instance_loading_seconds", EXPORTED), "0+60x5"),),
                eval_time="14m",
            ),
        ),
        Alert(
            name="EagleEyeRayServeSlowModelLoad",
            expr=(
                "histogram_quantile(0.9, sum by (namespace, application, deployment, le) "
                "(rate(ray_serve_multiplexed_model_load_latency_ms_bucket[15m]))) > 60000"
            ),
            for_="5m",
            severity="warning",
            summary="Ray Serve {{ $labels.deployment }} takes over 60 s to load models",
            description=(
                "The 90th percentile of multiplexed model loads of {{ $labels.application }}/"
                "{{ $labels.deployment }} exceeds 60 s: requests that need a cold model wait."
            ),
            runbook=(
                "Raise max_num_models_per_replica so hot models stay loaded, or cache weights "
                "on local disk."
            ),
            fires=Case(
                series=_ray_load_series(120000),
                eval_time="20m",
                fired=({"namespace": "ml", "application": "llm", "deployment": "LLMServer"},),
            ),
            silent=Case(series=_ray_load_series(5000), eval_time="20m"),
        ),
    ]
    for slo in SLOS:
        for window in BURN_WINDOWS:
            alerts.append(_slo_alert(slo, window))
    return tuple(alerts)


def _ray_load_series(latency_ms: int) -> tuple[Series, ...]:
    base = {"namespace": "ml", "application": "llm", "deployment": "LLMServer", "replica": "r1"}
    out: list[Series] = []
    for le in ("1000", "10000", "60000", "300000", "+Inf"):
        bound = float("inf") if le == "+Inf" else float(le)
        out.append(
            (
                _sel("ray_serve_multiplexed_model_load_latency_ms_bucket", {**base, "le": le}),
                "0+1x25" if latency_ms <= bound else "0x25",
            )
        )
    return tuple(out)


ALERTS: Final = _alerts()


def alert_groups() -> list[dict[str, Any]]:
    return [{"name": "eagle_eye.alerts", "rules": [a.to_rule() for a in ALERTS]}]
