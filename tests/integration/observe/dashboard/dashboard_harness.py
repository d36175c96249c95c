"""A live fleet for the dashboard's end-to-end tests, and a headless Chromium.

``LiveFleet`` is what ``eagle-eye up`` runs (simulated engines publishing through the real
plugin over a real nats-server, and the router with its ``/dashboard``), on an event loop
in a background thread, so a synchronous browser driver can watch it while the test
applies load through the router's HTTP API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import nats

from eagle_eye import subjects
from eagle_eye.commands.compose import mount_dashboard
from eagle_eye.route.config import RouterConfig
from eagle_eye.route.gateway import Router
from eagle_eye.settings import nats_from_env
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from eagle_eye.snapshot import Snapshot, encode
from support import async_wait_for

T = TypeVar("T")

EAGLE_EYE = str(Path(sys.executable).parent / "eagle-eye")
"""The console script installed beside this Python."""

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
]


def chromium_available() -> bool:
    return Path(CHROMIUM).is_file() and shutil.which("chromium") is not None


class LiveFleet:
    """Simulated engines + router (+ its dashboard) on a background event loop."""

    def __init__(
        self,
        nats_url: str,
        *,
        engines: int = 3,
        speed_factors: list[float],
        prometheus_url: str | None = None,
    ) -> None:
        self.nats_url = nats_url
        self.prometheus_url = prometheus_url
        self.engines = engines
        self.speed_factors = speed_factors
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.fleet: SimFleet | None = None
        self.router: Router | None = None

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def start(self) -> LiveFleet:
        self._thread.start()
        self.call(self._start())
        return self

    async def _start(self) -> None:
        self.fleet = SimFleet(
            SimFleetConfig(
                engines=self.engines,
                nats_url=self.nats_url,
                speed_factors=self.speed_factors,
                heartbeat_s=0.25,
                seed=1,
            )
        )
        await self.fleet.start()
        nats = nats_from_env({}, url=self.nats_url)
        self.router = Router(RouterConfig(port=0, nats=nats, rng_seed=1))
        assert mount_dashboard(self.router, prometheus_url=self.prometheus_url)
        await self.router.start()
        # Ready means what a person sees after `eagle-eye up`: every engine in the view.
        router = self.router
        ready = await async_wait_for(
            lambda: (
                router.subscriber is not None
                and router.subscriber.connected
                and len(router.fleet) == self.engines
            ),
            timeout_s=20,
        )
        if not ready:
            raise RuntimeError("the router did not see the whole simulated fleet in 20 s")

    @property
    def url(self) -> str:
        assert self.router is not None
        return self.router.url

    def stop(self) -> None:
        try:
            self.call(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    async def _stop(self) -> None:
        try:
            if self.router is not None:
                await self.router.close()
            if self.fleet is not None:
                await self.fleet.stop()
        finally:
            # Let every task the components left behind finish before the loop closes
            # (a task destroyed on a closed loop is an unraisable-exception error).
            current = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            await asyncio.get_running_loop().shutdown_asyncgens()

    async def load(self, *, requests: int, concurrency: int, max_tokens: int = 48) -> int:
        """Stream ``requests`` completions through the router; returns how many succeeded."""
        return await apply_load(
            self.url, requests=requests, concurrency=concurrency, max_tokens=max_tokens
        )

    async def get_json(self, path: str) -> Any:
        async with aiohttp.ClientSession() as session, session.get(self.url + path) as resp:
            return json.loads(await resp.read())


async def apply_load(
    router_url: str,
    *,
    requests: int = 0,
    concurrency: int,
    max_tokens: int = 48,
    model: str = "sim-llama",
    duration_s: float | None = None,
) -> int:
    """Stream ``requests`` completions through the router with ``concurrency`` clients,
    or with ``duration_s`` keep ``concurrency`` clients busy that long; returns how many
    requests got a 200."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    started = 0
    done = 0

    def another() -> int | None:
        nonlocal started
        if (deadline is not None and time.monotonic() >= deadline) or (
            deadline is None and started >= requests
        ):
            return None
        started += 1
        return started

    async with aiohttp.ClientSession() as session:

        async def worker() -> None:
            nonlocal done
            while (i := another()) is not None:
                body = {
                    "model": model,
                    "prompt": f"request {i}: tell me about eagles " * 8,
                    "max_tokens": max_tokens,
                    "stream": True,
                }
                async with session.post(f"{router_url}/v1/completions", json=body) as resp:
                    async for _ in resp.content:
                        pass
                    if resp.status == 200:
                        done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


