"""``promtool test rules`` files generated from the alert and recording-rule tables.

Alert tests come from each ``Alert``'s ``fires``/``silent`` cases. Recording-rule tests
feed one synthetic series per engine source (current and removed names, Ray vLLM, TGI,
llama.cpp, DCGM with and without ``exported_pod``, Ascend npu-exporter) and assert the
``eagle_eye:`` series it must produce: the sources a simulated fleet cannot serve are
proven here instead.
"""

from __future__ import annotations

import re
from typing import Any, Final

from eagle_eye.observe.pack.alerts import ALERTS, Alert, Case

RULE_FILES: Final = ("../eagle-eye-rules.yaml", "../eagle-eye-alerts.yaml")
_LABEL_REF: Final = re.compile(r"\{\{\s*\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render_template(text: str, labels: dict[str, str]) -> str:
    """Expand ``{{ $labels.x }}`` the way Prometheus does (missing labels become "")."""
    return _LABEL_REF.sub(lambda m: labels.get(m.group(1), ""), text)


def _alert_test(alert: Alert, case: Case) -> dict[str, Any]:
    expected = []
    for labels in case.fired:
        full = {**labels, "alertname": alert.name, "severity": alert.severity, **alert.labels}
        expected.append(
            {
                "exp_labels": {k: v for k, v in full.items() if k != "alertname"},
                "exp_annotations": {
                    k: render_template(v, full) for k, v in alert.annotations().items()
                },
            }
        )
    return {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in case.series],
        "alert_rule_test": [
            {"eval_time": case.eval_time, "alertname": alert.name, "exp_alerts": expected}
        ],
    }


def alert_tests() -> dict[str, Any]:
    tests: list[dict[str, Any]] = []
    for alert in ALERTS:
        tests.append(_alert_test(alert, alert.fires))
        tests.append(_alert_test(alert, alert.silent))
    return {"rule_files": list(RULE_FILES), "evaluation_interval": "1m", "tests": tests}


# -- recording rules ---------------------------------------------------------------------

_POD: Final = {"namespace": "ml", "pod": "p0", "instance": "10.0.0.1:8000", "job": "ml/e"}


