"""The installer half (shipped as the bundle's ``install.py``): requirement and version
checks, which wheels to install, and the installer run as a standalone file."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from eagle_eye.deploy import build as bld
from eagle_eye.deploy import install as inst


def test_requirements_parse_specifiers_and_skip_extras() -> None:
    req = inst.parse_requirement("nats-py<3,>=2.6")
    assert req == inst.Requirement("nats-py", (("<", "3"), (">=", "2.6")))
    assert inst.parse_requirement("Click (>=8.1)") == inst.Requirement("click", ((">=", "8.1"),))
    assert inst.parse_requirement("aiohttp>=3.9; extra == 'server'") is None
    with pytest.raises(inst.BundleError):
        inst.parse_requirement("nats-py >>2")


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("8.1.7", ">=8.1,<9", True),
        ("8.0.4", ">=8.1,<9", False),
        ("9.0", ">=8.1,<9", False),
        ("2.6", ">=2.6", True),
        ("2.10.0", "<2.9", False),
        ("8.2.0rc1", ">=8.1", True),
        ("1.4.2", "~=1.4", True),
        ("2.0", "~=1.4", False),
        ("3.1.4", "==3.1.*", True),
        ("3.2", "!=3.2.0", False),
    ],
)
def test_version_satisfies_release_comparisons(version: str, spec: str, ok: bool) -> None:
    req = inst.parse_requirement(f"x{spec}")
    assert req is not None
    assert inst.version_satisfies(version, req.specifiers) is ok


def test_dependencies_already_in_the_image_are_used_when_they_satisfy() -> None:
    wheels = [
        inst.BundledWheel("wheels/e.whl", "eagle-eye", "0.1.0", "0", None),
        inst.BundledWheel("wheels/n.whl", "nats-py", "2.16.0", "0", "nats-py<3,>=2.6"),
        inst.BundledWheel("wheels/c.whl", "click", "8.5.1", "0", "click<9,>=8.1"),
    ]
    image = {"click": "8.1.7", "nats-py": "2.1.0", "eagle-eye": "0.0.1"}
    chosen, notes = inst.select_wheels(wheels, image.get)
    assert [w.name for w in chosen] == ["eagle-eye", "nats-py"]
    assert notes == ["using the image's click 8.1.7 (meets click<9,>=8.1)"]
    chosen, notes = inst.select_wheels(wheels, image.get, install_all=True)
    assert len(chosen) == 3 and notes == []


def test_installer_checks_sums_and_installs_by_unzipping(
    wheels: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, deps = wheels
    built = bld.build_bundle(tmp_path / "out", wheel=wheel, find_links=[deps], no_index=True)
    unpacked = tmp_path / "unpacked"
    with tarfile.open(built.tarball) as tar:
        tar.extractall(unpacked, filter="data")
    target = tmp_path / "site"
    argv = [sys.executable, str(unpacked / "install.py"), "--target", str(target)]
    done = subprocess.run(
        [*argv, "--installer", "unzip", "--all"], capture_output=True, text=True, timeout=60
    )
    # The fake wheel has no real plugin module: the entry point resolves, the import not.
    assert "not importable after install: eagle_eye.publish.vllm_plugin" in done.stderr
    assert (target / "nats" / "__init__.py").is_file()
    assert (target / "eagle_eye-0.1.0+engine.dist-info" / "entry_points.txt").is_file()

    corrupt = next((unpacked / "wheels").glob("nats_py-*.whl"))
    corrupt.write_bytes(corrupt.read_bytes() + b"x")
    failed = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert "SHA-256 mismatch, the bundle is corrupt" in failed.stderr


def test_installer_refuses_to_clear_a_folder_it_did_not_write(tmp_path: Path) -> None:
    target = tmp_path / "site"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(inst.BundleError, match="refusing"):
        inst._prepare_target(target)
    assert (target / "precious.txt").read_text() == "keep me"
