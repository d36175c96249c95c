"""The engine-side bundle: build it on the operator's machine, install it in the pod.

Seed 000 ships the publisher to vLLM pods in a ConfigMap (``vllm-source-code``, key
``source_code.tar.gz``) that an init container (``code-extractor``) unpacks. This module
is both halves of that flow:

* **Build** (``build_bundle``, driven by ``eagle-eye k8s bundle``): our wheel, repacked
  with only the engine-side modules (``engine_side_wheel``, version ``X+engine``), plus
  the engine-side dependency wheels (nats-py, click), all pure-Python ``py3-none-any`` so
  one bundle serves x86-64 and ARM64 nodes, a pinned ``requirements.txt``, a
  ``manifest.json`` with SHA-256 sums, and this very file as ``install.py``. Downloads
  happen here, at build time, never at pod start.
* **Install** (``main``, run in the init container as ``python3 install.py --target
  DIR``): verify the sums, then ``pip install --no-index --find-links wheels --no-deps
  --target DIR`` (or unzip the wheels where the image has no pip), and check that the
  entry point ``vllm.stat_logger_plugins`` resolves from ``DIR``. The vLLM container puts
  ``DIR`` on ``PYTHONPATH``; ``importlib.metadata`` scans every ``sys.path`` entry for
  ``*.dist-info``, which is how vLLM's plugin loader finds us.

A dependency the engine image already has at a satisfying version (click, usually) is
not installed into ``DIR``: ``PYTHONPATH`` comes before site-packages, so a second copy
would shadow the image's own and could break the engine. ``--all`` overrides that.

Because the file runs inside arbitrary engine images it uses only the standard library.
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

try:  # as install.py inside an engine image, eagle_eye is not importable yet
    from eagle_eye.errors import EagleEyeError
except ImportError:  # pragma: no cover - exercised by the code-extractor test

    class EagleEyeError(Exception):  # type: ignore[no-redef]
        """Stand-in for ``eagle_eye.errors.EagleEyeError`` outside the package."""


BUNDLE_FORMAT = 1
TARBALL_NAME = "source_code.tar.gz"
PLUGIN_GROUP = "vllm.stat_logger_plugins"
PLUGIN_NAME = "eagle_eye"
PROJECT = "eagle-eye"
#: Kubernetes rejects objects over 1 MiB (etcd's limit); the ConfigMap also carries
#: metadata, so leave room for it.
CONFIGMAP_LIMIT_BYTES = 1024 * 1024
CONFIGMAP_OVERHEAD_BYTES = 4 * 1024
#: Written into the target so a re-run (init containers restart) may clear it safely.
MARKER_FILE = ".eagle-eye-bundle"
#: Fixed timestamp for every tar member and the gzip header: same inputs, same bytes.
_EPOCH_S = 315532800  # 1980-01-01, the earliest time a wheel's zip can hold
#: What the engine side imports (the design keeps it free of router, simulator and
#: benchmark code): the bundle carries only these, so it stays far below the ConfigMap
#: limit however large the rest of the package grows.
ENGINE_SIDE_FILES = (
    "eagle_eye/__init__.py",
    "eagle_eye/py.typed",
    "eagle_eye/cli.py",
    "eagle_eye/settings.py",
    "eagle_eye/snapshot.py",
    "eagle_eye/subjects.py",
)
ENGINE_SIDE_DIRS = ("eagle_eye/bus/", "eagle_eye/publish/", "eagle_eye/schema/")
#: Local version label of the engine-side wheel: a distinct artifact, never mistaken for
#: the full wheel of the same release.
ENGINE_LOCAL_VERSION = "engine"
_PURE_TAG = re.compile(r"^py[23](\.py[23])*-none-any$")


class BundleError(EagleEyeError, RuntimeError):
    """The bundle cannot be built or installed; the message says what to do."""


# -- pure parts ----------------------------------------------------------------------


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


def normalize_name(name: str) -> str:
    """PEP 503 normalised project name: ``Nats_Py`` and ``nats.py`` become ``nats-py``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    """A dependency as our wheel declares it: ``name`` plus ``(operator, version)`` pairs."""

    name: str
    specifiers: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return self.name + ",".join(op + version for op, version in self.specifiers)


_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_SPEC_RE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([0-9A-Za-z][0-9A-Za-z.*+!_-]*)\s*$")


