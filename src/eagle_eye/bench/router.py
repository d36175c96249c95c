"""``eagle-eye bench router --json``: what a router costs in front of an engine.

Method. One fast fake backend (``bench/router_backend.py``, its own process, answers at
once) stands in for the engine. Each router in turn (Eagle Eye, LiteLLM's proxy, the Rust
``vllm-router`` and ``sglang-router``) is started alone in front of it and measured by a
load generator in a separate process (aiohttp on uvloop), then stopped, so no two routers
compete for the 2 cores. "direct" is the same load against the backend itself.

* ``overhead_ms_p50`` / ``overhead_ms_p99``: open-loop load at ``--rate`` requests/s
  (default 300) of small non-streaming chat completions for ``--duration`` seconds,
  through the router and, interleaved request by request at the same rate, directly to
  the backend (paired, so background noise hits both alike); overhead = the router's
  latency percentile minus the direct one from the same run.
* ``max_rps`` / ``stream_max_rps``: closed loop with ``--concurrency`` clients for
  ``--duration`` seconds, non-streaming and streaming (16 SSE chunks per response);
  completed 200 responses per second.

The peers live in their own virtualenvs under ``~/.cache/eagle-eye`` (created on first
use: the Rust routers via ``bench/peers.py``, LiteLLM in ``peers-litellm``). A peer that
cannot be installed or started is reported with an ``error`` instead of numbers.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import aiohttp
import click

from eagle_eye.bench.processes import free_tcp_port, stop_process_group
from eagle_eye.bench.router_backend import MODEL

LITELLM_VERSION: Final = "1.108.7"
LITELLM_KEY: Final = "sk-eagle-eye-bench"
ROUTERS: Final = ("eagle-eye", "litellm", "vllm-router", "sglang-router")
_CHAT_BODY: Final = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}]}


def litellm_venv() -> Path:
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

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        # Closed in stop(): the log outlives this call by design.
        self.log = tempfile.NamedTemporaryFile(prefix="eagle-eye-bench-", suffix=".log")  # noqa: SIM115
        self.proc = subprocess.Popen(
            list(argv),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )

    def tail(self, chars: int = 1500) -> str:
        self.log.flush()
        return Path(self.log.name).read_bytes()[-chars:].decode(errors="replace")

    async def wait_ready(self, url: str, timeout_s: float, headers: dict[str, str]) -> None:
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"exited with {self.proc.returncode}: {self.tail()}")
                try:
                    async with session.post(
                        url + "/v1/chat/completions",
                        json=_CHAT_BODY,
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


# -- load generation (runs in its own process) -------------------------------------------


async def _open_loop(
    urls: list[tuple[str, dict[str, str]]], body: bytes, rate: float, duration_s: float
) -> dict[str, Any]:
    """Open-loop load at ``rate`` requests/s on *each* URL, interleaved request by request,
    so a router and the direct path are measured under the same background noise."""
    latencies: list[list[float]] = [[] for _ in urls]
    errors = 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(k: int) -> None:
            nonlocal errors
            url, headers = urls[k]
            t0 = time.perf_counter()
            try:
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    ok = resp.status == 200
            except aiohttp.ClientError:
                ok = False
            if ok:
                latencies[k].append(time.perf_counter() - t0)
            else:
                errors += 1

        # Warm the connection pools first.
        await asyncio.gather(*(one(i % len(urls)) for i in range(20 * len(urls))))
        for lat in latencies:
            lat.clear()
        errors = 0
        tasks = []
        total_rate = rate * len(urls)
        n = int(total_rate * duration_s)
        start = time.perf_counter()
        for i in range(n):
            delay = start + i / total_rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i % len(urls))))
        await asyncio.gather(*tasks)
    return {"latencies_ms": [sorted(x * 1000 for x in lat) for lat in latencies], "errors": errors}


async def _closed_loop(
    url: str, headers: dict[str, str], body: bytes, concurrency: int, duration_s: float
) -> dict[str, Any]:
    done = 0
    errors = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        measuring = False
        stop_at = 0.0

        async def worker() -> None:
            nonlocal done, errors
            while not measuring or time.perf_counter() < stop_at:
                try:
                    async with session.post(url, data=body, headers=headers) as resp:
                        await resp.read()
                        ok = resp.status == 200
                except aiohttp.ClientError:
                    ok = False
                if not measuring:
                    continue
                if ok:
                    done += 1
                else:
                    errors += 1

        tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await asyncio.sleep(min(1.0, duration_s / 4))  # warm-up, not counted
        stop_at = time.perf_counter() + duration_s
        started = time.perf_counter()
        measuring = True
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    return {"rps": done / elapsed, "errors": errors}


def _loadgen_main(job: dict[str, Any], out: Any) -> None:
    async def run() -> dict[str, Any]:
        if job["mode"] == "open":
            return await _open_loop(job["urls"], job["body"], job["rate"], job["duration_s"])
        return await _closed_loop(
            job["url"], job["headers"], job["body"], job["concurrency"], job["duration_s"]
        )

    try:
        import uvloop

        result = uvloop.run(run())
    except ImportError:
        result = asyncio.run(run())
    out.put(result)


def run_load(job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run one load job in a fresh process; return its result."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_loadgen_main, args=(job, queue))
    proc.start()
    try:
        result: dict[str, Any] = queue.get(timeout=timeout_s)
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
    return result


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def measure(
    base_url: str,
    headers: dict[str, str],
    *,
    rate: float,
    concurrency: int,
    duration_s: float,
    direct_url: str | None = None,
) -> dict[str, Any]:
    """Latency at ``rate`` and max request rates (non-streaming and streaming).

    With ``direct_url`` the latency run is paired: the same rate goes to the backend
    directly, interleaved, and ``overhead_ms_*`` is the difference of the percentiles.
    """
    path = "/v1/chat/completions"
    body = json.dumps(_CHAT_BODY).encode()
    stream_body = json.dumps(dict(_CHAT_BODY, stream=True)).encode()
    hdrs = {"Content-Type": "application/json", **headers}
    limit = duration_s * 4 + 60
    urls = [(base_url + path, hdrs)]
    if direct_url is not None:
        urls.append((direct_url + path, {"Content-Type": "application/json"}))
    lat = run_load(
        {"mode": "open", "urls": urls, "body": body, "rate": rate, "duration_s": duration_s},
        limit,
    )
    common = {"url": base_url + path, "headers": hdrs, "duration_s": duration_s}
    mx = run_load({**common, "mode": "closed", "body": body, "concurrency": concurrency}, limit)
    smx = run_load(
        {**common, "mode": "closed", "body": stream_body, "concurrency": concurrency}, limit
    )
    lats = lat["latencies_ms"][0]
    out = {
        "latency_ms_p50": _percentile(lats, 0.50),
        "latency_ms_p99": _percentile(lats, 0.99),
        "requests": len(lats),
        "errors": lat["errors"] + mx["errors"] + smx["errors"],
        "max_rps": mx["rps"],
        "stream_max_rps": smx["rps"],
    }
    if direct_url is not None:
        direct = lat["latencies_ms"][1]
        out["direct_latency_ms_p50"] = _percentile(direct, 0.50)
        out["direct_latency_ms_p99"] = _percentile(direct, 0.99)
        out["overhead_ms_p50"] = out["latency_ms_p50"] - out["direct_latency_ms_p50"]
        out["overhead_ms_p99"] = out["latency_ms_p99"] - out["direct_latency_ms_p99"]
    return out


# -- starting the routers -----------------------------------------------------------------


async def _start_router(name: str, backend_url: str) -> tuple[Child | Any, str, dict[str, str]]:
    port = free_tcp_port()
    url = f"http://127.0.0.1:{port}"
    if name == "eagle-eye":
        cli = "from eagle_eye.cli import main; main()"
        child = Child(
            [sys.executable, "-c", cli, "router", "--backend", backend_url, "--port", str(port)],
            env={"EAGLE_EYE_LOG_LEVEL": "WARNING"},
        )
        await child.wait_ready(url, 60, {})
        return child, url, {}
    if name == "litellm":
        binary = ensure_litellm()
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
        await child.wait_ready(url, 180, headers)
        return child, url, headers
    from eagle_eye.bench.peers import PeerRouter, ensure_installed

    binary_path = ensure_installed([name])[name]
    peer = PeerRouter(
        name=name, policy="round_robin", worker_urls=[backend_url], binary=binary_path
    )
    await peer.__aenter__()
    return peer, peer.url, {}


def _stop(handle: Any) -> None:
    handle.stop()


async def run_benchmark(
    routers: Sequence[str], *, rate: float, concurrency: int, duration_s: float
) -> dict[str, Any]:
    backend_port = free_tcp_port()
    backend_url = f"http://127.0.0.1:{backend_port}"
    backend = Child(
        [sys.executable, "-m", "eagle_eye.bench.router_backend", "--port", str(backend_port)]
    )
    results: dict[str, Any] = {}
    try:
        await backend.wait_ready(backend_url, 60, {})
        direct = await asyncio.to_thread(
            measure, backend_url, {}, rate=rate, concurrency=concurrency, duration_s=duration_s
        )
        for name in routers:
            try:
                handle, url, headers = await _start_router(name, backend_url)
            except Exception as exc:  # noqa: BLE001 - a peer that will not start is reported
                results[name] = {"error": f"{type(exc).__name__}: {exc}"[-1500:]}
                continue
            try:
                m = await asyncio.to_thread(
                    measure,
                    url,
                    headers,
                    rate=rate,
                    concurrency=concurrency,
                    duration_s=duration_s,
                    direct_url=backend_url,
                )
            finally:
                _stop(handle)
            results[name] = m
    finally:
        backend.stop()
    out: dict[str, Any] = {
        "benchmark": "router",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "method": {
            "rate_rps": rate,
            "concurrency": concurrency,
            "duration_s": duration_s,
            "request": "chat completion, 1 short message; streaming: 16 SSE chunks",
            "backend": "fast fake backend (own process)",
            "load_generator": "aiohttp on uvloop, own process",
        },
        "direct": direct,
        "routers": results,
    }
    ours = results.get("eagle-eye", {})
    lite = results.get("litellm", {})
    goals: dict[str, Any] = {}
    if "overhead_ms_p50" in ours:
        goals["overhead_p50_le_1ms"] = ours["overhead_ms_p50"] <= 1.0
        goals["overhead_p99_le_5ms"] = ours["overhead_ms_p99"] <= 5.0
    if "max_rps" in ours and "max_rps" in lite:
        goals["max_rps_ge_2x_litellm"] = ours["max_rps"] >= 2 * lite["max_rps"]
    out["goals"] = goals
    return out


@click.command("router")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the only output format).")
@click.option("--rate", type=float, default=300.0, show_default=True)
@click.option("--concurrency", type=int, default=32, show_default=True)
@click.option("--duration", "duration_s", type=float, default=5.0, show_default=True)
@click.option(
    "--routers",
    default=",".join(ROUTERS),
    show_default=True,
    help="Comma-separated subset of routers to measure.",
)
def router(as_json: bool, rate: float, concurrency: int, duration_s: float, routers: str) -> None:
    """Router added latency vs direct and max request rate, side by side with peers."""
    names = [r.strip() for r in routers.split(",") if r.strip()]
    unknown = set(names) - set(ROUTERS)
    if unknown:
        raise click.BadParameter(f"unknown routers {sorted(unknown)}; known: {ROUTERS}")
    result = asyncio.run(
        run_benchmark(names, rate=rate, concurrency=concurrency, duration_s=duration_s)
    )
    click.echo(json.dumps(result, indent=2))
