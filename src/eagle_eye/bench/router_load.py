"""The load generator of ``bench router``: open- and closed-loop HTTP load, own process.

Each job runs in a fresh spawned process (aiohttp on uvloop when installed), so the
generator never shares an interpreter, a GIL or an event loop with the router it
measures. Jobs and results are small picklable dataclasses that cross the process
boundary; ``measure`` turns one router's three jobs into the JSON keys the benchmark
prints.

* Open loop (latency): a fixed arrival rate per target, targets interleaved request by
  request, so a router and the direct path see the same background noise.
* Closed loop (max rate): ``concurrency`` clients, each sending its next request as soon
  as the last one completes; completed 200 responses per second.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from eagle_eye.bench.router_backend import MODEL

CHAT_BODY: Final = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}]}
"""The request every router gets: a small non-streaming chat completion."""
CHAT_PATH: Final = "/v1/chat/completions"
WARMUP_REQUESTS_PER_TARGET: Final = 20
"""Open loop: requests per target sent (and not counted) to fill the connection pools."""

# Jobs and results cross the spawn boundary by pickle: frozen dataclasses without slots,
# because frozen slotted ones fail to unpickle on early Python 3.10 releases.


@dataclass(frozen=True, kw_only=True)
class OpenLoopJob:
    """Open-loop load: ``rate_rps`` requests/s on *each* target, interleaved."""

    targets: tuple[tuple[str, dict[str, str]], ...]
    """(URL, headers) per target; the first is the router, a second the direct path."""
    body: bytes
    rate_rps: float
    duration_s: float


@dataclass(frozen=True, kw_only=True)
class OpenLoopResult:
    latencies_ms: list[list[float]]
    """Per target, sorted latencies of the 200 responses, milliseconds."""
    errors: int
    """Responses other than 200 and failed connections, all targets."""


@dataclass(frozen=True, kw_only=True)
class ClosedLoopJob:
    """Closed-loop load: ``concurrency`` clients back to back for ``duration_s``."""

    url: str
    headers: dict[str, str]
    body: bytes
    concurrency: int
    duration_s: float


@dataclass(frozen=True, kw_only=True)
class ClosedLoopResult:
    rps: float
    """Completed 200 responses per second of the measured window."""
    errors: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadPlan:
    """How hard ``bench router`` pushes each router: the CLI flags one to one."""

    rate_rps: float
    """Open-loop arrival rate per target (``--rate``)."""
    concurrency: int
    """Closed-loop clients (``--concurrency``)."""
    duration_s: float
    """Measured seconds per job (``--duration``)."""


async def _open_loop(job: OpenLoopJob) -> OpenLoopResult:
    """Open-loop load at ``rate`` requests/s on *each* URL, interleaved request by request,
    so a router and the direct path are measured under the same background noise."""
    urls = job.targets
    latencies: list[list[float]] = [[] for _ in urls]
    errors = 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(k: int) -> None:
            nonlocal errors
            url, headers = urls[k]
            t0 = time.perf_counter()
            try:
                async with session.post(url, data=job.body, headers=headers) as resp:
                    await resp.read()
                    ok = resp.status == 200
            except aiohttp.ClientError:
                ok = False
            if ok:
                latencies[k].append(time.perf_counter() - t0)
            else:
                errors += 1

        # Warm the connection pools first.
        warmup = WARMUP_REQUESTS_PER_TARGET * len(urls)
        await asyncio.gather(*(one(i % len(urls)) for i in range(warmup)))
        for lat in latencies:
            lat.clear()
        errors = 0
        tasks = []
        total_rate = job.rate_rps * len(urls)
        n = int(total_rate * job.duration_s)
        start = time.perf_counter()
        for i in range(n):
            delay = start + i / total_rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i % len(urls))))
        await asyncio.gather(*tasks)
    return OpenLoopResult(
        latencies_ms=[sorted(x * 1000 for x in lat) for lat in latencies], errors=errors
    )


async def _closed_loop(job: ClosedLoopJob) -> ClosedLoopResult:
    done = 0
    errors = 0
    connector = aiohttp.TCPConnector(limit=job.concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        measuring = False
        stop_at = 0.0

        async def worker() -> None:
            nonlocal done, errors
            while not measuring or time.perf_counter() < stop_at:
                try:
                    async with session.post(job.url, data=job.body, headers=job.headers) as resp:
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

        tasks = [asyncio.create_task(worker()) for _ in range(job.concurrency)]
        await asyncio.sleep(min(1.0, job.duration_s / 4))  # warm-up, not counted
        stop_at = time.perf_counter() + job.duration_s
        started = time.perf_counter()
        measuring = True
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    return ClosedLoopResult(rps=done / elapsed, errors=errors)


def _loadgen_main(job: OpenLoopJob | ClosedLoopJob, out: Any) -> None:
    """Child process: run ``job`` on uvloop when installed, put its result on ``out``."""

    async def run() -> OpenLoopResult | ClosedLoopResult:
        if isinstance(job, OpenLoopJob):
            return await _open_loop(job)
        return await _closed_loop(job)

    try:
        import uvloop

        result = uvloop.run(run())
    except ImportError:
        result = asyncio.run(run())
    out.put(result)


def _run_in_fresh_process(job: OpenLoopJob | ClosedLoopJob, timeout_s: float) -> Any:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_loadgen_main, args=(job, queue))
    proc.start()
    try:
        return queue.get(timeout=timeout_s)
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def run_open_loop(job: OpenLoopJob, timeout_s: float) -> OpenLoopResult:
    """Run one open-loop job in a fresh process; return its result."""
    result: OpenLoopResult = _run_in_fresh_process(job, timeout_s)
    return result


def run_closed_loop(job: ClosedLoopJob, timeout_s: float) -> ClosedLoopResult:
    """Run one closed-loop job in a fresh process; return its result."""
    result: ClosedLoopResult = _run_in_fresh_process(job, timeout_s)
    return result


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of already sorted values (NaN when empty)."""
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def measure(
    base_url: str,
    headers: dict[str, str],
    plan: LoadPlan,
    *,
    direct_url: str | None = None,
) -> dict[str, Any]:
    """Latency at ``plan.rate_rps`` and max request rates (non-streaming and streaming).

    With ``direct_url`` the latency run is paired: the same rate goes to the backend
    directly, interleaved, and ``overhead_ms_*`` is the difference of the percentiles.
    """
    body = json.dumps(CHAT_BODY).encode()
    stream_body = json.dumps(dict(CHAT_BODY, stream=True)).encode()
    hdrs = {"Content-Type": "application/json", **headers}
    limit = plan.duration_s * 4 + 60
    lat = _open_loop_job(base_url, hdrs, plan, direct_url)

    def closed_loop(payload: bytes) -> ClosedLoopResult:
        job = ClosedLoopJob(
            url=base_url + CHAT_PATH,
            headers=hdrs,
            body=payload,
            concurrency=plan.concurrency,
            duration_s=plan.duration_s,
        )
        return run_closed_loop(job, limit)

    mx, smx = closed_loop(body), closed_loop(stream_body)
    lats = lat.latencies_ms[0]
    out = {
        "latency_ms_p50": percentile(lats, 0.50),
        "latency_ms_p99": percentile(lats, 0.99),
        "requests": len(lats),
        "errors": lat.errors + mx.errors + smx.errors,
        "max_rps": mx.rps,
        "stream_max_rps": smx.rps,
    }
    if direct_url is not None:
        out.update(_overhead(out, lat.latencies_ms[1]))
    return out


