"""Every kustomize overlay renders, validates against its schemas, and hangs together.

No cluster: ``kubectl kustomize`` renders, kubernetes-validate checks core objects
against the Kubernetes OpenAPI schemas (strict: unknown fields fail), and the CRD
kinds are checked as ``deploy_crd_schemas`` explains. The invariants are the mistakes
that schemas cannot see: a Service whose selector matches no pod, a probe on a port the
container does not open, a PodMonitor that scrapes nothing.
"""

from __future__ import annotations

import re
from functools import cache

import kubernetes_validate
import pytest
from deploy_crd_schemas import validate_monitoring, validate_rayservice
from deploy_k8s_helpers import (
    CRD_GROUPS,
    OVERLAY_NAMES,
    Obj,
    PodTemplate,
    container,
    env_of,
    find,
    kubectl,
    overlay_available,
    pod_templates,
    render,
    selector_matches,
)

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(
        kubectl() is None, reason="kubectl not installed (scripts/setup.sh --system)"
    ),
]

#: The oldest Kubernetes release the manifests promise to work on (native sidecars,
#: autoscaling/v2 and policy/v1 are all older).
K8S_VERSION = "1.29.0"
#: Containers that serve no port and so have nothing for a probe to ask (the agent
#: reports engine health over NATS; the kubelet restarts it if it exits).
PORTLESS_SIDECARS = {"eagle-eye-agent"}
EAGLE_EYE_IMAGE = "ghcr.io/eagle-eye/eagle-eye"
#: Monitors for engines users deploy themselves (TGI, llama.cpp): no overlay of ours
#: runs them, so they select nothing here by design.
MONITORS_FOR_ENGINES_WE_DO_NOT_SHIP = {"eagle-eye-other-engines"}


@cache
def rendered(name: str) -> tuple[Obj, ...]:
    from deploy_k8s_helpers import OVERLAYS

    return tuple(render(OVERLAYS / name))


def overlay_params() -> list[object]:
    return [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                not overlay_available(name),
                reason="deploy/k8s/monitoring (observability pack) not generated yet",
            ),
        )
        for name in OVERLAY_NAMES
    ]


def templates(name: str) -> list[PodTemplate]:
    return list(pod_templates(list(rendered(name))))


def test_the_expected_overlays_exist() -> None:
    assert set(OVERLAY_NAMES) >= {
        "vllm-nvidia",
        "vllm-ascend",
        "sglang",
        "ray-serve",
        "production",
        "monitoring",
    }


@pytest.mark.parametrize("overlay", overlay_params())
def test_core_objects_pass_strict_kubernetes_schemas(overlay: str) -> None:
    checked = 0
    for obj in rendered(overlay):
        if obj["apiVersion"].startswith(CRD_GROUPS):
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        checked += 1
    assert checked > 0 or overlay == "monitoring"


@pytest.mark.parametrize("overlay", overlay_params())
def test_custom_resources_pass_their_crd_schemas(overlay: str) -> None:
    for obj in rendered(overlay):
        if obj["apiVersion"] == "monitoring.coreos.com/v1":
            validate_monitoring(obj)
        elif obj["apiVersion"].startswith("ray.io/"):
            validate_rayservice(obj)
            for template in pod_templates([obj]):
                pod_template = {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {"name": "check"},
                    "template": {"metadata": {"labels": template.labels}, "spec": template.spec},
                }
                kubernetes_validate.validate(pod_template, K8S_VERSION, strict=True)
        else:
            assert not obj["apiVersion"].startswith(CRD_GROUPS), obj["apiVersion"]


def test_crd_validation_rejects_typos_and_bad_values() -> None:
    """The CRD checks above would catch a broken object (they are not vacuous)."""
    good = find(list(rendered("ray-serve")), "PodMonitor", "eagle-eye-ray-head")
    typo = {**good, "spec": {**good["spec"], "podMetricEndpoints": []}}
    with pytest.raises(ValueError, match="podMetricEndpoints"):
        validate_monitoring(typo)
    bad_scheme = {
        **good,
        "spec": {**good["spec"], "podMetricsEndpoints": [{"port": "metrics", "scheme": "ftp"}]},
    }
    with pytest.raises(ValueError):
        validate_monitoring(bad_scheme)
    ray = find(list(rendered("ray-serve")), "RayService", "ray-serve-llm")
    broken = {**ray, "spec": {**ray["spec"], "rayClusterConfig": {"workerGroupSpecs": []}}}
    with pytest.raises(Exception, match="headGroupSpec"):
        validate_rayservice(broken)


