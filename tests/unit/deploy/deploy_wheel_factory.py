"""Small but valid wheels for the deploy tests (pip installs them), built in a temp dir."""

from __future__ import annotations

import zipfile
from pathlib import Path

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