def parse_requirement(text: str) -> Requirement | None:
    """Parse a ``Requires-Dist`` value; None for dependencies of an extra only."""
    requirement, _, marker = text.partition(";")
    if "extra" in marker:
        return None
    match = _REQ_RE.match(requirement)
    if match is None:
        raise BundleError(f"cannot parse requirement {text!r}")
    name, rest = match.group(1), match.group(2).strip().strip("()")
    specifiers = []
    for part in filter(None, (p.strip() for p in rest.split(","))):
        spec = _SPEC_RE.match(part)
        if spec is None:
            raise BundleError(f"cannot parse version specifier {part!r} in {text!r}")
        specifiers.append((spec.group(1), spec.group(2)))
    return Requirement(normalize_name(name), tuple(specifiers))


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version (``8.1.7rc1`` -> ``(8, 1, 7)``)."""
    numbers = []
    for part in version.split("+")[0].split("."):
        match = re.match(r"\d+", part)
        if match is None:
            break
        numbers.append(int(match.group()))
        if match.end() != len(part):
            break
    return tuple(numbers)


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def version_satisfies(version: str, specifiers: Iterable[tuple[str, str]]) -> bool:
    """Whether ``version`` meets every ``(operator, version)`` pair (release numbers only).

    Enough for deciding whether an engine image's copy of a dependency will do; it is not
    a full PEP 440 implementation (pre-releases compare as their release).
    """
    have = _release(version)
    for op, wanted_text in specifiers:
        if op in ("==", "!=") and wanted_text.endswith(".*"):
            prefix = _release(wanted_text[:-2])
            equal = have[: len(prefix)] == prefix
            if equal != (op == "=="):
                return False
            continue
        mine, wanted = _padded(have, _release(wanted_text))
        if op == "~=":
            floor = _release(wanted_text)
            upper = floor[:-1]
            if mine < wanted or have[: len(upper)] != upper:
                return False
            continue
        ok = {
            "==": mine == wanted,
            "===": version == wanted_text,
            "!=": mine != wanted,
            ">=": mine >= wanted,
            "<=": mine <= wanted,
            ">": mine > wanted,
            "<": mine < wanted,
        }[op]
        if not ok:
            return False
    return True


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


@dataclass(frozen=True)
class BundledWheel:
    """One wheel inside the bundle, as ``manifest.json`` lists it."""

    file: str
    name: str
    version: str
    sha256: str
    requirement: str | None  # our wheel's spec for a dependency; None for our own wheel

    def as_json(self) -> dict[str, str | None]:
        return {
            "file": self.file,
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "requirement": self.requirement,
        }


def render_requirements(wheels: Sequence[BundledWheel]) -> str:
    """``requirements.txt``: every wheel pinned, for a manual ``pip install --no-index``."""
    lines = [
        "# Eagle Eye engine-side bundle: every line is a wheel in wheels/.",
        "# In a pod: python3 install.py --target DIR   (see install.py --help)",
        "# By hand:  pip install --no-index --find-links wheels -r requirements.txt",
    ]
    lines += [f"{w.name}=={w.version}" for w in wheels]
    return "\n".join(lines) + "\n"


def render_readme(project_version: str) -> str:
    return (
        f"Eagle Eye {project_version}: the vLLM stat-logger plugin and its dependencies,\n"
        "as pure-Python wheels, for engines that cannot reach a package index.\n\n"
        "  python3 install.py --target /eagle-eye-site\n"
        "  export PYTHONPATH=/eagle-eye-site EAGLE_EYE_NATS_URL=nats://nats:4222\n"
        "  vllm serve MODEL\n\n"
        "install.py verifies manifest.json's SHA-256 sums, installs without network,\n"
        "and checks that the vllm.stat_logger_plugins entry point resolves.\n"
    )


def render_manifest(version: str, plugin: str, wheels: Sequence[BundledWheel]) -> str:
    """``manifest.json``: what ``install.py`` verifies and installs."""
    manifest = {
        "format": BUNDLE_FORMAT,
        "project": PROJECT,
        "version": version,
        "plugin_group": PLUGIN_GROUP,
        "plugin_name": PLUGIN_NAME,
        "plugin": plugin,
        "wheels": [w.as_json() for w in wheels],
    }
    return json.dumps(manifest, indent=2) + "\n"


def deterministic_tarball(members: Sequence[tuple[str, bytes, int]]) -> bytes:
    """A ``.tar.gz`` of ``(path, data, mode)`` members, byte-identical for equal inputs."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data, mode in sorted(members):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = mode
            info.mtime = _EPOCH_S
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=_EPOCH_S) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def configmap_bytes(tarball_size_bytes: int) -> int:
    """Size the tarball takes in a ConfigMap: base64 in ``binaryData`` plus metadata."""
    return 4 * ((tarball_size_bytes + 2) // 3) + CONFIGMAP_OVERHEAD_BYTES


def kubectl_commands(tarball: Path, *, namespace: str, configmap: str) -> list[str]:
    """Seed 000's step 2, with this bundle's path filled in."""
    return [
        f"kubectl get namespace {namespace} || kubectl create namespace {namespace}",
        f"kubectl delete configmap {configmap} -n {namespace} --ignore-not-found",
        f"kubectl create configmap {configmap} --from-file={TARBALL_NAME}={tarball} -n {namespace}",
    ]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- build (operator's machine) ------------------------------------------------------


@dataclass(frozen=True)
class BuiltBundle:
    """What ``build_bundle`` wrote, for the CLI to report."""

    tarball: Path
    size_bytes: int
    configmap_bytes: int
    sha256: str
    wheels: tuple[BundledWheel, ...]


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(_EPOCH_S), PIP_DISABLE_PIP_VERSION_CHECK="1")
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


def build_project_wheel(source: Path, dest: Path, run: Runner = _run) -> Path:
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
                + _tail(result.stderr or result.stdout)
            )
    wheels = sorted(dest.glob("eagle_eye-*.whl"))
    if not wheels:
        raise BundleError(f"pip reported success but wrote no eagle_eye wheel into {dest}")
    return wheels[-1]