def _sel(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _out(engine_kind: str, model: str | None = "m") -> dict[str, str]:
    labels = dict(_POD)
    if model is not None:
        labels["model_name"] = model
    labels["engine_kind"] = engine_kind
    return labels


def _gauge_case(
    metric: str, value: float, record: str, engine_kind: str, model: str | None = "m"
) -> dict[str, Any]:
    labels = {**_POD, **({"model_name": model} if model else {})}
    return {
        "input_series": [{"series": _sel(metric, labels), "values": f"{value}x10"}],
        "promql_expr_test": [
            {
                "expr": record,
                "eval_time": "5m",
                "exp_samples": [{"labels": _sel(record, _out(engine_kind, model)), "value": value}],
            }
        ],
    }


def _counter_case(
    metric: str, per_min: int, record: str, engine_kind: str, model: str | None = "m"
) -> dict[str, Any]:
    labels = {**_POD, **({"model_name": model} if model else {})}
    return {
        "input_series": [{"series": _sel(metric, labels), "values": f"0+{per_min}x10"}],
        "promql_expr_test": [
            {
                "expr": record,
                "eval_time": "6m",
                "exp_samples": [
                    {"labels": _sel(record, _out(engine_kind, model)), "value": per_min / 60}
                ],
            }
        ],
    }


def _both_names_case() -> dict[str, Any]:
    """vLLM mid-rename emits the current and the removed KV name: count it once."""
    labels = {**_POD, "model_name": "m", "engine": "0"}
    record = "eagle_eye:kv_cache_usage:ratio"
    return {
        "input_series": [
            {"series": _sel("vllm:kv_cache_usage_perc", labels), "values": "0.4x10"},
            {"series": _sel("vllm:gpu_cache_usage_perc", labels), "values": "0.9x10"},
        ],
        "promql_expr_test": [
            {
                "expr": record,
                "eval_time": "5m",
                "exp_samples": [{"labels": _sel(record, _out("vllm")), "value": 0.4}],
            }
        ],
    }


def _sample(record: str, labels: dict[str, str], value: float) -> dict[str, Any]:
    return {"labels": _sel(record, labels), "value": value}


def _expr_test(record: str, *samples: tuple[dict[str, str], float]) -> dict[str, Any]:
    """``record`` at 5 m must hold exactly ``samples`` (labels, value)."""
    return {
        "expr": record,
        "eval_time": "5m",
        "exp_samples": [_sample(record, labels, value) for labels, value in samples],
    }


def _accelerator_series() -> list[tuple[str, str]]:
    """DCGM with exported_pod (labels not honoured), DCGM honoured, Ascend pod_name."""
    exported = {
        "namespace": "gpu-operator",
        "pod": "dcgm-x",
        "exported_namespace": "ml",
        "exported_pod": "a",
    }
    honoured = {"namespace": "ml", "pod": "b"}
    ascend = {"namespace": "npu-exporter", "exported_namespace": "ml", "pod_name": "c"}
    kv = {"instance": "i", "job": "j", "model_name": "m"}
    return [
        (_sel("DCGM_FI_DEV_GPU_UTIL", {**exported, "gpu": "0"}), "40x10"),
        (_sel("DCGM_FI_DEV_GPU_UTIL", {**exported, "gpu": "1"}), "60x10"),
        (_sel("DCGM_FI_DEV_FB_USED", {**exported, "gpu": "0"}), "30x10"),
        (_sel("DCGM_FI_DEV_FB_FREE", {**exported, "gpu": "0"}), "70x10"),
        (_sel("DCGM_FI_DEV_GPU_UTIL", {**honoured, "gpu": "0"}), "90x10"),
        (_sel("npu_chip_info_utilization", {**ascend, "id": "0"}), "20x10"),
        (_sel("npu_chip_info_hbm_used_memory", {**ascend, "id": "0"}), "16x10"),
        (_sel("npu_chip_info_hbm_total_memory", {**ascend, "id": "0"}), "64x10"),
        (_sel("vllm:kv_cache_usage_perc", {"namespace": "ml", "pod": "a", **kv}), "0.9x10"),
    ]


def _accelerator_case() -> dict[str, Any]:
    """Utilisation and memory per pod from every exporter shape, and KV minus compute."""

    def pod(name: str, accelerator: str) -> dict[str, str]:
        return {"namespace": "ml", "pod": name, "accelerator": accelerator}

    return {
        "input_series": [{"series": s, "values": v} for s, v in _accelerator_series()],
        "promql_expr_test": [
            _expr_test(
                "eagle_eye:accelerator_utilization:ratio",
                (pod("a", "nvidia-gpu"), 0.5),
                (pod("b", "nvidia-gpu"), 0.9),
                (pod("c", "ascend-npu"), 0.2),
            ),
            _expr_test(
                "eagle_eye:accelerator_memory_used:ratio",
                (pod("a", "nvidia-gpu"), 0.3),
                (pod("c", "ascend-npu"), 0.25),
            ),
            _expr_test(
                "eagle_eye:pod_kv_minus_accelerator_utilization:ratio",
                ({"namespace": "ml", "pod": "a", "model_name": "m"}, 0.4),
            ),
        ],
    }


def _histogram_case() -> dict[str, Any]:
    """A TTFT histogram half under 0.5 s, half under 1 s: p50 is 0.5 s."""
    labels = {**_POD, "model_name": "m", "engine": "0"}
    series = []
    for le, per_min in (("0.5", 30), ("1.0", 60), ("+Inf", 60)):
        series.append(
            {
                "series": _sel("vllm:time_to_first_token_seconds_bucket", {**labels, "le": le}),
                "values": f"0+{per_min}x10",
            }
        )
    series.append(
        {"series": _sel("vllm:time_to_first_token_seconds_count", labels), "values": "0+60x10"}
    )
    series.append(
        {"series": _sel("vllm:time_to_first_token_seconds_sum", labels), "values": "0+30x10"}
    )
    out = _out("vllm")
    return {
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": "eagle_eye:ttft_seconds:p50_5m",
                "eval_time": "6m",
                "exp_samples": [
                    {"labels": _sel("eagle_eye:ttft_seconds:p50_5m", out), "value": 0.5}
                ],
            },
            {
                "expr": "eagle_eye:ttft_seconds:mean_5m",
                "eval_time": "6m",
                "exp_samples": [
                    {"labels": _sel("eagle_eye:ttft_seconds:mean_5m", out), "value": 0.5}
                ],
            },
            {
                "expr": "eagle_eye:ttft_slo_errors:ratio_rate5m",
                "eval_time": "6m",
                "exp_samples": [
                    {
                        "labels": _sel(
                            "eagle_eye:ttft_slo_errors:ratio_rate5m",
                            {"namespace": "ml", "model_name": "m"},
                        ),
                        "value": 0,
                    }
                ],
            },
        ],
    }