@pytest.mark.parametrize("overlay", overlay_params())
def test_workload_selectors_match_their_pod_labels(overlay: str) -> None:
    for obj in rendered(overlay):
        if "template" in obj.get("spec", {}) and "selector" in obj["spec"]:
            labels = obj["spec"]["template"]["metadata"]["labels"]
            assert selector_matches(obj["spec"]["selector"], labels), obj["metadata"]["name"]


@pytest.mark.parametrize("overlay", overlay_params())
def test_services_select_pods_that_open_their_target_ports(overlay: str) -> None:
    pods = templates(overlay)
    for svc in (o for o in rendered(overlay) if o["kind"] == "Service"):
        selected = [
            p
            for p in pods
            if p.namespace == svc["metadata"].get("namespace")
            and selector_matches({"matchLabels": svc["spec"]["selector"]}, p.labels)
        ]
        name = svc["metadata"]["name"]
        assert selected, f"Service {name} selects no pod"
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for pod in selected:
                opened = pod.port_names() if isinstance(target, str) else pod.port_numbers()
                assert target in opened, f"Service {name}: {pod.owner} lacks port {target}"


@pytest.mark.parametrize("overlay", overlay_params())
def test_every_container_has_resources_and_every_server_has_probes(overlay: str) -> None:
    for pod in templates(overlay):
        for c in pod.containers(init=True):
            requests = c.get("resources", {}).get("requests", {})
            limits = c.get("resources", {}).get("limits", {})
            where = f"{pod.owner}/{c['name']}"
            assert {"cpu", "memory"} <= set(requests), f"{where}: requests"
            assert "memory" in limits, f"{where}: memory limit"
        for c in pod.containers():
            where = f"{pod.owner}/{c['name']}"
            if c["name"] in PORTLESS_SIDECARS:
                assert not c.get("ports"), f"{where} opens a port: give it probes"
                continue
            assert c.get("ports"), f"{where}: a server with no ports"
            assert "livenessProbe" in c and "readinessProbe" in c, f"{where}: probes"


@pytest.mark.parametrize("overlay", overlay_params())
def test_probes_use_ports_the_container_opens(overlay: str) -> None:
    for pod in templates(overlay):
        for c in pod.containers():
            names = {p["name"] for p in c.get("ports", []) if "name" in p}
            numbers = {p["containerPort"] for p in c.get("ports", [])}
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                probe = c.get(kind)
                if probe is None:
                    continue
                action = probe.get("httpGet") or probe.get("tcpSocket")
                assert action is not None, f"{pod.owner}/{c['name']} {kind}: use an HTTP probe"
                port = action["port"]
                assert port in (names if isinstance(port, str) else numbers), (
                    f"{pod.owner}/{c['name']} {kind} probes port {port} it does not open"
                )


@pytest.mark.parametrize("overlay", overlay_params())
def test_images_are_pinned_and_nothing_escalates(overlay: str) -> None:
    for pod in templates(overlay):
        pod_ctx = pod.spec.get("securityContext", {})
        for c in pod.containers(init=True):
            image, where = c["image"], f"{pod.owner}/{c['name']}"
            assert re.search(r":[\w][\w.-]*$|@sha256:", image), f"{where}: {image} not pinned"
            assert not image.endswith((":latest", ":nightly")), f"{where}: {image}"
            ctx = c.get("securityContext", {})
            assert ctx.get("allowPrivilegeEscalation") is False, f"{where}: escalation"
            assert not ctx.get("privileged"), where
            if image.startswith((EAGLE_EYE_IMAGE, "nats:")) or c["name"] == "code-extractor":
                non_root = ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))
                user = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
                assert non_root is True and user not in (None, 0), f"{where}: runs as root"
                assert ctx.get("readOnlyRootFilesystem") is True, f"{where}: writable root"


