"""Exemplars end to end: a real Prometheus scrapes the router and stores the trace id.

Prometheus (2.42 here) negotiates the OpenMetrics exposition and, with
``--enable-feature=exemplar-storage``, keeps the ``trace_id`` the router attached to its
latency buckets: what a Grafana panel needs to jump from a slow bucket to the trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from route_helpers import MODEL, running_router
from tracing_helpers import receiver, stream_chat, traceparent

from eagle_eye.commands.tracing import TracingSettings, trace_router, tracer_provider
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from support import async_wait_for, free_tcp_port
from support.otlp import OtlpReceiver

__all__ = ["receiver"]  # the fixture, shared from tracing_helpers

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed"),
]


@contextlib.asynccontextmanager
async def prometheus_scraping(tmp_path: Path, port: int) -> AsyncIterator[str]:
    """Prometheus with exemplar storage, scraping 127.0.0.1:``port`` every second."""
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
        "scrape_configs": [
            {"job_name": "router", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    listen = free_tcp_port()
    with (tmp_path / "prometheus.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(shutil.which("prometheus")),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{listen}",
            "--enable-feature=exemplar-storage",
            "--log.level=warn",
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield f"http://127.0.0.1:{listen}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


async def test_prometheus_stores_the_routers_trace_ids_as_exemplars(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    header, trace_id, _ = traceparent()
    provider = tracer_provider(TracingSettings(endpoint=receiver.traces_url))
    try:
        async with (
            SimFleet(SimFleetConfig(engines=1)) as fleet,
            running_router(backends=tuple(fleet.urls)) as router,
        ):
            trace_router(router, provider)
            assert router.port is not None
            async with aiohttp.ClientSession() as session:
                await stream_chat(session, router, {"traceparent": header})
                async with prometheus_scraping(tmp_path, router.port) as prom:
                    url = f"{prom}/api/v1/query_exemplars"
                    family = "gen_ai_server_request_duration_seconds_bucket"
                    query = f'{family}{{gen_ai_request_model="{MODEL}"}}'
                    found: list[str] = []

                    async def stored() -> bool:
                        params = {
                            "query": query,
                            "start": time.time() - 600,
                            "end": time.time() + 60,
                        }
                        try:
                            async with session.get(url, params=params) as resp:
                                body = await resp.json()
                        except aiohttp.ClientError:
                            return False  # not listening yet
                        found[:] = [
                            e["labels"]["trace_id"]
                            for series in body.get("data") or []
                            for e in series["exemplars"]
                        ]
                        return bool(found)

                    ok = await async_wait_for(stored, timeout_s=30, interval_s=0.2)
                    assert ok, (tmp_path / "prometheus.log").read_text()
    finally:
        provider.shutdown()
    assert found == [trace_id]