def download_project_wheel(
    version: str,
    dest: Path,
    *,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    run: Runner = _run,
) -> Path:
    """Our own released wheel from the index (or ``find_links``), for installs without a
    source checkout."""
    argv = [
        sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
        "--dest", str(dest),
    ]  # fmt: skip
    for folder in find_links:
        argv += ["--find-links", str(folder.resolve())]
    if no_index:
        argv.append("--no-index")
    result = run([*argv, f"{PROJECT}=={version}"])
    wheels = sorted(dest.glob("eagle_eye-*.whl"))
    if result.returncode != 0 or not wheels:
        raise BundleError(
            f"no eagle-eye source tree here and pip could not fetch the {PROJECT} {version} "
            "wheel: pass --source DIR (a checkout) or --wheel FILE.\npip said:\n"
            + _tail(result.stderr or result.stdout)
        )
    return wheels[-1]


def download_dependency_wheels(
    requirements: Sequence[Requirement],
    dest: Path,
    *,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    run: Runner = _run,
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
    for folder in find_links:
        argv += ["--find-links", str(folder.resolve())]
    if no_index:
        argv.append("--no-index")
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
            "pip said:\n" + _tail(result.stderr or result.stdout)
        )
    return sorted(dest.glob("*.whl"))


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def engine_side_wheel(wheel: Path, dest: Path) -> Path:
    """Repack our wheel with only the engine-side modules, as ``VERSION+engine``.

    The dist-info (metadata, entry points) is kept and its RECORD rewritten, so pip and
    ``importlib.metadata`` treat it as any other wheel. Byte-identical for equal input.
    """
    parsed = parse_wheel_name(wheel.name)
    old_info = f"eagle_eye-{parsed.version}.dist-info/"
    version = f"{parsed.version}+{ENGINE_LOCAL_VERSION}"
    new_info = f"eagle_eye-{version}.dist-info/"
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


def _bundled_wheel(path: Path, requirement: str | None) -> tuple[BundledWheel, bytes]:
    parsed = parse_wheel_name(path.name)
    if not parsed.is_pure:
        raise BundleError(
            f"{path.name} is not a pure-Python (py3-none-any) wheel; the bundle must "
            "install on x86-64 and ARM64 alike"
        )
    data = path.read_bytes()
    entry = BundledWheel(
        f"wheels/{path.name}", parsed.name, parsed.version, sha256_bytes(data), requirement
    )
    return entry, data


