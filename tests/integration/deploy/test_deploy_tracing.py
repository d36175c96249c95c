"""The tracing manifests: the Collector and Jaeger of the monitoring overlay, and the
component that points the router at them, render, validate and connect."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from deploy_k8s_helpers import K8S, Obj, env_of, find, kubectl, render

from eagle_eye.commands.tracing import tracing_from_env

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(
        kubectl() is None, reason="kubectl not installed (scripts/setup.sh --system)"
    ),
]

K8S_VERSION = "1.29.0"


def production_with_tracing(tmp_path: Path) -> list[Obj]:
    """The production overlay plus components/tracing, as a user's overlay would add it."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    rel = lambda p: os.path.relpath(p, overlay)  # noqa: E731 - a one-line helper
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [rel(K8S / "overlays" / "production")],
                "components": [rel(K8S / "components" / "tracing")],
            }
        )
    )
    return render(overlay)


def test_the_router_gets_the_standard_variables_and_they_parse(tmp_path: Path) -> None:
    objects = production_with_tracing(tmp_path)
    router = find(objects, "Deployment", "eagle-eye-router")
    kubernetes_validate.validate(router, K8S_VERSION, strict=True)
    container = router["spec"]["template"]["spec"]["containers"][0]
    env = {name: var["value"] for name, var in env_of(container).items() if "value" in var}
    assert env["EAGLE_EYE_NATS_URL"] == "nats://nats:4222"  # the patch appended, kept the rest
    settings = tracing_from_env(env)  # exactly what the router will read
    assert settings is not None
    assert settings.endpoint == "http://otel-collector:4318/v1/traces"
    assert (settings.sampler, settings.sample_ratio) == ("parentbased_traceidratio", 0.1)
    assert settings.service_name == "eagle-eye-router"
    # ...and that Collector exists in the monitoring overlay, same namespace, that port.
    monitoring = render(K8S / "overlays" / "monitoring")
    service = find(monitoring, "Service", "otel-collector")
    host = urlsplit(settings.endpoint)
    assert service["metadata"]["namespace"] == router["metadata"]["namespace"]
    assert host.hostname == "otel-collector"
    assert host.port in {p["port"] for p in service["spec"]["ports"]}


def test_the_collector_pipeline_is_complete_and_exports_to_a_rendered_backend() -> None:
    objects = render(K8S / "overlays" / "monitoring")
    config_map = find(objects, "ConfigMap", "otel-collector")
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    pipeline = config["service"]["pipelines"]["traces"]
    for stage in ("receivers", "processors", "exporters"):
        assert pipeline[stage] and set(pipeline[stage]) <= set(config[stage]), stage
    assert set(config["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    backend = config["exporters"]["otlp/backend"]["endpoint"]
    name, port = backend.split(":")
    target = find(objects, "Service", name)
    assert int(port) in {p["port"] for p in target["spec"]["ports"]}
    deployment = find(objects, "Deployment", "otel-collector")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    mount = container["volumeMounts"][0]["mountPath"]
    assert container["args"] == [f"--config={mount}/config.yaml"]
    health = config["extensions"]["health_check"]["endpoint"].rsplit(":", 1)[1]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["health"] == int(health)
    assert {ports["otlp-grpc"], ports["otlp-http"]} == {4317, 4318}
