"""Online routing runs: a fresh NATS, a fresh simulated fleet and one router per row.

Every row gets an identical, cold fleet (same engine count, speeds, profile and seed) in
its own processes, so no router inherits another's warm caches, and the benchmark client,
the simulator, the router under test and ``nats-server`` each have their own process on
the machine's cores. The fleet is started with ``eagle-eye sim`` and our router with
``eagle-eye router`` (exactly what a user runs); the peers with their own CLIs
(``bench/peers.py``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from eagle_eye.bench.peers import PeerRouter, ensure_installed
from eagle_eye.bench.processes import free_tcp_port, stop_process_group
from eagle_eye.bench.routing.metrics import LoadSample, RequestResult
from eagle_eye.bench.routing.replay import LoadRecorder, ReplayConfig, replay
from eagle_eye.bench.routing.trace import TraceRequest
from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.children import own_process_group
from eagle_eye.errors import EagleEyeError

EAGLE_EYE = "eagle-eye"


class BenchError(EagleEyeError, RuntimeError):
    """A component of an online run did not start or misbehaved."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetSpec:
    """The simulated fleet every row runs against."""

    engines: int
    speedup: float
    speed_factors: tuple[float, ...]
    profile: str | None = None
    seed: int = 0


def _cli() -> list[str]:
    return [sys.executable, "-c", "from eagle_eye.cli import main; main()"]


def _consecutive_free_ports(count: int, attempts: int = 50) -> int:
    """A base port with ``count`` consecutive free ports after it (best effort)."""
    for _ in range(attempts):
        base = free_tcp_port()
        if base + count >= 65535:
            continue
        ok = True
        for port in range(base, base + count):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise BenchError(f"no {count} consecutive free ports found")


class _Child:
    """A child process in its own session, stopped with TERM then KILL by process group."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        # The log lives as long as the child; closed in stop().
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix=f"eagle-eye-bench-{name}-", suffix=".log"
        )

    def start(self) -> None:
        env = dict(os.environ, **(self.env or {}))
        self.proc = subprocess.Popen(
            self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, **own_process_group()
        )

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise BenchError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        self._log.flush()
        return Path(self._log.name).read_bytes()[-chars:].decode(errors="replace")

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process_group(proc, timeout_s)
        self._log.close()


async def _wait_ok(url: str, child: _Child, timeout_s: float, predicate: Any = None) -> Any:
    """Poll ``url`` until it answers 200 (and ``predicate(json)`` holds); return the JSON."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with aiohttp.ClientSession() as session:
        while loop.time() < deadline:
            child.check_alive()
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        data = await resp.json(content_type=None)
                        if predicate is None or predicate(data):
                            return data
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                pass
            await asyncio.sleep(0.1)
    raise BenchError(f"{url} not ready within {timeout_s}s:\n{child.log_tail()}")


@dataclass(slots=True)
class SimFleetProcess:
    """``eagle-eye sim`` with ``spec``'s engines on consecutive loopback ports."""

    spec: FleetSpec
    nats_url: str
    urls: list[str] = field(default_factory=list)
    model: str = ""
    _child: _Child | None = None

    async def __aenter__(self) -> SimFleetProcess:
        base = _consecutive_free_ports(self.spec.engines)
        argv = [
            *_cli(),
            "sim",
            "--engines",
            str(self.spec.engines),
            "--base-port",
            str(base),
            "--nats",
            self.nats_url,
            "--speedup",
            str(self.spec.speedup),
            "--speed-factors",
            ",".join(f"{f:g}" for f in self.spec.speed_factors),
        ]
        if self.spec.profile:
            argv += ["--profile", self.spec.profile]
        self._child = _Child("sim", argv, env={"EAGLE_EYE_LOG_LEVEL": "WARNING"})
        self._child.start()
        self.urls = [f"http://127.0.0.1:{base + i}" for i in range(self.spec.engines)]
        try:
            for url in self.urls:
                models = await _wait_ok(url + "/v1/models", self._child, 60.0)
            self.model = str(models["data"][0]["id"])
        except BaseException:
            self._child.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._child is not None:
            self._child.stop()