@pytest.mark.parametrize("overlay", overlay_params())
def test_pod_monitors_select_the_pods_they_scrape(overlay: str) -> None:
    objects = list(rendered(overlay))
    monitors = [o for o in objects if o["kind"] == "PodMonitor"]
    if overlay == "monitoring":
        # The pack's PodMonitors target engines the other overlays run: check against all.
        pods = [p for other in OVERLAY_NAMES if other != "monitoring" for p in templates(other)]
    else:
        pods = templates(overlay)
    for monitor in monitors:
        name = monitor["metadata"]["name"]
        any_ns = monitor["spec"].get("namespaceSelector", {}).get("any") is True
        ns = monitor["metadata"].get("namespace")
        selected = [
            p
            for p in pods
            if (any_ns or p.namespace == ns)
            and selector_matches(monitor["spec"]["selector"], p.labels)
        ]
        if name in MONITORS_FOR_ENGINES_WE_DO_NOT_SHIP:
            assert not selected, f"{name} now selects a shipped engine: drop the exemption"
            continue
        assert selected, f"PodMonitor {name} selects no pod"
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            port = endpoint.get("port")
            if port is not None:
                assert any(port in p.port_names() for p in selected), (
                    f"PodMonitor {name}: no selected pod opens port {port!r}"
                )


def test_service_monitors_select_services_with_their_ports() -> None:
    if not overlay_available("monitoring"):
        pytest.skip("deploy/k8s/monitoring (observability pack) not generated yet")
    monitors = [o for o in rendered("monitoring") if o["kind"] == "ServiceMonitor"]
    assert monitors
    services = [
        o
        for other in OVERLAY_NAMES
        if other != "monitoring"
        for o in rendered(other)
        if o["kind"] == "Service"
    ]
    for monitor in monitors:
        selected = [
            s
            for s in services
            if selector_matches(monitor["spec"]["selector"], s["metadata"].get("labels", {}))
        ]
        name = monitor["metadata"]["name"]
        assert selected, f"ServiceMonitor {name} selects no Service"
        for endpoint in monitor["spec"]["endpoints"]:
            for svc in selected:
                ports = {p.get("name") for p in svc["spec"]["ports"]}
                assert endpoint["port"] in ports, f"{name}: {svc['metadata']['name']} lacks it"


def test_ray_pod_monitors_split_head_and_workers_as_seed_004_does() -> None:
    objects = list(rendered("ray-serve"))
    pods = templates("ray-serve")
    for name, node_type in (("eagle-eye-ray-head", "head"), ("eagle-eye-ray-worker", "worker")):
        monitor = find(objects, "PodMonitor", name)
        selected = {
            p.labels["ray.io/node-type"]
            for p in pods
            if selector_matches(monitor["spec"]["selector"], p.labels)
        }
        assert selected == {node_type}
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
    head = find(objects, "PodMonitor", "eagle-eye-ray-head")
    ports = [e["port"] for e in head["spec"]["podMetricsEndpoints"]]
    assert ports == ["metrics", "as-metrics", "dash-metrics"]


@pytest.mark.parametrize("overlay", overlay_params())
def test_nats_urls_point_at_a_rendered_nats_service(overlay: str) -> None:
    objects = list(rendered(overlay))
    services = {
        (o["metadata"]["name"], p["port"])
        for o in objects
        if o["kind"] == "Service"
        for p in o["spec"]["ports"]
    }
    for pod in templates(overlay):
        for c in pod.containers():
            url = env_of(c).get("EAGLE_EYE_NATS_URL", {}).get("value")
            if url is None:
                continue
            match = re.fullmatch(r"nats://([\w.-]+):(\d+)", url)
            assert match, url
            host = match.group(1).split(".")[0]
            assert (host, int(match.group(2))) in services, f"{pod.owner}: {url}"


