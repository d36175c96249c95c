"""The peer routers we compare against: SGLang's and vLLM's Rust routers.

They are installed by the benchmark into their own virtualenv (default
``~/.cache/eagle-eye/peers``, override with ``EAGLE_EYE_PEERS_VENV``) so their
dependencies never meet ours, and run as child processes on loopback in front of the same
simulated fleet as our router. Both route on request text (an approximate radix tree for
``cache_aware``) and count load as their own in-flight requests: they read no engine
metrics, which is the difference Eagle Eye is meant to make.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

import aiohttp

from eagle_eye.bench.processes import free_tcp_port, stop_process_group
from eagle_eye.children import own_process_group
from eagle_eye.errors import EagleEyeError

DEFAULT_PEER_POLICIES: Final[dict[str, tuple[str, ...]]] = {
    "sglang-router": ("cache_aware", "power_of_two"),
    "vllm-router": ("cache_aware", "power_of_two"),
}
"""The policies each peer is run with by default: its best two for this job."""

_PACKAGES: Final = {"sglang-router": "sglang-router", "vllm-router": "vllm-router"}


class PeerError(EagleEyeError, RuntimeError):
    """A peer router could not be installed or did not come up."""


def peers_venv() -> Path:
    """Where the peers' virtualenv lives."""
    override = os.environ.get("EAGLE_EYE_PEERS_VENV")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "eagle-eye" / "peers"


def peer_binary(name: str, venv: Path | None = None) -> Path:
    venv = peers_venv() if venv is None else venv
    return venv / "bin" / name


def ensure_installed(names: Sequence[str], venv: Path | None = None) -> dict[str, Path]:
    """Create the virtualenv and pip-install the missing peers; return their binaries.

    Raises ``PeerError`` naming the pip output when an install fails (e.g. offline).
    """
    venv = peers_venv() if venv is None else venv
    unknown = [n for n in names if n not in _PACKAGES]
    if unknown:
        raise PeerError(f"unknown peer router(s) {unknown}; known: {sorted(_PACKAGES)}")
    missing = [n for n in names if not peer_binary(n, venv).exists()]
    if missing:
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        proc = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", *(_PACKAGES[n] for n in missing)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise PeerError(f"pip install {missing} failed:\n{proc.stderr[-2000:]}")
    return {n: peer_binary(n, venv) for n in names}


def peer_argv(
    name: str,
    binary: Path,
    *,
    port: int,
    worker_urls: Sequence[str],
    policy: str,
    metrics_port: int,
) -> list[str]:
    """Command line for one peer router on 127.0.0.1:``port`` (CLIs per ``TOOLS.md``)."""
    common = [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--worker-urls",
        *worker_urls,
        "--policy",
        policy,
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        str(metrics_port),
        "--request-timeout-secs",
        "3600",
    ]
    if name == "sglang-router":
        return [str(binary), "launch", *common, "--log-level", "warn"]
    if name == "vllm-router":
        return [str(binary), *common, "--log-level", "warning"]
    raise PeerError(f"unknown peer router {name!r}")


@dataclass(slots=True)
class PeerRouter:
    """A running peer router; ``url`` is its base URL. Use as an async context manager."""

    name: str
    policy: str
    worker_urls: Sequence[str]
    binary: Path
    startup_timeout_s: float = 60.0
    url: str = ""
    _proc: subprocess.Popen[bytes] | None = None
    _log: tempfile._TemporaryFileWrapper[bytes] | None = None

    async def __aenter__(self) -> PeerRouter:
        port = free_tcp_port()
        argv = peer_argv(
            self.name,
            self.binary,
            port=port,
            worker_urls=self.worker_urls,
            policy=self.policy,
            metrics_port=free_tcp_port(),
        )
        # The log outlives this block: it is closed in stop().
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix=f"eagle-eye-{self.name}-", suffix=".log"
        )
        # Starting a child is quick and done once per run; not worth a thread.
        self._proc = subprocess.Popen(  # noqa: ASYNC220
            argv, stdout=self._log, stderr=subprocess.STDOUT, **own_process_group()
        )
        self.url = f"http://127.0.0.1:{port}"
        try:
            await self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    async def _wait_ready(self) -> None:
        """Ready when ``/v1/models`` answers 200 (the router has registered its workers)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout_s
        async with aiohttp.ClientSession() as session:
            while loop.time() < deadline:
                if self._proc is not None and self._proc.poll() is not None:
                    raise PeerError(
                        f"{self.name} exited with {self._proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    async with session.get(
                        self.url + "/v1/models", timeout=aiohttp.ClientTimeout(total=2)
                    ) as resp:
                        if resp.status == 200:
                            return
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
                await asyncio.sleep(0.1)
        raise PeerError(
            f"{self.name} not ready within {self.startup_timeout_s}s:\n{self.log_tail()}"
        )

    def log_tail(self, chars: int = 2000) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        data = Path(self._log.name).read_bytes()
        return data[-chars:].decode(errors="replace")

    def stop(self, timeout_s: float = 5.0) -> None:
        """TERM the router's process group, then KILL after ``timeout_s``."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process_group(proc, timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def available(name: str) -> bool:
    """True if the peer's binary is installed (no install attempted)."""
    return peer_binary(name).exists() or shutil.which(name) is not None
