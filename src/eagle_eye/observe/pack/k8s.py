"""kube-prometheus-stack objects for the pack: monitors, the PrometheusRule, dashboards.

Conventions (kube-prometheus-stack defaults): monitors and rules are selected by the
``release: <helm release>`` label; Grafana's sidecar loads every ConfigMap labelled
``grafana_dashboard: "1"``. Engine pods are found by the label the engine manifests in
``deploy/k8s/base`` put on them (``eagle-eye.io/engine: vllm|sglang|...``) on the port
named ``http``; Ray pods by KubeRay's ``ray.io/node-type``, as in seed 004.
"""

from __future__ import annotations

import json
from typing import Any, Final

from eagle_eye.observe.pack.alerts import alert_groups
from eagle_eye.observe.pack.dashboards import DASHBOARDS
from eagle_eye.observe.pack.grafana import build
from eagle_eye.observe.pack.rules import recording_groups

DEFAULT_RELEASE: Final = "prometheus"
ENGINE_LABEL: Final = "eagle-eye.io/engine"
SCRAPE_INTERVAL: Final = "15s"
_RAY_CLUSTER: Final = {
    "action": "replace",
    "sourceLabels": ["__meta_kubernetes_pod_label_ray_io_cluster"],
    "targetLabel": "ray_io_cluster",
}

Obj = dict[str, Any]


def _meta(name: str, release: str, **labels: str) -> Obj:
    return {
        "name": name,
        "labels": {"app.kubernetes.io/part-of": "eagle-eye", "release": release, **labels},
    }


def _engine_pod_monitor(name: str, engines: tuple[str, ...], release: str) -> Obj:
    selector: Obj = (
        {"matchLabels": {ENGINE_LABEL: engines[0]}}
        if len(engines) == 1
        else {
            "matchExpressions": [{"key": ENGINE_LABEL, "operator": "In", "values": list(engines)}]
        }
    )
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": _meta(name, release),
        "spec": {
            "namespaceSelector": {"any": True},
            "selector": selector,
            "podMetricsEndpoints": [
                {"port": "http", "path": "/metrics", "interval": SCRAPE_INTERVAL}
            ],
        },
    }


def _ray_pod_monitor(node_type: str, ports: tuple[str, ...], release: str) -> Obj:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": _meta(f"eagle-eye-ray-{node_type}", release),
        "spec": {
            "jobLabel": f"ray-{node_type}",
            "namespaceSelector": {"any": True},
            "selector": {"matchLabels": {"ray.io/node-type": node_type}},
            "podMetricsEndpoints": [
                {"port": port, "interval": SCRAPE_INTERVAL, "relabelings": [dict(_RAY_CLUSTER)]}
                for port in ports
            ],
        },
    }


def _service_monitor(name: str, port: str, release: str) -> Obj:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta(name, release),
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "endpoints": [{"port": port, "path": "/metrics", "interval": SCRAPE_INTERVAL}],
        },
    }


def pod_monitors(release: str = DEFAULT_RELEASE) -> list[Obj]:
    return [
        _engine_pod_monitor("eagle-eye-vllm", ("vllm",), release),
        _engine_pod_monitor("eagle-eye-sglang", ("sglang",), release),
        _engine_pod_monitor("eagle-eye-other-engines", ("tgi", "llamacpp"), release),
        _ray_pod_monitor("head", ("metrics", "as-metrics", "dash-metrics"), release),
        _ray_pod_monitor("worker", ("metrics",), release),
    ]


def service_monitors(release: str = DEFAULT_RELEASE) -> list[Obj]:
    return [
        _service_monitor("eagle-eye-router", "http", release),
        _service_monitor("eagle-eye-exporter", "metrics", release),
    ]


def prometheus_rule(release: str = DEFAULT_RELEASE) -> Obj:
    groups = [g.to_dict() for g in recording_groups()] + alert_groups()
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _meta("eagle-eye", release),
        "spec": {"groups": groups},
    }


def dashboard_config_maps() -> list[Obj]:
    maps = []
    for dashboard in DASHBOARDS:
        maps.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{dashboard.uid}-dashboard",
                    "labels": {"app.kubernetes.io/part-of": "eagle-eye", "grafana_dashboard": "1"},
                    "annotations": {"grafana_folder": "Eagle Eye"},
                },
                "data": {f"{dashboard.uid}.json": json.dumps(build(dashboard), indent=1)},
            }
        )
    return maps


KUSTOMIZATION: Final = """\
# The Eagle Eye observability pack for an existing kube-prometheus-stack: PodMonitors for
# vLLM, SGLang, TGI/llama.cpp and Ray head/worker pods, ServiceMonitors for the router and
# the exporter, the PrometheusRule (recording + alert rules) and the Grafana dashboards.
# Monitors and rules carry `release: prometheus`; if your Helm release has another name,
# regenerate with `eagle-eye rules --release NAME` or patch the label in your overlay.
# Include it from an overlay: `resources: [../../monitoring]`.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - podmonitors.yaml
  - servicemonitors.yaml
  - prometheusrule.yaml
  - dashboards.yaml
"""
