"""A fixed burst of streaming completions against one OpenAI-compatible server, timed.

Every request streams (``stream: true``) so the client sees the time to the first token;
the token count comes from the final ``usage`` event (an event may carry several tokens
when the server is busy), and time per output token is the rest of the request divided
by the tokens after the first. ``ignore_eos`` makes each request generate exactly
``max_tokens``, so two runs do the same work. The client's own CPU time
is recorded so a report can show that the load generator was not the bottleneck.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass

import aiohttp


@dataclass(slots=True)
class RequestTiming:
    start_s: float
    first_s: float | None = None
    end_s: float | None = None
    tokens: int = 0
    status: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BurstResult:
    """One burst, as the client measured it."""

    requests: int
    errors: int
    error_kinds: tuple[str, ...]
    """Exception or HTTP status of each failed request."""
    output_tokens: int
    wall_s: float
    throughput_tok_s: float
    ttft_p50_ms: float
    tpot_p50_ms: float
    """Median over requests of (last - first token time) / (tokens - 1)."""
    client_cpu_s: float
    """CPU the load generator used during the burst (its process, all threads)."""


async def _one(session: aiohttp.ClientSession, url: str, body: dict[str, object]) -> RequestTiming:
    timing = RequestTiming(start_s=time.perf_counter())
    try:
        async with session.post(url + "/v1/completions", json=body) as response:
            timing.status = response.status
            async for line in response.content:
                if not line.startswith(b"data:") or line.startswith(b"data: [DONE]"):
                    continue
                if b'"usage"' in line:
                    usage = json.loads(line[5:]).get("usage") or {}
                    timing.tokens = int(usage.get("completion_tokens") or 0)
                if timing.first_s is None and b'"text"' in line:
                    timing.first_s = time.perf_counter()
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        timing.status = 0  # counted as an error; the run is then invalid
        timing.error = type(exc).__name__
    timing.end_s = time.perf_counter()
    return timing


async def run_burst(
    url: str, model: str, *, requests: int, concurrency: int, max_tokens: int, tag: str
) -> BurstResult:
    """``requests`` streaming completions, ``concurrency`` at a time, distinct prompts."""
    bodies = [
        {
            "model": model,
            "prompt": f"{tag} request {i}: running and waiting requests, KV cache usage",
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for i in range(requests)
    ]
    cpu_before_s = time.process_time()
    timeout = aiohttp.ClientTimeout(total=600)
    slots = asyncio.Semaphore(concurrency)

    async def bounded(session: aiohttp.ClientSession, body: dict[str, object]) -> RequestTiming:
        async with slots:
            return await _one(session, url, body)

    # A fresh connection per request: no keep-alive connection the server closes while
    # the client picks it up again (a POST is not retried).
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        timings = await asyncio.gather(*(bounded(session, body) for body in bodies))
    cpu_s = time.process_time() - cpu_before_s
    ok = [t for t in timings if t.status == 200 and t.first_s is not None and t.end_s]
    tokens = sum(t.tokens for t in ok)
    wall_s = max((t.end_s or 0.0) for t in timings) - min(t.start_s for t in timings)
    ttfts = [(t.first_s or 0.0) - t.start_s for t in ok]
    tpots = [((t.end_s or 0.0) - (t.first_s or 0.0)) / (t.tokens - 1) for t in ok if t.tokens > 1]
    return BurstResult(
        requests=len(timings),
        errors=len(timings) - len(ok),
        error_kinds=tuple(t.error or f"status {t.status}" for t in timings if t not in ok),
        output_tokens=tokens,
        wall_s=wall_s,
        throughput_tok_s=tokens / wall_s if wall_s > 0 else 0.0,
        ttft_p50_ms=statistics.median(ttfts) * 1000 if ttfts else float("nan"),
        tpot_p50_ms=statistics.median(tpots) * 1000 if tpots else float("nan"),
        client_cpu_s=cpu_s,
    )
