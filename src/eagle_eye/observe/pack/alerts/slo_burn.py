"""Latency SLOs: multi-window, multi-burn-rate alerts, one per SLO and burn window.

The thresholds live in ``pack/slo.py`` (objective, latency bound, burn rates); every number
in an alert's expression and text is computed from them here.
"""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.alerts.model import Alert, Case, label, vllm_series
from eagle_eye.observe.pack.slo import BURN_WINDOWS, SLOS, BurnWindow, Slo

_RUNBOOKS: Final = {
    "ttft": (
        "Check the fleet dashboard for queue build-up and KV saturation on this model; "
        "add replicas or shed load if the queue grows; if one pod is slow, drain it."
    ),
    "itl": (
        "Inter-token latency rises with batch size and long contexts: check running "
        "requests per pod and preemptions; lower max_num_seqs or add replicas."
    ),
}


def _slo_case(slo: Slo, error_ratio: float, fires: bool) -> Case:
    """The vLLM histogram of ``slo`` with ``error_ratio`` of requests over the threshold."""
    total_per_min = 100
    good = round(total_per_min * (1 - error_ratio), 3)
    metric = slo.signal.sources[0].names[0]
    le = repr(float(slo.threshold_s))
    return Case(
        series=(
            vllm_series(f"{metric}_count", f"0+{total_per_min}x25"),
            vllm_series(f"{metric}_bucket", f"0+{good}x25", le=le),
        ),
        # rate() over the 1 h and 6 h windows uses the samples there are, so 20 minutes
        # of history is enough to pass both windows' thresholds and the 15 m ``for``.
        eval_time="20m",
        fired=({"namespace": "ml", "model_name": "llama"},) if fires else (),
    )


def slo_alert(slo: Slo, window: BurnWindow) -> Alert:
    """Fires when both of ``window``'s ranges burn ``slo``'s error budget too fast."""
    threshold = round(window.burn_rate * slo.error_budget, 6)
    speed = "Fast" if window.long == "1h" else "Slow"
    name = slo.name.upper()
    ratio = f"eagle_eye:{slo.name}_slo_errors:ratio_rate"
    model = label("model_name")
    return Alert(
        name=f"EagleEye{name}BudgetBurn{speed}",
        expr=f"{ratio}{window.long} > {threshold} and {ratio}{window.short} > {threshold}",
        for_=window.for_,
        severity=window.severity,
        summary=f"{name} SLO of {model} burning {window.burn_rate:g}x too fast",
        description=(
            f"More than {threshold:.1%} of requests for {model} in "
            f"{label('namespace')} took over {slo.threshold_s:g} s ({name}) in both the "
            f"last {window.long} and {window.short}; the SLO allows {slo.error_budget:.1%} "
            f"({slo.objective:.1%} within {slo.threshold_s:g} s)."
        ),
        runbook=_RUNBOOKS[slo.name],
        fires=_slo_case(slo, min(0.95, slo.error_budget * window.burn_rate * 1.3), True),
        silent=_slo_case(slo, slo.error_budget * 0.5, False),
    )


ALERTS: Final = tuple(slo_alert(slo, window) for slo in SLOS for window in BURN_WINDOWS)