@pytest.mark.parametrize("overlay", ["vllm-nvidia", "vllm-ascend"])
def test_seed_000_flow_is_wired_as_the_seed_describes(overlay: str) -> None:
    objects = list(rendered(overlay))
    assert find(objects, "Namespace", "ai-inference")
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == "ai-inference", obj["metadata"]["name"]
    deploy = find(objects, "Deployment", "vllm-eagle-eye")
    template = deploy["spec"]["template"]
    assert template["metadata"]["labels"]["app"] == "vllm-eagle-eye"
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    source = next(v for v in volumes.values() if "configMap" in v)
    assert source["configMap"]["name"] == "vllm-source-code"

    init = container(template, "code-extractor", init=True)
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    script = init["args"][0]
    assert f"{mounts[source['name']]}/source_code.tar.gz" in script
    site = next(
        n for n, v in volumes.items() if "emptyDir" in v and mounts.get(n) and n != "scratch"
    )
    assert f"--target {mounts[site]}" in script
    assert init["image"] == container(template, "vllm")["image"], "same Python as the engine"

    vllm = container(template, "vllm")
    assert {p["containerPort"] for p in vllm["ports"]} == {8000}
    env = env_of(vllm)
    assert env["PYTHONPATH"]["value"] == mounts[site]
    assert {m["mountPath"] for m in vllm["volumeMounts"] if m["name"] == site} == {mounts[site]}
    assert env["EAGLE_EYE_POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["EAGLE_EYE_ENDPOINT"]["value"] == "http://$(EAGLE_EYE_POD_IP):8000"
    names = [e["name"] for e in vllm["env"]]
    assert names.index("EAGLE_EYE_POD_IP") < names.index("EAGLE_EYE_ENDPOINT"), (
        "$(VAR) expands only variables defined earlier"
    )
    assert env["EAGLE_EYE_NATS_URL"]["value"] == "nats://nats:4222"
    router = find(objects, "Service", "eagle-eye-router")
    assert [p["port"] for p in router["spec"]["ports"]] == [8000], "seed's curl :8000/generate"


def test_ascend_and_nvidia_variants_request_their_accelerator() -> None:
    for overlay, resource, image in (
        ("vllm-nvidia", "nvidia.com/gpu", "vllm/vllm-openai:"),
        ("vllm-ascend", "huawei.com/Ascend910", "quay.io/ascend/vllm-ascend:"),
    ):
        template = find(list(rendered(overlay)), "Deployment", "vllm-eagle-eye")["spec"]["template"]
        vllm = container(template, "vllm")
        assert vllm["resources"]["limits"][resource] == "1"
        assert vllm["image"].startswith(image)
        assert container(template, "code-extractor", init=True)["image"] == vllm["image"]
    ascend = find(list(rendered("vllm-ascend")), "Deployment", "vllm-eagle-eye")
    script = container(ascend["spec"]["template"], "vllm")["args"][0]
    assert 'export PYTHONPATH="/eagle-eye-site${PYTHONPATH:+:$PYTHONPATH}"' in script


def test_production_overlay_turns_on_jetstream_and_the_router_autoscaler() -> None:
    objects = list(rendered("production"))
    config = next(
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("nats-config")
    )
    assert "jetstream {" in config["data"]["nats.conf"]
    nats = find(objects, "StatefulSet", "nats")
    assert nats["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    hpa = find(objects, "HorizontalPodAutoscaler", "eagle-eye-router")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "eagle-eye-router"
    assert "replicas" not in find(objects, "Deployment", "eagle-eye-router")["spec"]
    core = next(o for o in rendered("vllm-nvidia") if o["kind"] == "ConfigMap")
    assert "jetstream" not in core["data"]["nats.conf"].split("#")[0]


#: Stand-ins for downward-API values when expanding $(VAR) in container args.
DOWNWARD_API_SAMPLES = {"status.podIP": "10.1.2.3", "metadata.name": "pod-0"}


def expand_args(c: Obj) -> list[str]:
    """Container args with $(VAR) expanded the way the kubelet does it."""
    values: dict[str, str] = {}
    for var in c.get("env", []):
        if "value" in var:
            values[var["name"]] = var["value"]
        else:
            values[var["name"]] = DOWNWARD_API_SAMPLES[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in c["args"]]


@pytest.mark.parametrize("overlay", overlay_params())
def test_eagle_eye_containers_parse_with_their_command(overlay: str) -> None:
    """`eagle-eye SUBCOMMAND --flag ...` in the manifests parses with the real CLI."""
    import click

    from eagle_eye.cli import main

    ctx = click.Context(main)
    for pod in templates(overlay):
        for c in pod.containers():
            if not c["image"].startswith(EAGLE_EYE_IMAGE):
                continue
            subcommand, *args = expand_args(c)
            command = main.get_command(ctx, subcommand)
            assert command is not None, subcommand
            if not command.params:
                pytest.skip(f"`eagle-eye {subcommand}` is not implemented yet")
            try:
                command.make_context(subcommand, args)
            except click.UsageError as exc:
                pytest.fail(f"{pod.owner}/{c['name']}: eagle-eye {subcommand}: {exc}")
