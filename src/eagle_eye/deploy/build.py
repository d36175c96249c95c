"""Build seed 000's air-gapped ``source_code.tar.gz`` (ConfigMap ``vllm-source-code``).

``build_bundle`` (driven by ``eagle-eye k8s bundle``) writes one tarball holding our
engine-side wheel (``eagle_eye.deploy.wheels``), the engine-side dependency wheels
(nats-py, click), a pinned ``requirements.txt``, a ``manifest.json`` with SHA-256 sums,
a README and, as ``install.py``, the installer module ``eagle_eye.deploy.install``
verbatim, which the init container ``code-extractor`` runs. Downloads happen here, at
build time, never at pod start.

The tarball is deterministic (sorted members, fixed mtimes, uid 0, fixed gzip header):
the same wheels give the same bytes, so its SHA-256 identifies a bundle.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eagle_eye.deploy import install as installer
from eagle_eye.deploy.install import (
    BUNDLE_FORMAT,
    PLUGIN_GROUP,
    PLUGIN_NAME,
    PROJECT,
    BundledWheel,
    BundleError,
    normalize_name,
    sha256_bytes,
)
from eagle_eye.deploy.wheels import (
    EPOCH_S,
    Runner,
    build_project_wheel,
    download_dependency_wheels,
    download_project_wheel,
    engine_side_wheel,
    parse_wheel_name,
    run_pip,
    wheel_metadata,
)

TARBALL_NAME = "source_code.tar.gz"
#: Kubernetes rejects objects over 1 MiB (etcd's limit); the ConfigMap also carries
#: metadata, so leave room for it.
CONFIGMAP_LIMIT_BYTES = 1024 * 1024
CONFIGMAP_OVERHEAD_BYTES = 4 * 1024

#: A tar member: ``(path, data, mode)``.
Member = tuple[str, bytes, int]


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


def deterministic_tarball(members: Sequence[Member]) -> bytes:
    """A ``.tar.gz`` of ``(path, data, mode)`` members, byte-identical for equal inputs."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data, mode in sorted(members):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = mode
            info.mtime = EPOCH_S
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=EPOCH_S) as gz:
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


@dataclass(frozen=True)
class BuiltBundle:
    """What ``build_bundle`` wrote, for the CLI to report."""

    tarball: Path
    size_bytes: int
    configmap_bytes: int
    sha256: str
    wheels: tuple[BundledWheel, ...]


@dataclass(frozen=True)
class _Sources:
    """Where our wheel and the dependency wheels come from (``build_bundle``'s inputs)."""

    source: Path | None
    wheel: Path | None
    find_links: Sequence[Path]
    no_index: bool
    full_wheel: bool
    project_version: str | None
    run: Runner


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


def _own_wheel(sources: _Sources, own_dir: Path) -> Path:
    """Our wheel: given, else built from the checkout, else this release downloaded;
    slimmed to the engine side unless a full (or already slim) wheel is wanted."""
    wheel = sources.wheel
    if wheel is None and sources.source is not None:
        wheel = build_project_wheel(sources.source, own_dir, sources.run)
    elif wheel is None:
        if sources.project_version is None:
            raise BundleError("no eagle-eye source tree found: pass --source DIR or --wheel")
        wheel = download_project_wheel(
            sources.project_version,
            own_dir,
            find_links=sources.find_links,
            no_index=sources.no_index,
            run=sources.run,
        )
    if not sources.full_wheel and "+" not in parse_wheel_name(wheel.name).version:
        wheel = engine_side_wheel(wheel, own_dir)
    return wheel


def _bundle_members(sources: _Sources, tmp: Path) -> tuple[list[Member], list[BundledWheel]]:
    """Every tar member of the bundle, and the wheels among them as the manifest lists
    them (ours first)."""
    own_dir, deps_dir = tmp / "own", tmp / "deps"
    own_dir.mkdir()
    deps_dir.mkdir()
    wheel = _own_wheel(sources, own_dir)
    name, version, requirements, entry_points = wheel_metadata(wheel)
    if normalize_name(name) != PROJECT:
        raise BundleError(f"{wheel.name} is {name}, not {PROJECT}")
    if PLUGIN_NAME not in entry_points.get(PLUGIN_GROUP, {}):
        raise BundleError(f"{wheel.name} declares no [{PLUGIN_GROUP}] {PLUGIN_NAME} entry")
    dep_wheels = download_dependency_wheels(
        requirements,
        deps_dir,
        find_links=sources.find_links,
        no_index=sources.no_index,
        run=sources.run,
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
        ("install.py", Path(installer.__file__).read_bytes(), 0o755),
    ]
    return members, bundled


def build_bundle(
    out_dir: Path,
    *,
    source: Path | None = None,
    wheel: Path | None = None,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    full_wheel: bool = False,
    project_version: str | None = None,
    run: Runner = run_pip,
) -> BuiltBundle:
    """Write ``out_dir/source_code.tar.gz``; raises ``BundleError`` with what to fix.

    Our wheel is ``wheel``, else built from ``source``, else ``project_version``
    downloaded; the bundle carries ``engine_side_wheel(wheel)`` unless ``full_wheel``.
    """
    sources = _Sources(source, wheel, find_links, no_index, full_wheel, project_version, run)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eagle-eye-bundle-") as tmp:
        members, bundled = _bundle_members(sources, Path(tmp))
        data = deterministic_tarball(members)
    size = configmap_bytes(len(data))
    files = {w.file for w in bundled}
    if size > CONFIGMAP_LIMIT_BYTES:
        wheels = (f"{path} ({len(raw)} bytes)" for path, raw, _ in members if path in files)
        raise BundleError(
            f"the bundle needs {size} bytes in a ConfigMap, over Kubernetes' "
            f"{CONFIGMAP_LIMIT_BYTES}-byte limit; wheels: " + ", ".join(wheels)
        )
    tarball = out_dir / TARBALL_NAME
    tarball.write_bytes(data)
    return BuiltBundle(tarball, len(data), size, sha256_bytes(data), tuple(bundled))