@dataclass(slots=True)
class EagleEyeRouterProcess:
    """``eagle-eye router --nats URL --port P --policy NAME``; ready once it sees the fleet."""

    nats_url: str
    policy: str
    engines: int
    url: str = ""
    _child: _Child | None = None

    async def __aenter__(self) -> EagleEyeRouterProcess:
        port = free_tcp_port()
        argv = [
            *_cli(),
            "--log-level",
            "WARNING",
            "router",
            "--nats",
            self.nats_url,
            "--port",
            str(port),
            "--policy",
            self.policy,
        ]
        self._child = _Child("router", argv)
        self._child.start()
        self.url = f"http://127.0.0.1:{port}"
        try:
            await _wait_ok(self.url + "/fleet", self._child, 60.0, predicate=self._fleet_complete)
        except BaseException:
            self._child.stop()
            raise
        return self

    def _fleet_complete(self, data: Any) -> bool:
        """True once ``/fleet`` lists every engine (any reasonable JSON shape)."""
        if isinstance(data, dict):
            for key in ("targets", "instances"):
                items = data.get(key)
                if isinstance(items, list):
                    ready = [
                        t
                        for t in items
                        if not isinstance(t, dict) or t.get("state", "ready") == "ready"
                    ]
                    return len(ready) >= self.engines
            return True
        if isinstance(data, list):
            return len(data) >= self.engines
        return True

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._child is not None:
            self._child.stop()


@dataclass(frozen=True, slots=True, kw_only=True)
class OnlineRun:
    """What one row measured."""

    router: str
    policy: str
    results: list[RequestResult]
    samples: list[LoadSample]
    engine_e2e_mean_s: float | None = None
    """Mean request latency on the engines' own simulated timeline (their ``/metrics``).
    Compared with the client's mean it shows whether the simulator kept up with the
    speedup: when the CPU is short, engines fall behind the wall clock and the client
    sees longer times than the engines report."""


def parse_e2e_sum_count(metrics_text: str) -> tuple[float, int]:
    """``vllm:e2e_request_latency_seconds`` sum and count from a ``/metrics`` page."""
    total = 0.0
    count = 0
    for line in metrics_text.splitlines():
        if line.startswith("vllm:e2e_request_latency_seconds_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:e2e_request_latency_seconds_count"):
            count += int(float(line.rsplit(" ", 1)[1]))
    return total, count


async def engine_e2e_mean_s(urls: Sequence[str]) -> float | None:
    """Mean engine-side request latency over the fleet (None if not exposed)."""
    total, count = 0.0, 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for url in urls:
            try:
                async with session.get(url + "/metrics") as resp:
                    s, c = parse_e2e_sum_count(await resp.text())
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                return None
            total += s
            count += c
    return total / count if count else None


async def run_online(
    router: str,
    policy: str,
    requests: Sequence[TraceRequest],
    spec: FleetSpec,
    *,
    hash_ids_field: str | None,
    progress: Any = None,
) -> OnlineRun:
    """Replay ``requests`` through ``router`` (ours or a peer) in front of a fresh fleet."""
    with EmbeddedNats() as nats_server:
        async with (
            SimFleetProcess(spec, nats_server.url) as fleet,
            LoadRecorder(nats_server.url, speedup=spec.speedup) as recorder,
        ):
            front: Any
            if router == EAGLE_EYE:
                front = EagleEyeRouterProcess(nats_server.url, policy, spec.engines)
            else:
                binary = (await asyncio.to_thread(ensure_installed, [router]))[router]
                front = PeerRouter(
                    name=router, policy=policy, worker_urls=fleet.urls, binary=binary
                )
            async with front:
                config = ReplayConfig(
                    base_url=front.url,
                    model=fleet.model,
                    speedup=spec.speedup,
                    hash_ids_field=hash_ids_field,
                )
                recorder.mark_start()
                results = await replay(requests, config, progress=progress)
            samples = list(recorder.samples)
            engine_e2e = await engine_e2e_mean_s(fleet.urls)
    return OnlineRun(
        router=router,
        policy=policy,
        results=results,
        samples=samples,
        engine_e2e_mean_s=engine_e2e,
    )
