"""What an alert is, and the pods its ``promtool`` cases talk about.

An ``Alert`` carries its own evidence: a ``fires`` case (input series under which it must
fire, with the exact labels it fires with) and a ``silent`` case (series under which it
must stay quiet). Annotations use only ``{{ $labels.x }}`` so that the expected text in the
tests is derived here, not copied by hand. The helpers below format thresholds the one way
every alert writes them, so an expression and its summary cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

Series = tuple[str, str]
"""(series selector in promtool notation, values such as ``'0+1x10'``)."""


@dataclass(frozen=True, slots=True)
class Case:
    """Input series, when to look, and the label sets of the alerts expected to fire."""

    series: tuple[Series, ...]
    eval_time: str
    """How far into the series (promtool duration) the alert is evaluated."""
    fired: tuple[dict[str, str], ...] = ()
    """Label sets of the alerts that must be firing then; empty for a silent case."""


@dataclass(frozen=True, slots=True)
class Alert:
    """One alerting rule with its annotations and the two cases that prove it."""

    name: str
    expr: str
    for_: str
    """How long ``expr`` must hold before the alert fires (Prometheus duration)."""
    severity: str
    """``warning`` or ``critical``: what Alertmanager routes on."""
    summary: str
    description: str
    runbook: str
    fires: Case
    silent: Case
    labels: dict[str, str] = field(default_factory=dict)

    def annotations(self) -> dict[str, str]:
        return {"summary": self.summary, "description": self.description, "runbook": self.runbook}

    def to_rule(self) -> dict[str, Any]:
        """The rule as Prometheus reads it from a rule group."""
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity, **self.labels},
            "annotations": self.annotations(),
        }


def selector(metric: str, labels: dict[str, str]) -> str:
    """``metric{k="v", ...}`` in promtool's input-series notation."""
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{metric}{{{inner}}}"


def percent(ratio: float) -> str:
    """A 0-1 threshold as the annotations write it: ``0.9`` -> ``"90 %"``."""
    return f"{round(ratio * 100, 6):g} %"


def label(name: str) -> str:
    """The ``{{ $labels.name }}`` template Prometheus fills in an annotation."""
    return "{{ $labels." + name + " }}"


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
"""An engine rank as the exporter's series label it."""
VLLM_POD_OUT: Final = {**VLLM_POD, "engine_kind": "vllm"}
"""``VLLM_POD`` after the recording rules added ``engine_kind``."""


def vllm_series(metric: str, values: str, **extra: str) -> Series:
    """A series of engine 0 of ``VLLM_POD``."""
    return (selector(metric, {**VLLM_POD, "engine": "0", **extra}), values)