def build_bundle(
    out_dir: Path,
    *,
    source: Path | None = None,
    wheel: Path | None = None,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    full_wheel: bool = False,
    project_version: str | None = None,
    run: Runner = _run,
) -> BuiltBundle:
    """Write ``out_dir/source_code.tar.gz``; raises ``BundleError`` with what to fix.

    Our wheel is ``wheel``, else built from ``source``, else ``project_version``
    downloaded; the bundle carries ``engine_side_wheel(wheel)`` unless ``full_wheel``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eagle-eye-bundle-") as tmp:
        own_dir, deps_dir = Path(tmp, "own"), Path(tmp, "deps")
        own_dir.mkdir()
        deps_dir.mkdir()
        if wheel is None and source is not None:
            wheel = build_project_wheel(source, own_dir, run)
        elif wheel is None:
            if project_version is None:
                raise BundleError("no eagle-eye source tree found: pass --source DIR or --wheel")
            wheel = download_project_wheel(
                project_version, own_dir, find_links=find_links, no_index=no_index, run=run
            )
        if not full_wheel and "+" not in parse_wheel_name(wheel.name).version:
            wheel = engine_side_wheel(wheel, own_dir)
        name, version, requirements, entry_points = wheel_metadata(wheel)
        if normalize_name(name) != PROJECT:
            raise BundleError(f"{wheel.name} is {name}, not {PROJECT}")
        if PLUGIN_NAME not in entry_points.get(PLUGIN_GROUP, {}):
            raise BundleError(f"{wheel.name} declares no [{PLUGIN_GROUP}] {PLUGIN_NAME} entry")
        dep_wheels = download_dependency_wheels(
            requirements, deps_dir, find_links=find_links, no_index=no_index, run=run
        )
        specs = {r.name: str(r) for r in requirements}
        own = _bundled_wheel(wheel, None)
        deps = [_bundled_wheel(p, specs.get(parse_wheel_name(p.name).name, "")) for p in dep_wheels]
        bundled = [own[0], *(w for w, _ in deps)]
        missing = set(specs) - {w.name for w in bundled}
        if missing:
            raise BundleError(f"pip did not provide wheels for {', '.join(sorted(missing))}")
        manifest = render_manifest(version, entry_points[PLUGIN_GROUP][PLUGIN_NAME], bundled)
        members = [(w.file, data, 0o644) for w, data in (own, *deps)]
        members += [
            ("manifest.json", manifest.encode(), 0o644),
            ("requirements.txt", render_requirements(bundled).encode(), 0o644),
            ("README.txt", render_readme(version).encode(), 0o644),
            ("install.py", Path(__file__).read_bytes(), 0o755),
        ]
        data = deterministic_tarball(members)
    size = configmap_bytes(len(data))
    if size > CONFIGMAP_LIMIT_BYTES:
        raise BundleError(
            f"the bundle needs {size} bytes in a ConfigMap, over Kubernetes' "
            f"{CONFIGMAP_LIMIT_BYTES}-byte limit; wheels: "
            + ", ".join(f"{w.file} ({len(raw)} bytes)" for w, raw in (own, *deps))
        )
    tarball = out_dir / TARBALL_NAME
    tarball.write_bytes(data)
    return BuiltBundle(tarball, len(data), size, sha256_bytes(data), tuple(bundled))


def _tail(text: str, lines: int = 15) -> str:
    kept = [line for line in text.strip().splitlines() if "is ignored:" not in line]
    return "\n".join("  " + line for line in kept[-lines:])


# -- install (inside the pod) --------------------------------------------------------


def load_manifest(bundle_dir: Path) -> list[BundledWheel]:
    """The wheels ``manifest.json`` lists, each checked against its SHA-256."""
    try:
        manifest = json.loads((bundle_dir / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"{bundle_dir}/manifest.json unreadable: {exc}") from exc
    if manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"bundle format {manifest.get('format')!r}, expected {BUNDLE_FORMAT}")
    wheels = [BundledWheel(**entry) for entry in manifest["wheels"]]
    for w in wheels:
        path = bundle_dir / w.file
        if not path.is_file():
            raise BundleError(f"{w.file} listed in manifest.json is missing from the bundle")
        if sha256_bytes(path.read_bytes()) != w.sha256:
            raise BundleError(f"{w.file}: SHA-256 mismatch, the bundle is corrupt")
    return wheels


def select_wheels(
    wheels: Sequence[BundledWheel],
    installed: Callable[[str], str | None],
    *,
    install_all: bool = False,
) -> tuple[list[BundledWheel], list[str]]:
    """Which wheels to install, and a note for each dependency the image already has."""
    chosen, notes = [], []
    for w in wheels:
        have = None if install_all or w.requirement is None else installed(w.name)
        requirement = parse_requirement(w.requirement) if w.requirement else None
        if have is not None and (
            requirement is None or version_satisfies(have, requirement.specifiers)
        ):
            notes.append(f"using the image's {w.name} {have} (meets {w.requirement or 'any'})")
            continue
        chosen.append(w)
    return chosen, notes


def _installed_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _prepare_target(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    entries = list(target.iterdir())
    if entries and not (target / MARKER_FILE).exists():
        raise BundleError(f"{target} is not empty and was not written by install.py; refusing")
    for entry in entries:  # a restarted init container finds its previous install
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _install_with_pip(bundle_dir: Path, target: Path, wheels: Sequence[BundledWheel]) -> None:
    argv = [
        sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir",
        "--disable-pip-version-check", "--no-warn-script-location", "--isolated",
        "--find-links", str(bundle_dir / "wheels"), "--target", str(target),
    ]  # fmt: skip
    argv += [f"{w.name}=={w.version}" for w in wheels]
    print("+ " + " ".join(argv), flush=True)
    result = subprocess.run(argv, check=False)
    if result.returncode != 0:
        raise BundleError(f"pip install exited with {result.returncode}")


def _install_by_unzipping(bundle_dir: Path, target: Path, wheels: Sequence[BundledWheel]) -> None:
    """For images without pip: a pure wheel's contents *are* its installed form."""
    for w in wheels:
        print(f"+ unzip {w.file} -> {target}", flush=True)
        with zipfile.ZipFile(bundle_dir / w.file) as archive:
            for member in archive.namelist():
                if member.startswith("/") or ".." in Path(member).parts:
                    raise BundleError(f"{w.file}: unsafe path {member!r}")
                if member.split("/", 1)[0].endswith(".data"):
                    continue  # scripts and headers: nothing the plugin needs
                archive.extract(member, target)