def _open_loop_job(
    base_url: str, headers: dict[str, str], plan: LoadPlan, direct_url: str | None
) -> OpenLoopResult:
    targets = [(base_url + CHAT_PATH, headers)]
    if direct_url is not None:
        targets.append((direct_url + CHAT_PATH, {"Content-Type": "application/json"}))
    job = OpenLoopJob(
        targets=tuple(targets),
        body=json.dumps(CHAT_BODY).encode(),
        rate_rps=plan.rate_rps,
        duration_s=plan.duration_s,
    )
    return run_open_loop(job, plan.duration_s * 4 + 60)


def paired_latency(base_url: str, plan: LoadPlan, direct_url: str) -> dict[str, Any]:
    """The open-loop latency job alone (no max-rate runs), paired with the direct path:
    latency and overhead percentiles, as ``measure`` reports them."""
    lat = _open_loop_job(base_url, {"Content-Type": "application/json"}, plan, direct_url)
    lats = lat.latencies_ms[0]
    out: dict[str, Any] = {
        "latency_ms_p50": percentile(lats, 0.50),
        "latency_ms_p99": percentile(lats, 0.99),
        "requests": len(lats),
        "errors": lat.errors,
    }
    out.update(_overhead(out, lat.latencies_ms[1]))
    return out


def _overhead(router: dict[str, Any], direct_ms: list[float]) -> dict[str, float]:
    """The direct path's percentiles and the router's overhead over them."""
    p50, p99 = percentile(direct_ms, 0.50), percentile(direct_ms, 0.99)
    return {
        "direct_latency_ms_p50": p50,
        "direct_latency_ms_p99": p99,
        "overhead_ms_p50": router["latency_ms_p50"] - p50,
        "overhead_ms_p99": router["latency_ms_p99"] - p99,
    }
