"""Recording rules: engine-specific metrics in, ``eagle_eye:*`` series out.

Four groups, each a pure function of the tables in ``sources.py`` and ``slo.py``:

* ``eagle_eye.engine``: one rule per (signal, engine) writing the same series name with an
  ``engine_kind`` label, aggregated per pod (``POD_LABELS``).
* ``eagle_eye.derived``: quantiles, prefix-cache hit ratio, per-model totals.
* ``eagle_eye.slo``: TTFT/ITL SLO error ratios over the multi-window burn-rate windows.
* ``eagle_eye.accelerator``: GPU (DCGM) and NPU (Ascend npu-exporter) utilisation per pod
  and its join with KV-cache usage (seed 002's joint analysis).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from eagle_eye.observe.pack.slo import SLO_WINDOWS, SLOS
from eagle_eye.observe.pack.sources import (
    HISTOGRAM_SIGNALS,
    MODEL_LABELS,
    POD_LABELS,
    SGLANG_PREFIX_HIT_RATIO,
    SIGNALS,
    Kind,
    Signal,
    by,
    le_regex,
    union,
)

RATE_WINDOW: Final = "5m"
QUANTILES: Final = (0.5, 0.9, 0.99)
ACCEL_LABELS: Final = ("namespace", "pod", "simulated")
"""Per-pod accelerator series keep ``simulated`` so demo data never passes for real."""

Rule = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RuleGroup:
    name: str
    rules: tuple[Rule, ...]
    interval: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.interval is not None:
            out["interval"] = self.interval
        out["rules"] = list(self.rules)
        return out


def series_name(signal: Signal) -> str:
    """The per-pod ``eagle_eye:`` series a signal is recorded as."""
    if signal.kind is Kind.GAUGE_SUM:
        return f"eagle_eye:{signal.name}"
    if signal.kind is Kind.GAUGE_MAX:
        return f"eagle_eye:{signal.name}:ratio"
    if signal.kind is Kind.COUNTER:
        return f"eagle_eye:{signal.name}:rate{RATE_WINDOW}"
    return f"eagle_eye:{signal.name}_bucket:rate{RATE_WINDOW}"


def quantile_name(signal: Signal, q: float, *, per_model: bool = False) -> str:
    level = "model_" if per_model else ""
    return f"eagle_eye:{level}{signal.name}:p{round(q * 100)}_{RATE_WINDOW}"


def _record(name: str, expr: str, **labels: str) -> Rule:
    rule: Rule = {"record": name, "expr": expr}
    if labels:
        rule["labels"] = dict(labels)
    return rule


def engine_rules() -> tuple[Rule, ...]:
    """Per-pod, per-engine-kind normalisation of every signal."""
    rules: list[Rule] = []
    pod_by = by(POD_LABELS)
    for signal in SIGNALS:
        for source in signal.sources:
            if signal.kind is Kind.GAUGE_SUM:
                expr = f"sum {pod_by} ({union(source.names)})"
            elif signal.kind is Kind.GAUGE_MAX:
                expr = f"max {pod_by} ({union(source.names)})"
            elif signal.kind is Kind.COUNTER:
                expr = f"sum {pod_by} ({union(source.names, f'rate({{name}}[{RATE_WINDOW}])')})"
            else:
                inner = union(source.names, f"rate({{name}}_bucket[{RATE_WINDOW}])")
                expr = f"sum {by(POD_LABELS, 'le')} ({inner})"
            rules.append(_record(series_name(signal), expr, engine_kind=source.engine_kind))
        if signal.kind is Kind.HISTOGRAM:
            for source in signal.sources:
                w = RATE_WINDOW
                mean = union(
                    source.names, f"rate({{name}}_sum[{w}]) / (rate({{name}}_count[{w}]) > 0)"
                )
                rules.append(
                    _record(
                        f"eagle_eye:{signal.name}:mean_{RATE_WINDOW}",
                        f"max {pod_by} ({mean})",
                        engine_kind=source.engine_kind,
                    )
                )
    rules.append(
        _record(
            f"eagle_eye:prefix_cache_hit:ratio_rate{RATE_WINDOW}",
            f"max {pod_by} ({SGLANG_PREFIX_HIT_RATIO})",
            engine_kind="sglang",
        )
    )
    return tuple(rules)


def _quantile(q: float, buckets: str) -> str:
    """``histogram_quantile`` only where there were observations (else it records NaN)."""
    return f"histogram_quantile({q}, {buckets}) and sum without (le) ({buckets}) > 0"


def derived_rules() -> tuple[Rule, ...]:
    """Quantiles, the counter-based prefix hit ratio and per-model totals."""
    w = RATE_WINDOW
    rules: list[Rule] = [
        _record(
            f"eagle_eye:prefix_cache_hit:ratio_rate{w}",
            f"eagle_eye:prefix_cache_hits:rate{w} / (eagle_eye:prefix_cache_queries:rate{w} > 0)",
        )
    ]
    for signal in HISTOGRAM_SIGNALS:
        for q in QUANTILES:
            rules.append(_record(quantile_name(signal, q), _quantile(q, series_name(signal))))
    model_by = by(MODEL_LABELS)
    for name in ("requests_running", "requests_waiting"):
        rules.append(_record(f"eagle_eye:model_{name}", f"sum {model_by} (eagle_eye:{name})"))
    for name in ("prompt_tokens", "generation_tokens", "requests_finished", "preemptions"):
        rules.append(
            _record(f"eagle_eye:model_{name}:rate{w}", f"sum {model_by} (eagle_eye:{name}:rate{w})")
        )
    rules.append(
        _record(
            "eagle_eye:model_kv_cache_usage:avg_ratio",
            f"avg {model_by} (eagle_eye:kv_cache_usage:ratio)",
        )
    )
    rules.append(
        _record("eagle_eye:model_instances", f"count {model_by} (eagle_eye:requests_running)")
    )
    for signal in HISTOGRAM_SIGNALS:
        if signal.name not in ("ttft_seconds", "itl_seconds", "e2e_seconds"):
            continue
        buckets = f"sum {by(MODEL_LABELS, 'le')} ({series_name(signal)})"
        for q in QUANTILES:
            rules.append(_record(quantile_name(signal, q, per_model=True), _quantile(q, buckets)))
    return tuple(rules)


def slo_error_ratio_name(slo_name: str, window: str) -> str:
    return f"eagle_eye:{slo_name}_slo_errors:ratio_rate{window}"


def slo_rules() -> tuple[Rule, ...]:
    """Fraction of requests slower than the SLO threshold, per model and window.

    Built from the raw engine histograms (not the 5m recordings) so every window is an
    exact rate over its own range.
    """
    rules: list[Rule] = []
    model_by = by(MODEL_LABELS)
    for slo in SLOS:
        names = tuple(n for source in slo.signal.sources for n in source.names)
        le = le_regex(slo.threshold_s)
        for window in SLO_WINDOWS:
            good = union(names, f'rate({{name}}_bucket{{{{le=~"{le}"}}}}[{window}])')
            total = union(names, f"rate({{name}}_count[{window}])")
            expr = f"1 - (sum {model_by} ({good}) / (sum {model_by} ({total}) > 0))"
            rules.append(_record(slo_error_ratio_name(slo.name, window), expr))
    return tuple(rules)


def _dcgm(metric: str) -> str:
    """A DCGM series with the workload's pod/namespace, whether or not labels were honoured.

    With ``honorLabels: false`` (the ServiceMonitor default) the exporter's own pod wins
    and the workload's move to ``exported_pod``/``exported_namespace``.
    """
    moved = (
        f'label_replace(label_replace({metric}{{exported_pod!=""}}, "pod", "$1", '
        f'"exported_pod", "(.+)"), "namespace", "$1", "exported_namespace", "(.+)")'
    )
    return f'({moved} or {metric}{{exported_pod="", pod!=""}})'


def _npu(metric: str) -> str:
    """An Ascend npu-exporter series with ``pod`` from its ``pod_name`` label."""
    relabelled = f'label_replace({metric}{{pod_name!=""}}, "pod", "$1", "pod_name", "(.+)")'
    return f'label_replace({relabelled}, "namespace", "$1", "exported_namespace", "(.+)")'


def accelerator_rules() -> tuple[Rule, ...]:
    accel_by = by(ACCEL_LABELS)
    util = "eagle_eye:accelerator_utilization:ratio"
    return (
        _record(
            util,
            f"avg {accel_by} ({_dcgm('DCGM_FI_DEV_GPU_UTIL')}) / 100",
            accelerator="nvidia-gpu",
        ),
        _record(
            util,
            f"avg {accel_by} ({_npu('npu_chip_info_utilization')}) / 100",
            accelerator="ascend-npu",
        ),
        _record(
            "eagle_eye:accelerator_memory_used:ratio",
            f"sum {accel_by} ({_dcgm('DCGM_FI_DEV_FB_USED')}) / sum {accel_by} "
            f"({_dcgm('DCGM_FI_DEV_FB_USED')} + {_dcgm('DCGM_FI_DEV_FB_FREE')})",
            accelerator="nvidia-gpu",
        ),
        _record(
            "eagle_eye:accelerator_memory_used:ratio",
            f"sum {accel_by} ({_npu('npu_chip_info_hbm_used_memory')}) / sum {accel_by} "
            f"({_npu('npu_chip_info_hbm_total_memory')})",
            accelerator="ascend-npu",
        ),
        _record(
            "eagle_eye:pod_kv_cache_usage:ratio",
            "max by (namespace, pod, model_name) (eagle_eye:kv_cache_usage:ratio)",
        ),
        _record(
            "eagle_eye:pod_accelerator_utilization:ratio",
            f"max by (namespace, pod) ({util})",
        ),
        _record(
            "eagle_eye:pod_kv_minus_accelerator_utilization:ratio",
            "eagle_eye:pod_kv_cache_usage:ratio - on (namespace, pod) group_left () "
            "eagle_eye:pod_accelerator_utilization:ratio",
        ),
        _record(
            "eagle_eye:pod_requests_waiting",
            "sum by (namespace, pod, model_name) (eagle_eye:requests_waiting)",
        ),
    )


ROUTER_REQUESTS: Final = "eagle_eye_router_requests_total"
"""The router's request counter (labels ``gen_ai_request_model``, ``code``)."""