def _has_pip() -> bool:
    probe = [sys.executable, "-m", "pip", "--version"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def verify_target(target: Path) -> str:
    """Check, in a fresh interpreter with only ``target`` added, that vLLM would find us.

    Imports neither vLLM nor the plugin (that would load torch in the init container);
    it resolves the entry point and the modules it needs.
    """
    code = (
        "import importlib.metadata as m, importlib.util as u, json, sys\n"
        f"eps = [e for e in m.entry_points(group={PLUGIN_GROUP!r}) if e.name == {PLUGIN_NAME!r}]\n"
        "mods = {n: getattr(u.find_spec(n), 'origin', None) for n in "
        "('eagle_eye.publish.vllm_plugin', 'nats')}\n"
        "print(json.dumps({'entry_points': [e.value for e in eps], 'modules': mods}))\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")])),
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if result.returncode != 0:
        raise BundleError("verification failed:\n" + _tail(result.stderr))
    found = json.loads(result.stdout)
    if not found["entry_points"]:
        raise BundleError(f"entry point {PLUGIN_GROUP}:{PLUGIN_NAME} not found via {target}")
    missing = [name for name, origin in found["modules"].items() if origin is None]
    if missing:
        raise BundleError(f"not importable after install: {', '.join(missing)}")
    return str(found["entry_points"][0])


def install(
    bundle_dir: Path, target: Path, *, install_all: bool = False, use_pip: bool | None = None
) -> list[str]:
    """Install the bundle into ``target``; returns the log lines it printed."""
    wheels = load_manifest(bundle_dir)
    chosen, notes = select_wheels(wheels, _installed_version, install_all=install_all)
    for note in notes:
        print(note, flush=True)
    _prepare_target(target)
    if use_pip is None:
        use_pip = _has_pip()
    (_install_with_pip if use_pip else _install_by_unzipping)(bundle_dir, target, chosen)
    (target / MARKER_FILE).write_text(json.dumps([w.as_json() for w in chosen]) + "\n")
    plugin = verify_target(target)
    done = f"eagle-eye: installed {', '.join(w.file for w in chosen)} into {target}; "
    done += f"{PLUGIN_GROUP} -> {plugin}"
    print(done, flush=True)
    return [*notes, done]


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 install.py --target DIR``: the init container's whole job."""
    parser = argparse.ArgumentParser(
        prog="install.py",
        description="Install the Eagle Eye vLLM plugin from this bundle, without network.",
    )
    parser.add_argument("--target", required=True, type=Path, help="directory for PYTHONPATH")
    parser.add_argument(
        "--bundle", type=Path, default=Path(__file__).resolve().parent, help="unpacked bundle"
    )
    parser.add_argument(
        "--all",
        dest="install_all",
        action="store_true",
        help="install every dependency even where the image already has it",
    )
    parser.add_argument(
        "--installer",
        choices=("auto", "pip", "unzip"),
        default="auto",
        help="pip when the image has it (auto), else unzip the pure wheels",
    )
    args = parser.parse_args(argv)
    use_pip = {"auto": None, "pip": True, "unzip": False}[args.installer]
    try:
        install(args.bundle, args.target, install_all=args.install_all, use_pip=use_pip)
    except BundleError as exc:
        print(f"eagle-eye install failed: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
