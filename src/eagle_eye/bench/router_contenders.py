"""The processes ``bench router`` measures: the fake backend and each router in front of it.

Every contender is a child process in its own session (so stopping it stops its
children too) with its output in a temporary log, quoted when it fails to come up. A
router is ready when it answers the benchmark's own chat completion with a 200, so
nothing is measured before the whole path works.

The peers live in their own virtualenvs under ``~/.cache/eagle-eye``, created on first
use: the Rust routers via ``bench/peers.py``, LiteLLM's proxy in ``peers-litellm``
(override with ``EAGLE_EYE_LITELLM_VENV``), so their dependencies never meet ours.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import aiohttp

from eagle_eye.bench.processes import free_tcp_port, stop_process_group
from eagle_eye.bench.router_backend import MODEL
from eagle_eye.bench.router_load import CHAT_BODY, CHAT_PATH
from eagle_eye.children import own_process_group

LITELLM_VERSION: Final = "1.108.7"
LITELLM_KEY: Final = "sk-eagle-eye-bench"
EAGLE_EYE_READY_S: Final = 60.0
LITELLM_READY_S: Final = 180.0
"""LiteLLM's proxy imports a lot before it listens."""
BACKEND_READY_S: Final = 60.0


def litellm_venv() -> Path:
    """Where LiteLLM's virtualenv lives."""
    override = os.environ.get("EAGLE_EYE_LITELLM_VENV")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "eagle-eye" / "peers-litellm"


def ensure_litellm() -> Path:
    """Install ``litellm[proxy]`` into its own virtualenv once; return the CLI path."""
    venv = litellm_venv()
    binary = venv / "bin" / "litellm"
    if binary.exists():
        return binary
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", f"litellm[proxy]=={LITELLM_VERSION}"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not binary.exists():
        raise RuntimeError(f"installing LiteLLM failed:\n{proc.stderr[-2000:]}")
    return binary


class Child:
    """A child process in its own session, stopped with TERM then KILL."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        drop_env_prefixes: tuple[str, ...] = (),
    ) -> None:
        # Closed in stop(): the log outlives this call by design.
        self.log = tempfile.NamedTemporaryFile(prefix="eagle-eye-bench-", suffix=".log")  # noqa: SIM115
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not (drop_env_prefixes and k.startswith(drop_env_prefixes))
        }
        self.proc = subprocess.Popen(
            list(argv),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            **own_process_group(),
            env={**inherited, **(env or {})},
        )

    def tail(self, chars: int = 1500) -> str:
        self.log.flush()
        return Path(self.log.name).read_bytes()[-chars:].decode(errors="replace")

    async def wait_ready(self, url: str, timeout_s: float, headers: dict[str, str]) -> None:
        """Until ``url`` answers the benchmark's chat completion with 200; fail early
        (quoting the log) when the process exits."""
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"exited with {self.proc.returncode}: {self.tail()}")
                try:
                    async with session.post(
                        url + CHAT_PATH,
                        json=CHAT_BODY,
                        headers=headers,
                        timeout=aiohttp.ClientTimeout(total=5),
                    ) as resp:
                        if resp.status == 200:
                            return
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
                await asyncio.sleep(0.2)
        raise RuntimeError(f"not ready within {timeout_s}s: {self.tail()}")

    def stop(self, timeout_s: float = 5.0) -> None:
        stop_process_group(self.proc, timeout_s)
        self.log.close()


class Stoppable(Protocol):
    """A running contender: ``Child`` or ``peers.PeerRouter``."""

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class StartedRouter:
    """A router up and answering in front of the backend."""

    handle: Stoppable
    url: str
    """Base URL (no path)."""
    headers: dict[str, str]
    """What every request to it must carry (LiteLLM's master key)."""


async def start_backend() -> tuple[Child, str]:
    """The fast fake backend (``router_backend.py``) in its own process, ready."""
    port = free_tcp_port()
    url = f"http://127.0.0.1:{port}"
    backend = Child([sys.executable, "-m", "eagle_eye.bench.router_backend", "--port", str(port)])
    try:
        await backend.wait_ready(url, BACKEND_READY_S, {})
    except BaseException:
        backend.stop()
        raise
    return backend, url


async def start_eagle_eye(backend_url: str, extra_args: Sequence[str] = ()) -> StartedRouter:
    """Our router in front of ``backend_url``, with ``extra_args`` (e.g. tracing flags);
    the OpenTelemetry variables of this environment are not passed on."""
    port = free_tcp_port()
    url = f"http://127.0.0.1:{port}"
    cli = "from eagle_eye.cli import main; main()"
    argv = [sys.executable, "-c", cli, "router", "--backend", backend_url, "--port", str(port)]
    child = Child(
        [*argv, *extra_args],
        env={"EAGLE_EYE_LOG_LEVEL": "WARNING"},
        drop_env_prefixes=("OTEL_",),
    )
    await child.wait_ready(url, EAGLE_EYE_READY_S, {})
    return StartedRouter(child, url, {})


def _litellm_config(backend_url: str) -> Path:
    """A proxy config with the backend as the one model (telemetry off)."""
    config_path = Path(tempfile.mkdtemp(prefix="eagle-eye-litellm-")) / "config.yaml"
    config_path.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: hosted_vllm/{MODEL}\n"
        f"      api_base: {backend_url}/v1\n"
        "      api_key: none\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
    )
    return config_path


async def _start_litellm(backend_url: str) -> StartedRouter:
    binary = ensure_litellm()
    port = free_tcp_port()
    url = f"http://127.0.0.1:{port}"
    config_path = _litellm_config(backend_url)
    child = Child(
        [str(binary), "--config", str(config_path), "--host", "127.0.0.1", "--port", str(port)],
        env={
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_MASTER_KEY": LITELLM_KEY,
            "LITELLM_LOG": "ERROR",
            "DISABLE_SCHEMA_UPDATE": "True",
        },
    )
    headers = {"Authorization": f"Bearer {LITELLM_KEY}"}
    await child.wait_ready(url, LITELLM_READY_S, headers)
    return StartedRouter(child, url, headers)


async def _start_rust_peer(name: str, backend_url: str) -> StartedRouter:
    from eagle_eye.bench.peers import PeerRouter, ensure_installed

    binary_path = ensure_installed([name])[name]
    peer = PeerRouter(
        name=name, policy="round_robin", worker_urls=[backend_url], binary=binary_path
    )
    await peer.__aenter__()
    return StartedRouter(peer, peer.url, {})


async def start_router(name: str, backend_url: str) -> StartedRouter:
    """Start router ``name`` (``router.ROUTERS``) in front of ``backend_url``; ready."""
    if name == "eagle-eye":
        return await start_eagle_eye(backend_url)
    if name == "litellm":
        return await _start_litellm(backend_url)
    return await _start_rust_peer(name, backend_url)
