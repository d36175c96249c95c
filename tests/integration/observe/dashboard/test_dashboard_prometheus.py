"""Longer history from a real Prometheus scraping real (simulated) engines and the router."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from dashboard_harness import LiveFleet

from support import free_tcp_port, wait_for

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus"),
]


@pytest.fixture
def prometheus_port() -> int:
    return free_tcp_port()


@pytest.fixture
def live_fleet(nats_url: str, prometheus_port: int) -> Iterator[LiveFleet]:
    fleet = LiveFleet(
        nats_url,
        engines=2,
        speed_factors=[1.0, 0.5],
        prometheus_url=f"http://127.0.0.1:{prometheus_port}",
    ).start()
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture
def prometheus(live_fleet: LiveFleet, prometheus_port: int, tmp_path: Path) -> Iterator[str]:
    assert live_fleet.fleet is not None
    targets = [u.split("://", 1)[1] for u in [*live_fleet.fleet.urls, live_fleet.url]]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: fleet\n    static_configs: [{{targets: {targets}}}]\n"
    )
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{prometheus_port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def get_json(url: str) -> Any:
    async def fetch() -> Any:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return {"status": resp.status, "body": await resp.json(content_type=None)}

    try:
        return asyncio.run(fetch())
    except aiohttp.ClientError:
        return {"status": 0, "body": None}


def test_range_view_reads_engine_and_router_history_from_prometheus(
    live_fleet: LiveFleet, prometheus: str
) -> None:
    def query(promql: str) -> list[Any]:
        r = get_json(f"{prometheus}/api/v1/query?query={promql}")
        result: list[Any] = (r["body"] or {}).get("data", {}).get("result", [])
        return result

    def scraped_twice() -> bool:
        result = query("count_over_time(up[1m])")
        return len(result) == 3 and all(int(x["value"][1]) >= 2 for x in result)

    def saw_the_decisions() -> bool:
        result = query("sum(increase(eagle_eye_router_decisions_total[1m]))")
        return bool(result) and float(result[0]["value"][1]) > 0

    # Counters must be scraped before and after the load for rate() to see it.
    assert wait_for(scraped_twice, timeout_s=30, interval_s=0.25)
    done = live_fleet.submit(live_fleet.load(requests=60, concurrency=8))
    assert done.result(timeout=60) == 60
    assert wait_for(saw_the_decisions, timeout_s=30, interval_s=0.25)

    range_view = get_json(f"{live_fleet.url}/dashboard/api/range?minutes=5")
    assert range_view["status"] == 200
    data = range_view["body"]
    assert data["step_s"] == 1.0
    assert len(data["t"]) >= 290  # five minutes on a one-second grid
    series = data["series"]
    assert all(len(col) == len(data["t"]) for col in series.values())
    assert live_fleet.fleet is not None
    for url in live_fleet.fleet.urls:
        host_port = url.split("://", 1)[1]
        assert any(v is not None for v in series[f"running@{host_port}"])
        # The router's per-engine decisions meet the engine's own series by host:port.
        assert any(v and v > 0 for v in series[f"decisions_per_s@{host_port}"])
    assert any(v and v > 0 for v in series["fleet.requests_per_s"])
    assert any(v is not None for v in series["fleet.duration_p50_s"])