RECORDING_CASES: Final = (
    # (metric, kind, record, engine_kind, model label?)
    ("vllm:num_requests_running", "gauge", "eagle_eye:requests_running", "vllm", True),
    ("ray_vllm_num_requests_running", "gauge", "eagle_eye:requests_running", "ray-vllm", True),
    ("sglang:num_queue_reqs", "gauge", "eagle_eye:requests_waiting", "sglang", True),
    ("tgi_queue_size", "gauge", "eagle_eye:requests_waiting", "tgi", False),
    ("tgi_batch_current_size", "gauge", "eagle_eye:requests_running", "tgi", False),
    ("llamacpp:requests_processing", "gauge", "eagle_eye:requests_running", "llamacpp", False),
    ("llamacpp:requests_deferred", "gauge", "eagle_eye:requests_waiting", "llamacpp", False),
    ("vllm:gpu_cache_usage_perc", "gauge", "eagle_eye:kv_cache_usage:ratio", "vllm", True),
    (
        "ray_vllm_kv_cache_usage_perc",
        "gauge",
        "eagle_eye:kv_cache_usage:ratio",
        "ray-vllm",
        True,
    ),
    ("llamacpp:kv_cache_usage_ratio", "gauge", "eagle_eye:kv_cache_usage:ratio", "llamacpp", False),
    ("sglang:cache_hit_rate", "gauge", "eagle_eye:prefix_cache_hit:ratio_rate5m", "sglang", True),
    ("vllm:generation_tokens_total", "counter", "eagle_eye:generation_tokens:rate5m", "vllm", True),
    (
        "tgi_request_generated_tokens_sum",
        "counter",
        "eagle_eye:generation_tokens:rate5m",
        "tgi",
        False,
    ),
    (
        "llamacpp:prompt_tokens_total",
        "counter",
        "eagle_eye:prompt_tokens:rate5m",
        "llamacpp",
        False,
    ),
    ("ray_vllm_num_preemptions_total", "counter", "eagle_eye:preemptions:rate5m", "ray-vllm", True),
)


def recording_tests() -> dict[str, Any]:
    tests: list[dict[str, Any]] = []
    for metric, kind, record, engine_kind, has_model in RECORDING_CASES:
        model = "m" if has_model else None
        if kind == "gauge":
            tests.append(
                _gauge_case(metric, 0.25 if "ratio" in record else 7, record, engine_kind, model)
            )
        else:
            tests.append(_counter_case(metric, 120, record, engine_kind, model))
    tests.append(_both_names_case())
    tests.append(_histogram_case())
    tests.append(_accelerator_case())
    for test in tests:
        test.setdefault("interval", "1m")
    return {"rule_files": list(RULE_FILES), "evaluation_interval": "1m", "tests": tests}
