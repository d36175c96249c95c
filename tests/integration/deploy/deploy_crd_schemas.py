"""Validation of the custom resources the overlays use, without a cluster.

* ``monitoring.coreos.com/v1`` (PodMonitor, ServiceMonitor, PrometheusRule): the
  ``cloudcoil-models-prometheus-operator`` package (PyPI, Apache-2.0) ships pydantic
  models generated from prometheus-operator's own CRD OpenAPI schemas (v0.80). Pydantic
  drops unknown keys silently, so ``validate_monitoring`` also diffs the input against
  the model's dump: a key the CRD does not know (a typo such as ``podMetricEndpoints``)
  fails like the API server's structural-schema pruning would warn.
* ``ray.io/v1`` RayService: no package on PyPI or npm carries KubeRay's CRD schemas, so
  ``RAYSERVICE_SCHEMA`` below is our own minimal JSON Schema of the fields we use, written
  from KubeRay's Go types (ray-operator/apis/ray/v1/rayservice_types.go and
  raycluster_types.go: ``serveConfigV2``, ``rayClusterConfig.headGroupSpec`` with
  required ``rayStartParams`` and ``template``, ``workerGroupSpecs`` with required
  ``groupName``, ``minReplicas``, ``maxReplicas``, ``rayStartParams``, ``template``).
  Unknown fields are rejected; the embedded pod templates are validated separately with
  kubernetes-validate's core schemas (as a ``PodTemplate``).
"""

from __future__ import annotations

from typing import Any

import jsonschema

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_TEMPLATE = {
    "type": "object",
    "required": ["spec"],
    "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}},
    "additionalProperties": False,
}
_REPLICAS = {"type": "integer", "minimum": 0}

RAYSERVICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayService"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["rayClusterConfig"],
            "additionalProperties": False,
            "properties": {
                "serveConfigV2": {"type": "string"},
                "serveService": {"type": "object"},
                "rayClusterConfig": {
                    "type": "object",
                    "required": ["headGroupSpec"],
                    "additionalProperties": False,
                    "properties": {
                        "rayVersion": {"type": "string"},
                        "enableInTreeAutoscaling": {"type": "boolean"},
                        "autoscalerOptions": {"type": "object"},
                        "headServiceAnnotations": _STRING_MAP,
                        "suspend": {"type": "boolean"},
                        "headGroupSpec": {
                            "type": "object",
                            "required": ["rayStartParams", "template"],
                            "additionalProperties": False,
                            "properties": {
                                "serviceType": {"type": "string"},
                                "headService": {"type": "object"},
                                "enableIngress": {"type": "boolean"},
                                "rayStartParams": _STRING_MAP,
                                "template": _TEMPLATE,
                            },
                        },
                        "workerGroupSpecs": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": [
                                    "groupName",
                                    "minReplicas",
                                    "maxReplicas",
                                    "rayStartParams",
                                    "template",
                                ],
                                "additionalProperties": False,
                                "properties": {
                                    "groupName": {"type": "string", "minLength": 1},
                                    "replicas": _REPLICAS,
                                    "minReplicas": _REPLICAS,
                                    "maxReplicas": _REPLICAS,
                                    "numOfHosts": {"type": "integer", "minimum": 1},
                                    "rayStartParams": _STRING_MAP,
                                    "template": _TEMPLATE,
                                    "scaleStrategy": {"type": "object"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def validate_rayservice(obj: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` for a RayService outside our documented schema."""
    jsonschema.validate(obj, RAYSERVICE_SCHEMA)
    for group in obj["spec"]["rayClusterConfig"].get("workerGroupSpecs", []):
        low, high = group["minReplicas"], group["maxReplicas"]
        replicas = group.get("replicas", low)
        if not low <= replicas <= high:
            raise jsonschema.ValidationError(
                f"worker group {group['groupName']}: replicas {replicas} not in [{low}, {high}]"
            )


def unknown_fields(raw: Any, dumped: Any, path: str = "") -> list[str]:
    """Keys present in ``raw`` but dropped from the model's ``dumped`` form."""
    if isinstance(raw, dict) and isinstance(dumped, dict):
        problems = []
        for key, value in raw.items():
            if key not in dumped:
                problems.append(f"{path}.{key}")
            else:
                problems += unknown_fields(value, dumped[key], f"{path}.{key}")
        return problems
    if isinstance(raw, list) and isinstance(dumped, list):
        problems = []
        for i, (a, b) in enumerate(zip(raw, dumped, strict=False)):
            problems += unknown_fields(a, b, f"{path}[{i}]")
        return problems
    return []


def validate_monitoring(obj: dict[str, Any]) -> None:
    """Validate a monitoring.coreos.com/v1 object against prometheus-operator's schema."""
    from cloudcoil.models.prometheus_operator import v1

    model = getattr(v1, obj["kind"])
    parsed = model.model_validate(obj)
    dumped = parsed.model_dump(by_alias=True, exclude_unset=True, mode="json")
    unknown = unknown_fields(obj, dumped)
    if unknown:
        raise ValueError(f"{obj['kind']}/{obj['metadata']['name']}: unknown fields {unknown}")
