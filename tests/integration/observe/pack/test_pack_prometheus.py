"""Every recording rule and every dashboard query, evaluated by a real Prometheus.

Prometheus (Debian's 2.42 binary) scrapes, every second, a simulated fleet in both flavours
(vLLM and SGLang, publishing over NATS), the router carrying load, the exporter, and a
synthetic target with the series only a real cluster has (``observe_synthetic``; see
``eagle_eye.observe.pack.coverage``). One vLLM engine is killed mid-load so the
failure-path series exist too. Then each recording rule's expression and each panel's
query (variables set to "All") must return data, and the values must be sane.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from observe_synthetic import SyntheticTarget

from eagle_eye.observe.exporter.cli import Exporter
from eagle_eye.observe.pack.dashboards import DASHBOARDS
from eagle_eye.observe.pack.grafana import expand, iter_panels
from eagle_eye.route.config import RouterConfig
from eagle_eye.route.gateway import Router
from eagle_eye.settings import nats_from_env
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from support import REPO_ROOT, async_wait_for, free_tcp_port

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = REPO_ROOT
RULE_FILES = [
    ROOT / "deploy/prometheus/eagle-eye-rules.yaml",
    ROOT / "deploy/prometheus/eagle-eye-alerts.yaml",
]
MODELS = ("sim-llama", "sim-qwen")


def _prometheus_config(targets: dict[str, list[tuple[int, dict[str, str]]]]) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(p) for p in RULE_FILES],
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [
                    {"targets": [f"127.0.0.1:{port}"], "labels": labels} for port, labels in entries
                ],
            }
            for job, entries in targets.items()
        ],
    }


@contextlib.asynccontextmanager
async def _prometheus(tmp_path: Path, config: dict[str, Any]) -> AsyncIterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus missing: scripts/setup.sh --system installs Debian's prometheus"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_tcp_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        binary,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:

            async def ready() -> bool:
                try:
                    async with session.get(f"{url}/-/ready") as resp:
                        return resp.status == 200
                except aiohttp.ClientError:
                    return False

            ok = await async_wait_for(ready, timeout_s=30, interval_s=0.2)
        assert ok, (tmp_path / "prometheus.log").read_text()
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=15)
        except asyncio.TimeoutError:
            proc.kill()
            await asyncio.wait_for(proc.wait(), timeout=5)
        log.close()


async def _query(session: aiohttp.ClientSession, url: str, expr: str) -> list[dict[str, Any]]:
    async with session.get(f"{url}/api/v1/query", params={"query": expr}) as resp:
        body = await resp.json()
    assert body["status"] == "success", f"{expr}: {body}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _values(result: list[dict[str, Any]]) -> list[float]:
    return [float(r["value"][1]) for r in result]


async def _load(router_url: str, stop: asyncio.Event, stats: dict[str, int]) -> None:
    """Clients of both models, half streaming, until ``stop``."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:

        async def client(i: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                body = {
                    "model": MODELS[(i + n) % 2],
                    "messages": [{"role": "user", "content": f"client {i} asks question {n % 5}"}],
                    "max_tokens": 12,
                    "stream": (i + n) % 2 == 0,
                }
                try:
                    async with session.post(f"{router_url}/v1/chat/completions", json=body) as resp:
                        await resp.read()
                        stats[str(resp.status)] = stats.get(str(resp.status), 0) + 1
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    stats["client_error"] = stats.get("client_error", 0) + 1

        await asyncio.gather(*(client(i) for i in range(8)))


def _sane(values: list[float], *, unit: str) -> bool:
    if not values or not all(math.isfinite(v) for v in values):
        return False
    if unit == "percentunit":
        return all(-1.0 <= v <= 1.0 for v in values)
    return all(v >= 0 for v in values)


async def test_every_rule_and_panel_query_returns_sane_data(nats_url: str, tmp_path: Path) -> None:
    settings = nats_from_env({}, nats_url)
    assert settings is not None
    vllm = SimFleet(
        SimFleetConfig(
            engines=2, nats_url=nats_url, model=MODELS[0], instance_prefix="sim-vllm", seed=1
        )
    )
    sglang = SimFleet(
        SimFleetConfig(
            engines=2,
            nats_url=nats_url,
            flavor="sglang",
            model=MODELS[1],
            instance_prefix="sim-sgl",
            seed=2,
        )
    )
    # A static backend nobody listens on: connect failures, ejections and retries happen
    # for sure (a killed engine alone may have no request in flight when it dies).
    dead_backend = f"http://127.0.0.1:{free_tcp_port()}"
    router = Router(RouterConfig(port=0, nats=settings, backends=(dead_backend,)))
    exporter = Exporter(settings, port=0)
    synthetic = SyntheticTarget()
    stop = asyncio.Event()
    stats: dict[str, int] = {}
    load: asyncio.Task[None] | None = None
    await vllm.start()
    await sglang.start()
    try:
        await router.start(nats_wait_s=5)
        await exporter.start(wait_for_nats_s=5)
        await synthetic.start()
        assert router.port is not None

        def engine_entries(fleet: SimFleet) -> list[tuple[int, dict[str, str]]]:
            return [(e.port, {"namespace": "ml", "pod": e.instance_id}) for e in fleet.engines]

        config = _prometheus_config(
            {
                "ml/vllm": engine_entries(vllm),
                "ml/sglang": engine_entries(sglang),
                "ml/eagle-eye-router": [(router.port, {"namespace": "ml", "pod": "router-0"})],
                "ml/eagle-eye-exporter": [
                    (exporter.port, {"namespace": "ml", "pod": "exporter-0"})
                ],
                "real-cluster-exporters": [
                    (synthetic.port, {"namespace": "ml", "pod": "exporters-0"})
                ],
            }
        )
        async with _prometheus(tmp_path, config) as prom, aiohttp.ClientSession() as session:

            def fleet_known() -> bool:
                engines = [t for t in router.fleet.targets() if not t.static]
                return len(engines) == 4 and len(exporter.fleet) == 4

            assert await async_wait_for(fleet_known, timeout_s=10)
            load = asyncio.create_task(_load(router.url, stop, stats))

            async def warmed_up() -> bool:
                for expr in (
                    'eagle_eye:model_ttft_seconds:p99_5m{model_name="sim-qwen"}',
                    'eagle_eye:model_ttft_seconds:p99_5m{model_name="sim-llama"}',
                    "eagle_eye:prefix_cache_hit:ratio_rate5m",
                    "histogram_quantile(0.5, sum by (le) "
                    "(rate(gen_ai_server_time_per_output_token_seconds_bucket[1m])))",
                ):
                    if not _sane(_values(await _query(session, prom, expr)), unit="s"):
                        return False
                return True

            assert await async_wait_for(warmed_up, timeout_s=60, interval_s=0.5), stats
            # A crash mid-load: a target goes down, streams break mid-way.
            await vllm.engines[1].kill()

            async def failures_seen() -> bool:
                down = await _query(session, prom, 'up{pod="sim-vllm-1"} == 0')
                errors = await _query(
                    session, prom, "rate(eagle_eye_router_upstream_errors_total[1m])"
                )
                return bool(down) and bool(errors)

            assert await async_wait_for(failures_seen, timeout_s=30, interval_s=0.5), stats

            async with session.get(f"{prom}/api/v1/rules") as resp:
                groups = (await resp.json())["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            assert len(rules) == sum(
                len(g["rules"]) for f in RULE_FILES for g in yaml.safe_load(f.read_text())["groups"]
            )
            unhealthy = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
            assert unhealthy == []

            failures: list[str] = []
            recorded = [r for r in rules if r["type"] == "recording"]
            for rule in recorded:
                label_text = ",".join(
                    f'{k}="{v}"' for k, v in sorted(rule.get("labels", {}).items())
                )
                values = _values(await _query(session, prom, rule["query"]))
                is_ratio = "ratio" in rule["name"].rsplit(":", 1)[-1]
                if not _sane(values, unit="percentunit" if is_ratio else "count"):
                    failures.append(f"rule {rule['name']}{{{label_text}}}: {values[:5]}")
            for name in sorted({r["name"] for r in recorded}):
                if not await _query(session, prom, name):
                    failures.append(f"recorded series {name} is empty")

            queries = 0
            for dashboard in DASHBOARDS:
                for panel in iter_panels(dashboard):
                    for q in panel.queries:
                        queries += 1
                        values = _values(await _query(session, prom, expand(q.expr)))
                        unit = (
                            panel.unit
                            if panel.max_value == 1 or panel.unit == "percentunit"
                            else ""
                        )
                        if not _sane(values, unit=unit):
                            failures.append(
                                f"{dashboard.uid} / {panel.title}: {q.expr} -> {values[:5]}"
                            )
            assert failures == [], "\n".join(failures)

            # The engine-down alert's condition holds for the killed engine, and only it.
            engine_down = next(r for r in rules if r["name"] == "EagleEyeEngineDown")
            down = await _query(session, prom, engine_down["query"])
            assert [r["metric"]["pod"] for r in down] == ["sim-vllm-1"]
            # The simulator's stand-in GPU gauge stays marked as simulated after the join.
            util = await _query(
                session, prom, 'eagle_eye:accelerator_utilization:ratio{pod="sim-sgl-0"}'
            )
            assert [r["metric"].get("simulated") for r in util] == ["true"]
            assert queries > 80
            assert len(recorded) > 100
            assert stats.get("200", 0) > 20, stats
    finally:
        stop.set()
        if load is not None:
            await asyncio.wait_for(load, timeout=40)
        await synthetic.close()
        await exporter.close()
        await router.close()
        await sglang.stop()
        await vllm.stop()
