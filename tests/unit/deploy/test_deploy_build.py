"""The tarball's pure parts, and ``build_bundle`` on small local wheels (no network)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from deploy_wheel_factory import PLUGIN, make_wheel

from eagle_eye.deploy import build as bld
from eagle_eye.deploy import install as inst


def test_tarballs_are_byte_identical_for_equal_inputs() -> None:
    members = [("b.txt", b"two", 0o644), ("a.txt", b"one", 0o755)]
    first = bld.deterministic_tarball(members)
    assert first == bld.deterministic_tarball(list(reversed(members)))
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == ["a.txt", "b.txt"]
    assert {i.mtime for i in infos} == {315532800} and infos[0].mode == 0o755


def test_configmap_size_counts_base64_and_metadata() -> None:
    assert bld.configmap_bytes(3) == 4 + bld.CONFIGMAP_OVERHEAD_BYTES
    assert bld.configmap_bytes(750_000) < bld.CONFIGMAP_LIMIT_BYTES < bld.configmap_bytes(800_000)


def test_kubectl_commands_are_seed_000_step_2() -> None:
    commands = bld.kubectl_commands(
        Path("out/source_code.tar.gz"), namespace="ai-inference", configmap="vllm-source-code"
    )
    assert commands == [
        "kubectl get namespace ai-inference || kubectl create namespace ai-inference",
        "kubectl delete configmap vllm-source-code -n ai-inference --ignore-not-found",
        "kubectl create configmap vllm-source-code "
        "--from-file=source_code.tar.gz=out/source_code.tar.gz -n ai-inference",
    ]


def test_build_bundle_from_local_wheels_without_network(
    wheels: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, deps = wheels
    built = bld.build_bundle(tmp_path / "out", wheel=wheel, find_links=[deps], no_index=True)
    assert {w.name for w in built.wheels} == {"eagle-eye", "nats-py", "click"}
    assert built.size_bytes == built.tarball.stat().st_size
    with tarfile.open(built.tarball) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        requirements = tar.extractfile("requirements.txt").read().decode()  # type: ignore[union-attr]
        installer = tar.extractfile("install.py").read()  # type: ignore[union-attr]
    assert manifest["plugin"] == PLUGIN
    by_name = {w["name"]: w for w in manifest["wheels"]}
    assert by_name["click"]["requirement"] == "click<9,>=8.1"
    assert by_name["eagle-eye"]["requirement"] is None
    assert "nats-py==2.16.0" in requirements.splitlines()
    assert installer == Path(inst.__file__).read_bytes()
    again = bld.build_bundle(tmp_path / "again", wheel=wheel, find_links=[deps], no_index=True)
    assert again.sha256 == built.sha256, "same wheels, same bytes"


def test_build_bundle_refuses_platform_wheels(wheels: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, deps = wheels
    (deps / "click-8.5.1-py3-none-any.whl").unlink()
    make_wheel(deps, "click", "8.5.1", tag="cp311-cp311-manylinux_2_17_x86_64")
    with pytest.raises(inst.BundleError):
        bld.build_bundle(tmp_path / "out", wheel=wheel, find_links=[deps], no_index=True)


def test_build_bundle_refuses_a_wheel_without_the_plugin(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "eagle-eye", "0.1.0")
    with pytest.raises(inst.BundleError, match=r"vllm\.stat_logger_plugins"):
        bld.build_bundle(tmp_path / "out", wheel=wheel, no_index=True)


def test_without_a_checkout_the_release_wheel_is_fetched(
    wheels: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, deps = wheels
    links = tmp_path / "links"
    links.mkdir()
    for path in (wheel, *deps.iterdir()):
        (links / path.name).write_bytes(path.read_bytes())
    built = bld.build_bundle(
        tmp_path / "out", project_version="0.1.0", find_links=[links], no_index=True
    )
    assert built.wheels[0].file == "wheels/eagle_eye-0.1.0+engine-py3-none-any.whl"
    with pytest.raises(inst.BundleError, match="pass --source DIR"):
        bld.build_bundle(
            tmp_path / "out", project_version="9.9.9", find_links=[links], no_index=True
        )
