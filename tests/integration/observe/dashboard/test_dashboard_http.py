"""The dashboard over real HTTP and real NATS: the standalone command, SSE, the APIs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from dashboard_harness import PublishedFleet

from eagle_eye.fleet.stats import RouterStatsRecorder
from eagle_eye.fleet.subscriber import FleetSubscriber
from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.dashboard.app import create_dashboard_app, mount_dashboard
from eagle_eye.observe.dashboard.state import DashboardConfig, DashboardState
from eagle_eye.settings import nats_from_env
from support import async_wait_for, free_tcp_port

EAGLE_EYE = str(Path(sys.executable).parent / "eagle-eye")
"""The console script installed beside this Python."""


@pytest.fixture
def published(nats_url: str) -> Iterator[PublishedFleet]:
    fleet = PublishedFleet(nats_url, instances=2)
    try:
        yield fleet
    finally:
        fleet.close()


async def read_frames(
    response: aiohttp.ClientResponse, *, count: int, timeout_s: float = 10.0
) -> list[dict[str, Any]]:
    """The next ``count`` ``frame`` events of an SSE response."""
    frames: list[dict[str, Any]] = []
    event = None

    async def pump() -> None:
        nonlocal event
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "frame":
                frames.append(json.loads(line[6:]))
                if len(frames) >= count:
                    return

    await asyncio.wait_for(pump(), timeout_s)
    return frames


def stop_process(proc: subprocess.Popen[str]) -> None:
    """TERM, a deadline, then KILL; and close our end of its pipe."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()


