"""The bundle's pure parts, and ``build_bundle``/the CLI on small local wheels (no network)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_eye import bundle as b
from eagle_eye.cli import main

PLUGIN = "eagle_eye.publish.vllm_plugin:EagleEyeStatLogger"


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    *,
    requires: tuple[str, ...] = (),
    entry_points: str = "",
    tag: str = "py3-none-any",
    files: dict[str, str] | None = None,
) -> Path:
    """A minimal but valid wheel (pip installs it)."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-{tag}.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    contents = {
        f"{dist}.dist-info/METADATA": meta,
        f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n",
        **(files or {f"{name.replace('-', '_')}/__init__.py": ""}),
    }
    if entry_points:
        contents[f"{dist}.dist-info/entry_points.txt"] = entry_points
    record = "".join(f"{n},,\n" for n in contents) + f"{dist}.dist-info/RECORD,,\n"
    contents[f"{dist}.dist-info/RECORD"] = record
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in contents.items():
            archive.writestr(member, text)
    return path


@pytest.fixture
def wheels(tmp_path: Path) -> tuple[Path, Path]:
    """Our (fake) wheel and a find-links folder with its two dependencies."""
    own = tmp_path / "own"
    deps = tmp_path / "deps"
    own.mkdir()
    deps.mkdir()
    wheel = make_wheel(
        own,
        "eagle-eye",
        "0.1.0",
        requires=("nats-py<3,>=2.6", "click<9,>=8.1", "aiohttp>=3.9; extra == 'server'"),
        entry_points=f"[vllm.stat_logger_plugins]\neagle_eye = {PLUGIN}\n",
        files={"eagle_eye/__init__.py": "", "eagle_eye/publish/__init__.py": ""},
    )
    make_wheel(deps, "nats-py", "2.16.0", files={"nats/__init__.py": ""})
    make_wheel(deps, "click", "8.5.1")
    return wheel, deps


def test_wheel_names_tell_pure_wheels_from_platform_wheels() -> None:
    assert b.parse_wheel_name("nats_py-2.16.0-py3-none-any.whl").is_pure
    assert b.parse_wheel_name("six-1.16.0-py2.py3-none-any.whl").is_pure
    compiled = b.parse_wheel_name("aiohttp-3.9.5-cp311-cp311-manylinux_2_17_x86_64.whl")
    assert compiled.name == "aiohttp" and not compiled.is_pure
    assert not b.parse_wheel_name("x-1.0-1-cp311-abi3-linux_aarch64.whl").is_pure
    with pytest.raises(b.BundleError):
        b.parse_wheel_name("source.tar.gz")


def test_requirements_parse_specifiers_and_skip_extras() -> None:
    req = b.parse_requirement("nats-py<3,>=2.6")
    assert req == b.Requirement("nats-py", (("<", "3"), (">=", "2.6")))
    assert b.parse_requirement("Click (>=8.1)") == b.Requirement("click", ((">=", "8.1"),))
    assert b.parse_requirement("aiohttp>=3.9; extra == 'server'") is None
    with pytest.raises(b.BundleError):
        b.parse_requirement("nats-py >>2")


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
    req = b.parse_requirement(f"x{spec}")
    assert req is not None
    assert b.version_satisfies(version, req.specifiers) is ok


def test_dependencies_already_in_the_image_are_used_when_they_satisfy() -> None:
    wheels = [
        b.BundledWheel("wheels/e.whl", "eagle-eye", "0.1.0", "0", None),
        b.BundledWheel("wheels/n.whl", "nats-py", "2.16.0", "0", "nats-py<3,>=2.6"),
        b.BundledWheel("wheels/c.whl", "click", "8.5.1", "0", "click<9,>=8.1"),
    ]
    image = {"click": "8.1.7", "nats-py": "2.1.0", "eagle-eye": "0.0.1"}
    chosen, notes = b.select_wheels(wheels, image.get)
    assert [w.name for w in chosen] == ["eagle-eye", "nats-py"]
    assert notes == ["using the image's click 8.1.7 (meets click<9,>=8.1)"]
    chosen, notes = b.select_wheels(wheels, image.get, install_all=True)
    assert len(chosen) == 3 and notes == []


def test_tarballs_are_byte_identical_for_equal_inputs() -> None:
    members = [("b.txt", b"two", 0o644), ("a.txt", b"one", 0o755)]
    first = b.deterministic_tarball(members)
    assert first == b.deterministic_tarball(list(reversed(members)))
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == ["a.txt", "b.txt"]
    assert {i.mtime for i in infos} == {315532800} and infos[0].mode == 0o755


def test_configmap_size_counts_base64_and_metadata() -> None:
    assert b.configmap_bytes(3) == 4 + b.CONFIGMAP_OVERHEAD_BYTES
    assert b.configmap_bytes(750_000) < b.CONFIGMAP_LIMIT_BYTES < b.configmap_bytes(800_000)


def test_kubectl_commands_are_seed_000_step_2() -> None:
    commands = b.kubectl_commands(
        Path("out/source_code.tar.gz"), namespace="ai-inference", configmap="vllm-source-code"
    )
    assert commands == [
        "kubectl get namespace ai-inference || kubectl create namespace ai-inference",
        "kubectl delete configmap vllm-source-code -n ai-inference --ignore-not-found",
        "kubectl create configmap vllm-source-code "
        "--from-file=source_code.tar.gz=out/source_code.tar.gz -n ai-inference",
    ]


