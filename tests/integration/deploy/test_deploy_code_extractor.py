"""Seed 000's code-extractor step, run for real on the real bundle, without a cluster.

``eagle-eye k8s bundle`` builds ``source_code.tar.gz`` from this checkout (our wheel
plus the nats-py and click wheels, fetched at build time by pip). The init container's
own script is taken from the rendered manifest, its mount paths mapped onto a temporary
directory, and run with a fresh virtualenv's ``python3`` standing in for the engine
image's. Then, with ``PYTHONPATH`` set as the vLLM container sets it, vLLM's plugin
discovery (``importlib.metadata.entry_points(group="vllm.stat_logger_plugins")``) must
find and load our stat logger.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from deploy_k8s_helpers import OVERLAYS, container, env_of, find, kubectl, render

from eagle_eye.cli import main
from eagle_eye.deploy.build import CONFIGMAP_LIMIT_BYTES, TARBALL_NAME

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.skipif(
        kubectl() is None, reason="kubectl not installed (scripts/setup.sh --system)"
    ),
]

ENTRY_POINT_PROBE = """
import importlib.metadata as m, json, sys
eps = [e for e in m.entry_points(group="vllm.stat_logger_plugins") if e.name == "eagle_eye"]
cls = eps[0].load() if eps else None
import nats, click
print(json.dumps({
    "values": [e.value for e in eps],
    "class": cls.__name__ if cls else None,
    "module_file": sys.modules[cls.__module__].__file__ if cls else None,
    "nats_file": nats.__file__,
    "click_file": click.__file__,
}))
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("bundle")
    result = CliRunner().invoke(main, ["k8s", "bundle", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return out / TARBALL_NAME, json.loads(result.output)


@pytest.fixture(scope="module")
def init_container() -> tuple[dict[str, object], dict[str, object]]:
    objects = render(OVERLAYS / "vllm-nvidia")
    template = find(objects, "Deployment", "vllm-eagle-eye")["spec"]["template"]
    return template, container(template, "code-extractor", init=True)


def make_venv(path: Path, *, with_pip: bool = True) -> Path:
    venv.EnvBuilder(with_pip=with_pip, clear=True).create(path)
    return path / "bin" / "python"


def run_code_extractor(
    template: dict, init: dict, bundle_path: Path, root: Path, python: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The init container's script with its mounts mapped under ``root``."""
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    script = init["args"][0]
    mapping: dict[str, Path] = {}
    for mount in init["volumeMounts"]:
        local = root / mount["name"]
        local.mkdir(parents=True)
        mapping[mount["mountPath"]] = local
        if "configMap" in volumes[mount["name"]]:
            # A ConfigMap volume shows each key as a file: source_code.tar.gz.
            (local / TARBALL_NAME).write_bytes(bundle_path.read_bytes())
    # One pass, whole path components only: the local paths themselves start with /tmp.
    pattern = "|".join(re.escape(m) for m in sorted(mapping, key=len, reverse=True))
    script = re.sub(
        rf"(?<![\w/.-])({pattern})(?=[/\s\"']|$)",
        lambda match: str(mapping[match.group(1)]),
        script,
        flags=re.MULTILINE,
    )
    env = {
        "PATH": f"{python.parent}{os.pathsep}/usr/bin:/bin",
        "HOME": str(mapping.get("/tmp", root)),
    }
    result = subprocess.run(
        [*init["command"], script], capture_output=True, text=True, env=env, timeout=120
    )
    site_mount = env_of(container(template, "vllm"))["PYTHONPATH"]["value"]
    return result, mapping[site_mount]


def probe_entry_points(python: Path, site: Path) -> dict[str, str | list[str] | None]:
    result = subprocess.run(
        [str(python), "-c", ENTRY_POINT_PROBE],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_bundle_is_small_pure_and_prints_the_seed_command(
    bundle: tuple[Path, dict[str, object]],
) -> None:
    path, report = bundle
    names = {w["name"] for w in report["wheels"]}  # type: ignore[attr-defined]
    assert names == {"eagle-eye", "nats-py", "click"}
    assert all(w["file"].endswith("-py3-none-any.whl") for w in report["wheels"])  # type: ignore[attr-defined]
    assert path.stat().st_size < 1024 * 1024
    assert (
        f"kubectl create configmap vllm-source-code --from-file={TARBALL_NAME}={path} "
        "-n ai-inference"
    ) in report["kubectl"]  # type: ignore[operator]
    with tarfile.open(path) as tar:
        members = set(tar.getnames())
    assert {"install.py", "requirements.txt", "manifest.json", "README.txt"} <= members


def test_configmap_made_by_kubectl_is_under_the_1_mib_limit(
    bundle: tuple[Path, dict[str, object]],
) -> None:
    path, _ = bundle
    result = subprocess.run(
        [
            "kubectl", "create", "configmap", "vllm-source-code",
            f"--from-file={TARBALL_NAME}={path}", "-n", "ai-inference",
            "--dry-run=client", "-o", "yaml",
        ],
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    configmap = yaml.safe_load(result.stdout)
    assert TARBALL_NAME in configmap["binaryData"]
    assert len(result.stdout) < CONFIGMAP_LIMIT_BYTES


def test_code_extractor_installs_the_plugin_that_vllm_discovers(
    bundle: tuple[Path, dict[str, object]],
    init_container: tuple[dict, dict],
    tmp_path: Path,
) -> None:
    """A fresh engine Python first; then one that already ships click, which keeps its own.

    (One virtualenv for both halves: creating one with pip is the slow part of this file.)
    """
    template, init = init_container
    python = make_venv(tmp_path / "engine-python")
    result, site = run_code_extractor(template, init, bundle[0], tmp_path / "pod", python)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--no-index" in result.stdout and f"--target {site}" in result.stdout
    found = probe_entry_points(python, site)
    assert found["values"] == ["eagle_eye.publish.vllm_plugin:EagleEyeStatLogger"]
    assert found["class"] == "EagleEyeStatLogger"
    for key in ("module_file", "nats_file", "click_file"):
        assert str(found[key]).startswith(str(site)), key

    # The image already has click: PYTHONPATH must not shadow it with ours.
    click_wheel = next(site.parent.glob("scratch/eagle-eye-bundle/wheels/click-*.whl"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", str(click_wheel)],
        check=True,
        timeout=120,
    )
    result, site = run_code_extractor(template, init, bundle[0], tmp_path / "pod2", python)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "using the image's click" in result.stdout
    assert not (site / "click").exists()
    found = probe_entry_points(python, site)
    assert found["class"] == "EagleEyeStatLogger"
    assert str(found["module_file"]).startswith(str(site))
    assert not str(found["click_file"]).startswith(str(site))


def test_images_without_pip_get_the_wheels_unzipped(
    bundle: tuple[Path, dict[str, object]],
    init_container: tuple[dict, dict],
    tmp_path: Path,
) -> None:
    template, init = init_container
    python = make_venv(tmp_path / "engine-python", with_pip=False)
    result, site = run_code_extractor(template, init, bundle[0], tmp_path / "pod", python)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "+ unzip wheels/eagle_eye-" in result.stdout
    found = probe_entry_points(python, site)
    assert found["class"] == "EagleEyeStatLogger"


def test_a_restarted_init_container_reinstalls_cleanly(
    bundle: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    """Init containers rerun when a pod restarts; the emptyDir still holds the last run."""
    unpacked = tmp_path / "bundle"
    with tarfile.open(bundle[0]) as tar:
        tar.extractall(unpacked, filter="data")
    site = tmp_path / "site"
    argv = [sys.executable, str(unpacked / "install.py"), "--target", str(site), "--all"]
    for _ in range(2):
        subprocess.run(
            [*argv, "--installer", "unzip"],
            check=True,
            capture_output=True,
            timeout=120,
        )
    names = sorted(p.name.split("-")[0] for p in site.glob("*.dist-info"))
    assert names == ["click", "eagle_eye", "nats_py"]
    assert (site / ".eagle-eye-bundle").is_file()


VLLM_LOADER_PROBE = """
import json, sys
from vllm.plugins import load_plugins_by_group
from vllm.v1.metrics.loggers import StatLoggerBase
plugins = load_plugins_by_group("vllm.stat_logger_plugins")
cls = plugins.get("eagle_eye")
print(json.dumps({
    "names": sorted(plugins),
    "subclass": bool(cls) and issubclass(cls, StatLoggerBase),
    "module_file": sys.modules[cls.__module__].__file__ if cls else None,
}))
"""


@pytest.mark.vllm
def test_real_vllm_loads_the_plugin_the_code_extractor_installed(
    bundle: tuple[Path, dict[str, object]],
    init_container: tuple[dict, dict],
    tmp_path: Path,
) -> None:
    """The init script with vLLM's own Python, then vLLM's own plugin loader.

    The vLLM test environment (scripts/vllm_env.sh) stands in for the engine image. It
    has eagle-eye installed too, so this also shows the PYTHONPATH copy wins.
    """
    python_text = os.environ.get("EAGLE_EYE_VLLM_PYTHON", "").strip()
    if not python_text:
        pytest.skip("EAGLE_EYE_VLLM_PYTHON is unset (scripts/vllm_env.sh --print-python)")
    python = Path(python_text)
    template, init = init_container
    result, site = run_code_extractor(template, init, bundle[0], tmp_path / "pod", python)
    assert result.returncode == 0, result.stdout + result.stderr
    probe = subprocess.run(
        [str(python), "-c", VLLM_LOADER_PROBE],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "VLLM_NO_USAGE_STATS": "1"},
        timeout=240,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert "eagle_eye" in found["names"]
    assert found["subclass"] is True
    assert str(found["module_file"]).startswith(str(site))
