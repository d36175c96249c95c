"""Fixtures for tests against a real vLLM (CPU build) with the Eagle Eye plugin installed.

Everything here is session-scoped because a vLLM start costs 30-90 s on 2 cores: tests
share one plugin-enabled server (``eagle_vllm``) and one NATS server (``vllm_nats``).
Other areas reuse ``vllm_server_factory`` to start their own servers, e.g. a plain vLLM
without our plugin: ``vllm_server_factory(name="plain", plugins=False)``.

The whole folder is skipped, with the reason, only when ``EAGLE_EYE_VLLM_PYTHON`` (the
python of the venv ``scripts/vllm_env.sh`` builds) is unset; ``scripts/check`` and CI
set it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import nats
import pytest
from vllm_client import complete_sync
from vllm_harness import (
    INSTANCE_ID,
    MAX_NUM_SEQS,
    EagleVllm,
    VllmServer,
    ensure_tiny_model,
    start_vllm_server,
)

from eagle_eye import subjects
from eagle_eye.bus.embedded import EmbeddedNats
from support import free_tcp_port

VllmServerFactory = Callable[..., VllmServer]


@pytest.fixture(scope="session")
def vllm_python() -> str:
    python = os.environ.get("EAGLE_EYE_VLLM_PYTHON", "").strip()
    if not python:
        pytest.skip(
            "EAGLE_EYE_VLLM_PYTHON is unset: run `scripts/vllm_env.sh` and export "
            "EAGLE_EYE_VLLM_PYTHON=$(scripts/vllm_env.sh --print-python) (scripts/check does)"
        )
    if not os.access(python, os.X_OK):
        pytest.fail(f"EAGLE_EYE_VLLM_PYTHON={python!r} is not an executable python")
    return python


@pytest.fixture(scope="session")
def tiny_model_dir(vllm_python: str) -> Path:
    """A random-weight Llama (head_dim 32) and BPE tokenizer, generated offline, cached."""
    return ensure_tiny_model(vllm_python)


@pytest.fixture(scope="session")
def vllm_server_factory(
    vllm_python: str, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServerFactory]:
    """``factory(name=..., env={...}, plugins=True, extra_args=[...]) -> VllmServer``.

    Every server it starts is stopped (TERM, deadline, KILL of the whole tree) at the end
    of the session; call ``server.stop()`` earlier to free the cores.
    """
    work = tmp_path_factory.mktemp("vllm")
    servers: list[VllmServer] = []

    def start(
        *,
        name: str = "vllm",
        env: Mapping[str, str] | None = None,
        plugins: bool = True,
        extra_args: Sequence[str] = (),
        eager: bool = True,
    ) -> VllmServer:
        args = [*extra_args, *(["--enforce-eager"] if eager else [])]
        server = start_vllm_server(
            vllm_python,
            tiny_model_dir,
            work,
            name=name,
            env=env,
            plugins=plugins,
            extra_args=args,
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def eagle_vllm(vllm_server_factory: VllmServerFactory) -> Iterator[EagleVllm]:
    """vLLM with the Eagle Eye plugin, started *before* its NATS server exists.

    One server start proves two things and serves every other test: the engine starts
    and serves with NATS unreachable (one clear log line), then NATS comes up on the
    configured port and publishing begins without a restart.
    """
    port = free_tcp_port()
    server = vllm_server_factory(
        name="eagle",
        env={
            "EAGLE_EYE_NATS_URL": f"nats://127.0.0.1:{port}",
            "EAGLE_EYE_INSTANCE_ID": INSTANCE_ID,
            "EAGLE_EYE_ENDPOINT": "http://127.0.0.1:8000",
            # Long heartbeat: a late subscriber can only be this quick through SYNC.
            "EAGLE_EYE_HEARTBEAT_S": "30",
        },
        extra_args=["--max-num-seqs", str(MAX_NUM_SEQS)],
    )
    served = complete_sync(server.url, "Hello AI", max_tokens=4)
    startup_log = server.log_text()
    nats_server = EmbeddedNats(port=port).start()
    try:
        asyncio.run(_wait_until_publishing(nats_server.url))
        yield EagleVllm(
            server=server, nats=nats_server, startup_log=startup_log, served_without_nats=served
        )
    finally:
        nats_server.close()


async def _wait_until_publishing(url: str, timeout_s: float = 30.0) -> None:
    """Ask (SYNC) until the plugin, retrying in the background, has connected and answers."""
    nc = await nats.connect(url)
    try:
        sub = await nc.subscribe(subjects.ROUTING_METRICS)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            await nc.publish(subjects.SYNC, b"")
            try:
                await sub.next_msg(timeout=0.5)
                return
            except nats.errors.TimeoutError:
                if loop.time() > deadline:
                    raise
    finally:
        await nc.close()
