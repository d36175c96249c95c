"""The wheels that go into the bundle: ours (slimmed to the engine side) and its deps.

Runs on the operator's machine, which may reach a package index; the pods never do.
``pip`` is driven through a ``Runner`` (``argv -> CompletedProcess``) so tests can swap
it, and every wheel the bundle carries must be pure Python (``py3-none-any``): one
bundle serves x86-64 and ARM64 nodes and every Python 3 the engine images ship.

``engine_side_wheel`` repacks our wheel with only what the engine side imports
(``ENGINE_SIDE_FILES``/``ENGINE_SIDE_DIRS``) as version ``X+engine``, so the bundle stays
far below the ConfigMap limit however large the router, dashboard or benchmarks grow.
"""

from __future__ import annotations

import base64
import email.parser
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eagle_eye.deploy.install import (
    PROJECT,
    BundleError,
    Requirement,
    normalize_name,
    output_tail,
    parse_requirement,
)

#: Fixed timestamp for every tar member and the gzip header: same inputs, same bytes.
EPOCH_S = 315532800  # 1980-01-01, the earliest time a wheel's zip can hold
#: Set for the wheel build: the dashboard's chart library (fetched with npm at build
#: time, see setup.py) is never part of the engine side, so the bundle needs no npm.
WITHOUT_CHARTS_ENV = "EAGLE_EYE_WITHOUT_CHARTS"
#: What the engine side imports (the design keeps it free of router, simulator and
#: benchmark code): the bundle carries only these.
ENGINE_SIDE_FILES = (
    "eagle_eye/__init__.py",
    "eagle_eye/py.typed",
    "eagle_eye/cli.py",
    "eagle_eye/errors.py",
    "eagle_eye/lazy_group.py",
    "eagle_eye/settings.py",
    "eagle_eye/snapshot.py",
    "eagle_eye/subjects.py",
)
ENGINE_SIDE_DIRS = ("eagle_eye/bus/", "eagle_eye/publish/", "eagle_eye/schema/")
#: Local version label of the engine-side wheel: a distinct artifact, never mistaken for
#: the full wheel of the same release.
ENGINE_LOCAL_VERSION = "engine"
_PURE_TAG = re.compile(r"^py[23](\.py[23])*-none-any$")


@dataclass(frozen=True)
class WheelName:
    """A wheel file name split per PEP 427: ``name-version(-build)?-py-abi-platform.whl``."""

    name: str
    version: str
    tag: str

    @property
    def is_pure(self) -> bool:
        """True for ``py3-none-any`` style wheels, which install on any CPU and Python 3."""
        return _PURE_TAG.match(self.tag) is not None


def parse_wheel_name(filename: str) -> WheelName:
    """Split a wheel's file name; raises ``BundleError`` for anything else."""
    base = os.path.basename(filename)
    if not base.endswith(".whl"):
        raise BundleError(f"{base}: not a wheel file")
    parts = base[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        raise BundleError(f"{base}: not a PEP 427 wheel name")
    return WheelName(name=normalize_name(parts[0]), version=parts[1], tag="-".join(parts[-3:]))


def wheel_metadata(wheel: Path) -> tuple[str, str, list[Requirement], dict[str, dict[str, str]]]:
    """Name, version, runtime requirements and entry points read from a wheel's dist-info."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        if meta_name is None:
            raise BundleError(f"{wheel.name}: no METADATA in the wheel")
        meta = email.parser.Parser().parsestr(archive.read(meta_name).decode("utf-8"))
        ep_name = meta_name.replace("METADATA", "entry_points.txt")
        entry_text = archive.read(ep_name).decode("utf-8") if ep_name in names else ""
    requirements = [
        req
        for raw in meta.get_all("Requires-Dist") or []
        if (req := parse_requirement(raw)) is not None
    ]
    return meta["Name"], meta["Version"], requirements, parse_entry_points(entry_text)


def parse_entry_points(text: str) -> dict[str, dict[str, str]]:
    """``entry_points.txt`` as ``{group: {name: "module:attr"}}``."""
    groups: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = groups.setdefault(line[1:-1].strip(), {})
        elif current is not None and "=" in line:
            name, _, value = line.partition("=")
            current[name.strip()] = value.strip()
    return groups


# -- pip (build time) ----------------------------------------------------------------

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def run_pip(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The default ``Runner``: reproducible builds, no version-check chatter, no charts."""
    env = dict(
        os.environ,
        SOURCE_DATE_EPOCH=str(EPOCH_S),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        **{WITHOUT_CHARTS_ENV: "1"},
    )
    return subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False)


def find_source_tree(start: Path) -> Path | None:
    """The Eagle Eye checkout ``start`` lives in (a ``pyproject.toml`` naming us), if any."""
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and re.search(
            r'^name\s*=\s*"eagle-eye"', pyproject.read_text("utf-8"), re.MULTILINE
        ):
            return folder
    return None


