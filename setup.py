"""Build hook: put the dashboard's chart library (uPlot, MIT) into the package.

Everything else about the build is declared in pyproject.toml. uPlot is not committed
here; every build (``pip install .``, editable installs, wheels) fetches the pinned
release with npm, checks npm's tarball against the pinned sha512 integrity and each
extracted file against its pinned SHA-256, and writes the files where the dashboard
serves them (src/eagle_eye/observe/static/vendor/uplot/, git-ignored). Files already
there and matching their pins are used as they are, so npm is needed only once.
``EAGLE_EYE_WITHOUT_CHARTS=1`` builds without them (``eagle-eye k8s bundle`` sets it:
the engine side never serves the dashboard); the page then says the charts are missing.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

UPLOT_VERSION = "1.6.32"
UPLOT_INTEGRITY = (  # npm's "integrity" of uplot-1.6.32.tgz
    "sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
)
#: member of npm's tarball -> (file name we serve, its SHA-256)
UPLOT_FILES = {
    "package/dist/uPlot.iife.min.js": (
        "uPlot.iife.min.js",
        "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
    ),
    "package/dist/uPlot.min.css": (
        "uPlot.min.css",
        "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
    ),
    "package/LICENSE": (
        "LICENSE",
        "8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd",
    ),
}
PACKAGE_DIR = Path("eagle_eye/observe/static/vendor/uplot")  # inside src/ and the wheel
VENDOR_DIR = Path(__file__).resolve().parent / "src" / PACKAGE_DIR


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _vendored() -> bool:
    return all(_sha256(VENDOR_DIR / name) == sha for name, sha in UPLOT_FILES.values())


def _fail(problem: str) -> SystemExit:
    return SystemExit(f"eagle-eye build: {problem}")


def fetch_uplot() -> None:
    """npm pack the pinned uPlot, check it, and write its browser files to VENDOR_DIR."""
    npm, release = shutil.which("npm"), f"uplot@{UPLOT_VERSION}"
    why = f"the live dashboard's charts ({release}) are fetched with npm at build time"
    if npm is None:
        raise _fail(f"npm not found; {why}: install Node.js, or set EAGLE_EYE_WITHOUT_CHARTS=1")
    with tempfile.TemporaryDirectory(prefix="eagle-eye-uplot-") as tmp:
        argv = [npm, "pack", "--silent", release]
        packed = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, check=False)
        tarball = Path(tmp, f"uplot-{UPLOT_VERSION}.tgz")
        if packed.returncode != 0 or not tarball.is_file():
            output = (packed.stderr or packed.stdout).strip()[-500:]
            raise _fail(f"npm pack {release} failed ({why}):\n{output}")
        digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
        if f"sha512-{digest}" != UPLOT_INTEGRITY:
            raise _fail(f"npm's {tarball.name} does not match the sha512 pinned in setup.py")
        VENDOR_DIR.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as tar:
            for member, (name, sha) in UPLOT_FILES.items():
                file = tar.extractfile(member) if member in tar.getnames() else None
                data = file.read() if file is not None else b""
                if hashlib.sha256(data).hexdigest() != sha:
                    raise _fail(f"{member} in {tarball.name} does not match its pinned SHA-256")
                (VENDOR_DIR / name).write_bytes(data)


class BuildPyWithCharts(build_py):
    """``build_py`` that first makes sure the verified chart files are in the package."""

    def run(self) -> None:
        charts = os.environ.get("EAGLE_EYE_WITHOUT_CHARTS") != "1"
        if charts and not _vendored():
            fetch_uplot()
        super().run()
        if charts and not self.editable_mode:  # package data may have been listed before
            for name, _ in UPLOT_FILES.values():
                target = Path(self.build_lib) / PACKAGE_DIR / name
                self.mkpath(str(target.parent))
                self.copy_file(str(VENDOR_DIR / name), str(target))


setup(cmdclass={"build_py": BuildPyWithCharts})