def test_entry_points_parse_like_importlib() -> None:
    text = "[console_scripts]\neagle-eye = eagle_eye.cli:main\n\n[vllm.stat_logger_plugins]\n"
    text += f"eagle_eye = {PLUGIN}\n"
    assert b.parse_entry_points(text)["vllm.stat_logger_plugins"] == {"eagle_eye": PLUGIN}


def test_build_bundle_from_local_wheels_without_network(
    wheels: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, deps = wheels
    built = b.build_bundle(tmp_path / "out", wheel=wheel, find_links=[deps], no_index=True)
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
    assert installer == Path(b.__file__).read_bytes()
    again = b.build_bundle(tmp_path / "again", wheel=wheel, find_links=[deps], no_index=True)
    assert again.sha256 == built.sha256, "same wheels, same bytes"


def test_build_bundle_refuses_platform_wheels(wheels: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, deps = wheels
    (deps / "click-8.5.1-py3-none-any.whl").unlink()
    make_wheel(deps, "click", "8.5.1", tag="cp311-cp311-manylinux_2_17_x86_64")
    with pytest.raises(b.BundleError):
        b.build_bundle(tmp_path / "out", wheel=wheel, find_links=[deps], no_index=True)


def test_build_bundle_refuses_a_wheel_without_the_plugin(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "eagle-eye", "0.1.0")
    with pytest.raises(b.BundleError, match=r"vllm\.stat_logger_plugins"):
        b.build_bundle(tmp_path / "out", wheel=wheel, no_index=True)


def test_cli_fails_offline_with_what_to_do(wheels: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, _ = wheels
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["k8s", "bundle", "--out", str(tmp_path / "out"), "--wheel", str(wheel)]
    result = CliRunner().invoke(main, [*args, "--find-links", str(empty), "--no-index"])
    assert result.exit_code == 1
    assert "could not download the engine-side dependency wheels" in result.output
    assert "is this machine offline?" in result.output
    assert "--find-links wheels/ --no-index" in result.output
    assert not (tmp_path / "out" / "source_code.tar.gz").exists()


def test_cli_prints_the_configmap_commands(wheels: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, deps = wheels
    out = tmp_path / "out"
    args = ["k8s", "bundle", "--out", str(out), "--wheel", str(wheel), "--no-index"]
    result = CliRunner().invoke(main, [*args, "--find-links", str(deps)])
    assert result.exit_code == 0, result.output
    assert (
        "kubectl create configmap vllm-source-code "
        f"--from-file=source_code.tar.gz={out / 'source_code.tar.gz'} -n ai-inference"
    ) in result.output


def test_installer_checks_sums_and_installs_by_unzipping(
    wheels: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, deps = wheels
    built = b.build_bundle(tmp_path / "out", wheel=wheel, find_links=[deps], no_index=True)
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
    with pytest.raises(b.BundleError, match="refusing"):
        b._prepare_target(target)
    assert (target / "precious.txt").read_text() == "keep me"


def test_engine_side_wheel_keeps_only_what_the_engine_imports(tmp_path: Path) -> None:
    files = {
        "eagle_eye/__init__.py": "",
        "eagle_eye/settings.py": "",
        "eagle_eye/publish/vllm_plugin.py": "x = 1\n",
        "eagle_eye/schema/snapshot-v1.json": "{}",
        "eagle_eye/route/gateway.py": "",
        "eagle_eye/observe/static/big.js": "0" * 10_000,
    }
    entry = f"[vllm.stat_logger_plugins]\neagle_eye = {PLUGIN}\n"
    full = make_wheel(tmp_path, "eagle-eye", "0.1.0", entry_points=entry, files=files)
    out = tmp_path / "slim"
    out.mkdir()
    slim = b.engine_side_wheel(full, out)
    assert slim.name == "eagle_eye-0.1.0+engine-py3-none-any.whl"
    with zipfile.ZipFile(slim) as archive:
        names = set(archive.namelist())
        record = archive.read("eagle_eye-0.1.0+engine.dist-info/RECORD").decode()
        plugin = archive.read("eagle_eye/publish/vllm_plugin.py")
    assert "eagle_eye/route/gateway.py" not in names
    assert "eagle_eye/observe/static/big.js" not in names
    assert "eagle_eye/schema/snapshot-v1.json" in names
    assert "eagle_eye-0.1.0+engine.dist-info/entry_points.txt" in names
    assert b._record_line("eagle_eye/publish/vllm_plugin.py", plugin) in record.splitlines()
    name, version, _, entry_points = b.wheel_metadata(slim)
    assert (name, version) == ("eagle-eye", "0.1.0+engine")
    assert entry_points["vllm.stat_logger_plugins"] == {"eagle_eye": PLUGIN}
    again = tmp_path / "again"
    again.mkdir()
    assert b.engine_side_wheel(full, again).read_bytes() == slim.read_bytes()


def test_without_a_checkout_the_release_wheel_is_fetched(
    wheels: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, deps = wheels
    links = tmp_path / "links"
    links.mkdir()
    for path in (wheel, *deps.iterdir()):
        (links / path.name).write_bytes(path.read_bytes())
    built = b.build_bundle(
        tmp_path / "out", project_version="0.1.0", find_links=[links], no_index=True
    )
    assert built.wheels[0].file == "wheels/eagle_eye-0.1.0+engine-py3-none-any.whl"
    with pytest.raises(b.BundleError, match="pass --source DIR"):
        b.build_bundle(tmp_path / "out", project_version="9.9.9", find_links=[links], no_index=True)