def error_rules() -> tuple[Rule, ...]:
    """Server-error ratio per model, from whatever sees HTTP status codes."""
    w = RATE_WINDOW

    def ratio(metric_errors: str, metric_total: str, model_label: str) -> str:
        def per_model(selector: str) -> str:
            moved = (
                f'label_replace(rate({selector}[{w}]), "model_name", "$1", "{model_label}", "(.*)")'
            )
            return f"sum by (model_name) ({moved})"

        # ``or ... * 0``: a model with traffic and no errors reads 0, not "no data".
        errors = f"({per_model(metric_errors)} or {per_model(metric_total)} * 0)"
        return f"{errors} / ({per_model(metric_total)} > 0)"

    return (
        _record(
            f"eagle_eye:request_errors:ratio_rate{w}",
            ratio(f'{ROUTER_REQUESTS}{{code=~"5.."}}', ROUTER_REQUESTS, "gen_ai_request_model"),
            source="router",
        ),
        _record(
            f"eagle_eye:request_errors:ratio_rate{w}",
            ratio(
                "ray_serve_num_http_error_requests_total",
                "ray_serve_num_http_requests_total",
                "application",
            ),
            source="ray-serve",
        ),
    )


def recording_groups() -> tuple[RuleGroup, ...]:
    return (
        RuleGroup("eagle_eye.engine", engine_rules()),
        RuleGroup("eagle_eye.derived", derived_rules() + error_rules()),
        RuleGroup("eagle_eye.slo", slo_rules()),
        RuleGroup("eagle_eye.accelerator", accelerator_rules()),
    )


def recorded_names() -> tuple[str, ...]:
    """Every distinct series name the recording rules write, in file order."""
    seen: dict[str, None] = {}
    for group in recording_groups():
        for rule in group.rules:
            seen.setdefault(rule["record"], None)
    return tuple(seen)