class UpProcess:
    """``eagle-eye up`` as a person runs it: a child process, URLs read from its banner."""

    def __init__(self, *, engines: int = 3) -> None:
        self.proc = subprocess.Popen(
            [EAGLE_EYE, "up", "--port", "0", "--engines", str(engines)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.dashboard_url = ""
        self.router_url = ""
        self.nats_url = ""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # the banner comes once everything is up
            found = re.match(r"\s+dashboard\s+(http://\S+/dashboard/)", line)
            if found:
                self.dashboard_url = found.group(1)
                self.router_url = self.dashboard_url.removesuffix("/dashboard/")
            found = re.match(r"\s+NATS\s+(nats://\S+)", line)
            if found:
                self.nats_url = found.group(1)
            if self.dashboard_url and self.nats_url:
                break
        if not self.dashboard_url:
            self.stop()
            raise RuntimeError("`eagle-eye up` printed no dashboard URL")

    def stop(self) -> None:
        """SIGTERM (up stops router, engines and its NATS in order), deadline, KILL."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class PublishedFleet:
    """Engines that only publish snapshots (no HTTP): the standalone dashboard's input.

    A plain nats-py client publishing the wire format, as any engine in any language
    would: a heartbeat every 0.2 s and an answer to every SYNC request, so a consumer
    that starts later sees the fleet at once. Runs on its own event-loop thread so that
    synchronous tests can change the load.
    """

    def __init__(self, nats_url: str, instances: int) -> None:
        self.nats_url = nats_url
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._seq = 0
        self.snapshots = [
            Snapshot(
                instance_id=f"engine-{i}",
                model="tiny",
                engine="vllm",
                seq=0,
                timestamp_s=time.time(),
                endpoint=f"http://127.0.0.1:{9100 + i}",
                kv_capacity_tokens=4096,
            )
            for i in range(instances)
        ]
        self._nc: Any = None
        self._beat: asyncio.Task[None] | None = None
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    async def _start(self) -> None:
        self._nc = await nats.connect(self.nats_url, name="dashboard-test-engines")
        await self._nc.subscribe(subjects.SYNC, cb=self._on_sync)
        self._beat = asyncio.create_task(self._heartbeat())

    async def _on_sync(self, _msg: Any) -> None:
        await self._publish_all()

    async def _heartbeat(self) -> None:
        while True:
            await self._publish_all()
            await asyncio.sleep(0.2)

    async def _publish_all(self) -> None:
        for i, old in enumerate(self.snapshots):
            self._seq += 1
            self.snapshots[i] = replace(old, seq=self._seq, timestamp_s=time.time())
            await self._nc.publish(subjects.ROUTING_METRICS, encode(self.snapshots[i]))

    def set_load(self, index: int, *, running: int, waiting: int, kv_usage: float) -> None:
        """Give engine ``index`` this load (with plausible rates and latencies); it is
        published at once."""

        async def change() -> None:
            self.snapshots[index] = replace(
                self.snapshots[index],
                running=running,
                waiting=waiting,
                kv_usage=kv_usage,
                generation_tokens_per_s=running * 41.5,
                ttft_recent_s=0.04 + 0.03 * waiting,
                itl_recent_s=0.012 + 0.002 * running,
                prefix_cache_queries_total=1000,
                prefix_cache_hits_total=600 + 10 * index,
                preemptions_total=waiting // 4,
            )
            await self._publish_all()

        asyncio.run_coroutine_threadsafe(change(), self.loop).result(10)

    def close(self) -> None:
        async def stop() -> None:
            if self._beat is not None:
                self._beat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._beat
            await self._nc.close()

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()
