"""Wheel names, entry points and the engine-side wheel, on small local wheels."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from deploy_wheel_factory import PLUGIN, make_wheel

from eagle_eye.deploy import install as inst
from eagle_eye.deploy import wheels as wh


def test_wheel_names_tell_pure_wheels_from_platform_wheels() -> None:
    assert wh.parse_wheel_name("nats_py-2.16.0-py3-none-any.whl").is_pure
    assert wh.parse_wheel_name("six-1.16.0-py2.py3-none-any.whl").is_pure
    compiled = wh.parse_wheel_name("aiohttp-3.9.5-cp311-cp311-manylinux_2_17_x86_64.whl")
    assert compiled.name == "aiohttp" and not compiled.is_pure
    assert not wh.parse_wheel_name("x-1.0-1-cp311-abi3-linux_aarch64.whl").is_pure
    with pytest.raises(inst.BundleError):
        wh.parse_wheel_name("source.tar.gz")


def test_entry_points_parse_like_importlib() -> None:
    text = "[console_scripts]\neagle-eye = eagle_eye.cli:main\n\n[vllm.stat_logger_plugins]\n"
    text += f"eagle_eye = {PLUGIN}\n"
    assert wh.parse_entry_points(text)["vllm.stat_logger_plugins"] == {"eagle_eye": PLUGIN}


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
    slim = wh.engine_side_wheel(full, out)
    assert slim.name == "eagle_eye-0.1.0+engine-py3-none-any.whl"
    with zipfile.ZipFile(slim) as archive:
        names = set(archive.namelist())
        record = archive.read("eagle_eye-0.1.0+engine.dist-info/RECORD").decode()
        plugin = archive.read("eagle_eye/publish/vllm_plugin.py")
    assert "eagle_eye/route/gateway.py" not in names
    assert "eagle_eye/observe/static/big.js" not in names
    assert "eagle_eye/schema/snapshot-v1.json" in names
    assert "eagle_eye-0.1.0+engine.dist-info/entry_points.txt" in names
    assert wh._record_line("eagle_eye/publish/vllm_plugin.py", plugin) in record.splitlines()
    name, version, _, entry_points = wh.wheel_metadata(slim)
    assert (name, version) == ("eagle-eye", "0.1.0+engine")
    assert entry_points["vllm.stat_logger_plugins"] == {"eagle_eye": PLUGIN}
    again = tmp_path / "again"
    again.mkdir()
    assert wh.engine_side_wheel(full, again).read_bytes() == slim.read_bytes()