def test_standalone_command_shows_the_fleet_from_nats_and_follows_it(
    nats_url: str, published: PublishedFleet
) -> None:
    proc = subprocess.Popen(
        [EAGLE_EYE, "dashboard", "--nats", nats_url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/dashboard/", line)
        assert match, line
        base = match.group(1)
        published.set_load(0, running=3, waiting=0, kv_usage=0.2)
        published.set_load(1, running=1, waiting=0, kv_usage=0.1)

        async def check() -> None:
            async with aiohttp.ClientSession() as session:
                async with session.get(base + "/", allow_redirects=False) as resp:
                    assert resp.status == 302 and resp.headers["Location"] == "/dashboard/"
                async with session.get(base + "/dashboard/") as resp:
                    assert resp.status == 200 and "<title>Eagle Eye" in await resp.text()
                async with session.get(base + "/dashboard/api/config") as resp:
                    config = await resp.json()
                assert config["router"] is False and config["prometheus"] is False

                async with session.get(base + "/dashboard/events") as events:
                    assert events.headers["Content-Type"] == "text/event-stream"

                    async def fleet_running(want: int) -> bool:
                        frame = (await read_frames(events, count=1))[0]
                        return frame["fleet"]["running"] == want

                    assert await async_wait_for(lambda: fleet_running(4), timeout_s=10)
                    published.set_load(0, running=9, waiting=5, kv_usage=0.9)
                    assert await async_wait_for(lambda: fleet_running(10), timeout_s=10)
                    frame = (await read_frames(events, count=1))[0]
                    rows = {r["key"]: r for r in frame["instances"]}
                    assert rows["engine-0"]["waiting"] == 5
                    assert rows["engine-0"]["kv_usage"] == 0.9
                    assert frame["router"] is None

        asyncio.run(check())
    finally:
        stop_process(proc)
    assert proc.returncode == 0  # SIGTERM is a clean stop


def test_dashboard_command_requires_a_nats_url() -> None:
    env = {k: v for k, v in os.environ.items() if k != "EAGLE_EYE_NATS_URL"}
    result = subprocess.run(
        [EAGLE_EYE, "dashboard"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--nats" in result.stderr


@pytest.fixture
async def served(nats_url: str, published: PublishedFleet) -> AsyncIterator[dict[str, Any]]:
    """The sub-app mounted in a parent app (as the router does) with router stats."""
    nats = nats_from_env({}, url=nats_url)
    assert nats is not None
    fleet = FleetView()
    recorder = RouterStatsRecorder(policy="least_waiting")
    state = DashboardState(fleet, router=recorder, config=DashboardConfig(tick_s=0.1))
    parent = web.Application()
    mount_dashboard(parent, create_dashboard_app(state))
    runner = web.AppRunner(parent, shutdown_timeout=2.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    async with FleetSubscriber(nats, fleet, client_name="dashboard-test") as subscriber:
        assert await async_wait_for(lambda: subscriber.connected, timeout_s=10)
        yield {"base": f"http://127.0.0.1:{port}/dashboard", "recorder": recorder, "state": state}
    await runner.cleanup()


async def test_events_stream_several_frames_per_second_with_router_figures(
    served: dict[str, Any], published: PublishedFleet
) -> None:
    recorder: RouterStatsRecorder = served["recorder"]
    published.set_load(0, running=2, waiting=1, kv_usage=0.3)
    async with aiohttp.ClientSession() as session:
        async with session.get(served["base"] + "/events") as events:
            start = time.monotonic()
            frames = await read_frames(events, count=8)
            elapsed = time.monotonic() - start
            assert elapsed < 2.0  # 8 frames at a 0.1 s tick: well over 4 per second
            for _ in range(30):
                recorder.observe_request()
                recorder.observe_ttft(0.2)
                recorder.observe_duration(1.5)
            recorder.observe_error("upstream_5xx")

            async def router_saw_requests() -> bool:
                frame = (await read_frames(events, count=1))[0]
                return frame["router"]["requests_total"] == 30

            assert await async_wait_for(router_saw_requests, timeout_s=5)
        frame = await read_frames_once(session, served["base"])
        router = frame["router"]
        assert router["policy"] == "least_waiting"
        assert router["errors_by_kind"] == {"upstream_5xx": 1}
        assert router["ttft_s"]["p50"] == pytest.approx(0.2, rel=0.13)
        assert router["requests_per_s"] > 0
        ts = [f["t"] for f in frames]
        assert ts == sorted(ts) and len(set(ts)) == len(ts)

        async with session.get(served["base"] + "/api/history") as resp:
            history = await resp.json()
        lengths = {len(col) for col in history["series"].values()}
        assert lengths == {len(history["t"])}
        assert "fleet.ttft_p50_s" in history["series"]
        assert any(v == 2 for v in history["series"]["running@engine-0"])


async def read_frames_once(session: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    async with session.get(base + "/api/frame") as resp:
        assert resp.status == 200
        frame: dict[str, Any] = await resp.json()
        return frame


async def test_range_api_explains_what_is_missing_or_wrong(served: dict[str, Any]) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(served["base"] + "/api/range?minutes=60") as resp,
    ):
        assert resp.status == 404
        assert "--prometheus" in (await resp.json())["error"]


async def test_range_api_reports_an_unreachable_prometheus_as_a_bad_gateway(
    nats_url: str,
) -> None:
    dead = f"http://127.0.0.1:{free_tcp_port()}"
    state = DashboardState(FleetView())
    app = web.Application()
    mount_dashboard(app, create_dashboard_app(state, prometheus_url=dead, run_ticker=False))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}/dashboard"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/api/range?minutes=abc") as resp:
                assert resp.status == 400
            async with session.get(base + "/api/range?minutes=60") as resp:
                assert resp.status == 502
                assert dead in (await resp.json())["error"]
            async with session.get(base + "/api/frame") as resp:
                assert resp.status == 503  # no ticker, no frame yet
    finally:
        await runner.cleanup()


def test_sse_clients_do_not_hold_up_shutdown(nats_url: str) -> None:
    """An open event stream must not keep a stopping server alive for its full timeout."""

    async def scenario() -> float:
        state = DashboardState(FleetView(), config=DashboardConfig(tick_s=0.1))
        app = web.Application()
        mount_dashboard(app, create_dashboard_app(state))
        runner = web.AppRunner(app, shutdown_timeout=30.0)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}/dashboard"
        async with aiohttp.ClientSession() as session:
            events = await session.get(base + "/events")
            await read_frames(events, count=1)
            start = time.monotonic()
            await runner.cleanup()
            events.close()
            return time.monotonic() - start

    assert asyncio.run(scenario()) < 5.0
