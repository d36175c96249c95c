"""The monitoring objects follow kube-prometheus-stack conventions and the CRD schemas."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from eagle_eye.observe.pack import k8s
from support import REPO_ROOT

ROOT = REPO_ROOT
MONITORING = ROOT / "deploy/k8s/monitoring"


def _unknown_keys(raw: Any, dumped: Any, path: str = "") -> list[str]:
    if isinstance(raw, dict) and isinstance(dumped, dict):
        out = []
        for key, value in raw.items():
            if key not in dumped:
                out.append(f"{path}.{key}")
            else:
                out += _unknown_keys(value, dumped[key], f"{path}.{key}")
        return out
    if isinstance(raw, list) and isinstance(dumped, list):
        return [p for a, b in zip(raw, dumped, strict=False) for p in _unknown_keys(a, b, path)]
    return []


def _objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in ("podmonitors.yaml", "servicemonitors.yaml", "prometheusrule.yaml"):
        out += [o for o in yaml.safe_load_all((MONITORING / name).read_text()) if o]
    return out


def test_monitors_and_rules_validate_against_prometheus_operator_schemas() -> None:
    v1 = pytest.importorskip("cloudcoil.models.prometheus_operator.v1")
    objects = _objects()
    kinds = sorted(o["kind"] for o in objects)
    assert kinds.count("PodMonitor") == 5
    assert kinds.count("ServiceMonitor") == 2
    assert kinds.count("PrometheusRule") == 1
    for obj in objects:
        model = getattr(v1, obj["kind"]).model_validate(obj)
        dumped = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
        assert _unknown_keys(obj, dumped) == [], obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["release"] == k8s.DEFAULT_RELEASE


def test_ray_pod_monitors_match_seed_004() -> None:
    monitors = {o["metadata"]["name"]: o for o in k8s.pod_monitors()}
    head = monitors["eagle-eye-ray-head"]["spec"]
    assert head["selector"] == {"matchLabels": {"ray.io/node-type": "head"}}
    assert [e["port"] for e in head["podMetricsEndpoints"]] == [
        "metrics",
        "as-metrics",
        "dash-metrics",
    ]
    worker = monitors["eagle-eye-ray-worker"]["spec"]
    assert worker["podMetricsEndpoints"][0]["relabelings"][0]["targetLabel"] == "ray_io_cluster"


def test_dashboards_ship_as_sidecar_config_maps() -> None:
    maps = list(yaml.safe_load_all((MONITORING / "dashboards.yaml").read_text()))
    assert len(maps) == 5
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        (key, text), *_ = cm["data"].items()
        assert json.loads(text)["uid"] + ".json" == key


def test_monitor_selectors_match_the_engine_and_service_manifests() -> None:
    """Agree with deploy/k8s/base: engine pod label and port, service names and ports."""
    base = ROOT / "deploy/k8s/base"
    if not base.is_dir():
        pytest.skip("deploy/k8s/base not present")
    vllm = (base / "vllm/deployment.yaml").read_text()
    assert f"{k8s.ENGINE_LABEL}: vllm" in vllm
    assert "name: http" in vllm
    exporter = yaml.safe_load((base / "exporter/service.yaml").read_text())
    assert exporter["metadata"]["labels"]["app.kubernetes.io/name"] == "eagle-eye-exporter"
    assert exporter["spec"]["ports"][0]["name"] == "metrics"
    router = yaml.safe_load((base / "router/service.yaml").read_text())
    assert router["metadata"]["labels"]["app.kubernetes.io/name"] == "eagle-eye-router"
    assert router["spec"]["ports"][0]["name"] == "http"


@pytest.mark.k8s
def test_kustomization_renders_with_kubectl() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl missing")
    result = subprocess.run(
        [kubectl, "kustomize", str(MONITORING)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    kinds = [o["kind"] for o in yaml.safe_load_all(result.stdout) if o]
    assert sorted(set(kinds)) == ["ConfigMap", "PodMonitor", "PrometheusRule", "ServiceMonitor"]
