"""The bundle's installer: shipped verbatim as ``install.py`` and run inside the pod.

Seed 000's init container (``code-extractor``) unpacks the ConfigMap's
``source_code.tar.gz`` and runs ``python3 install.py --target DIR``. This file is that
``install.py``: it verifies ``manifest.json``'s SHA-256 sums, then ``pip install
--no-index --find-links wheels --no-deps --target DIR`` (or unzips the wheels where the
image has no pip), and checks that the entry point ``vllm.stat_logger_plugins`` resolves
from ``DIR``. The vLLM container puts ``DIR`` on ``PYTHONPATH``; ``importlib.metadata``
scans every ``sys.path`` entry for ``*.dist-info``, which is how vLLM's plugin loader
finds us.

A dependency the engine image already has at a satisfying version (click, usually) is
not installed into ``DIR``: ``PYTHONPATH`` comes before site-packages, so a second copy
would shadow the image's own and could break the engine. ``--all`` overrides that.

Because the file runs inside arbitrary engine images, as a standalone script, it uses
only the standard library and imports nothing else from ``eagle_eye``. The builder
(``eagle_eye.deploy.build``) imports the manifest format and ``BundleError`` from here,
so both halves agree on them by construction.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
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
PLUGIN_GROUP = "vllm.stat_logger_plugins"
PLUGIN_NAME = "eagle_eye"
PROJECT = "eagle-eye"
#: Written into the target so a re-run (init containers restart) may clear it safely.
MARKER_FILE = ".eagle-eye-bundle"


class BundleError(EagleEyeError, RuntimeError):
    """The bundle cannot be built or installed; the message says what to do."""


# -- requirements and versions (shared with the builder) -----------------------------


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


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def output_tail(text: str, lines: int = 15) -> str:
    """The last ``lines`` of a tool's output, indented, for an error message (pip's
    "Location ... is ignored" noise dropped)."""
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
        raise BundleError("verification failed:\n" + output_tail(result.stderr))
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