def build_project_wheel(source: Path, dest: Path, run: Runner = run_pip) -> Path:
    """Build our wheel from a clean copy of ``source`` (never writes into the checkout)."""
    with tempfile.TemporaryDirectory(prefix="eagle-eye-src-") as tmp:
        copy = Path(tmp) / "eagle-eye"
        copy.mkdir()
        for name in os.listdir(source):
            if name in ("pyproject.toml", "setup.cfg", "setup.py", "MANIFEST.in") or (
                name.upper().startswith(("README", "LICENSE", "NOTICE"))
            ):
                shutil.copy2(source / name, copy / name)
        shutil.copytree(
            source / "src",
            copy / "src",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
        )
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest)]
        result = run([*argv, str(copy.resolve())])
        if result.returncode != 0:
            raise BundleError(
                "building the eagle-eye wheel failed (pip fetches setuptools at build time;"
                " offline, pass --wheel PATH with a wheel built elsewhere):\n"
                + output_tail(result.stderr or result.stdout)
            )
    wheels = sorted(dest.glob("eagle_eye-*.whl"))
    if not wheels:
        raise BundleError(f"pip reported success but wrote no eagle_eye wheel into {dest}")
    return wheels[-1]


def _index_flags(find_links: Sequence[Path], no_index: bool) -> list[str]:
    flags = []
    for folder in find_links:
        flags += ["--find-links", str(folder.resolve())]
    if no_index:
        flags.append("--no-index")
    return flags


def download_project_wheel(
    version: str,
    dest: Path,
    *,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    run: Runner = run_pip,
) -> Path:
    """Our own released wheel from the index (or ``find_links``), for installs without a
    source checkout."""
    argv = [
        sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
        "--dest", str(dest),
    ]  # fmt: skip
    result = run([*argv, *_index_flags(find_links, no_index), f"{PROJECT}=={version}"])
    wheels = sorted(dest.glob("eagle_eye-*.whl"))
    if result.returncode != 0 or not wheels:
        raise BundleError(
            f"no eagle-eye source tree here and pip could not fetch the {PROJECT} {version} "
            "wheel: pass --source DIR (a checkout) or --wheel FILE.\npip said:\n"
            + output_tail(result.stderr or result.stdout)
        )
    return wheels[-1]


def download_dependency_wheels(
    requirements: Sequence[Requirement],
    dest: Path,
    *,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    run: Runner = run_pip,
) -> list[Path]:
    """Fetch pure-Python wheels for ``requirements`` (and theirs) into ``dest``.

    ``--platform any --implementation py --python-version 3.10`` makes pip pick only
    wheels that install on every engine image we support, whatever this machine is.
    """
    if not requirements:
        return []
    argv = [
        sys.executable, "-m", "pip", "download", "-q", "--dest", str(dest),
        "--only-binary=:all:", "--platform", "any", "--implementation", "py",
        "--python-version", "3.10",
    ]  # fmt: skip
    argv += _index_flags(find_links, no_index)
    result = run([*argv, *(str(r) for r in requirements)])
    if result.returncode != 0:
        names = " ".join(f"'{r}'" for r in requirements)
        raise BundleError(
            "could not download the engine-side dependency wheels "
            f"({', '.join(r.name for r in requirements)}): is this machine offline?\n"
            "On a machine with access to your package index run\n"
            f"  pip download --only-binary=:all: --platform any --implementation py "
            f"--python-version 3.10 -d wheels/ {names}\n"
            "copy wheels/ here and pass --find-links wheels/ --no-index.\n"
            "pip said:\n" + output_tail(result.stderr or result.stdout)
        )
    return sorted(dest.glob("*.whl"))


# -- the engine-side wheel -----------------------------------------------------------


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _engine_side_files(wheel: Path, old_info: str, new_info: str, version: str) -> dict[str, bytes]:
    """The engine-side members of ``wheel``, its dist-info renamed to ``new_info`` and its
    METADATA carrying ``version`` (RECORD is left out: the caller writes a new one)."""
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if name.startswith(old_info):
                if name.endswith("/RECORD"):
                    continue
                data = archive.read(name)
                if name.endswith("/METADATA"):
                    data = re.sub(
                        rb"^Version: .*$",
                        f"Version: {version}".encode(),
                        data,
                        count=1,
                        flags=re.MULTILINE,
                    )
                files[new_info + name[len(old_info) :]] = data
            elif (
                name in ENGINE_SIDE_FILES or name.startswith(ENGINE_SIDE_DIRS)
            ) and "/__pycache__/" not in name:
                files[name] = archive.read(name)
    return files


def engine_side_wheel(wheel: Path, dest: Path) -> Path:
    """Repack our wheel with only the engine-side modules, as ``VERSION+engine``.

    The dist-info (metadata, entry points) is kept and its RECORD rewritten, so pip and
    ``importlib.metadata`` treat it as any other wheel. Byte-identical for equal input.
    """
    parsed = parse_wheel_name(wheel.name)
    old_info = f"eagle_eye-{parsed.version}.dist-info/"
    version = f"{parsed.version}+{ENGINE_LOCAL_VERSION}"
    new_info = f"eagle_eye-{version}.dist-info/"
    files = _engine_side_files(wheel, old_info, new_info, version)
    if new_info + "METADATA" not in files:
        raise BundleError(f"{wheel.name}: no {old_info}METADATA")
    record = [_record_line(name, data) for name, data in files.items()]
    files[new_info + "RECORD"] = ("\n".join([*record, f"{new_info}RECORD,,"]) + "\n").encode()
    out = dest / f"eagle_eye-{version}-{parsed.tag}.whl"
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return out
