"""A fixed burst of streaming completions against one OpenAI-compatible server, timed.

Every request streams (``stream: true``, one token per event with vLLM) so the client
sees time to first token and every inter-token gap; ``ignore_eos`` makes each request
generate exactly ``max_tokens``, so two runs do the same work. The client's own CPU time
is recorded so a report can show that the load generator was not the bottleneck.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

import aiohttp


@dataclass(slots=True)
class RequestTiming:
    start_s: float
    first_s: float | None = None
    end_s: float | None = None
    gaps_s: list[float] = field(default_factory=list)
    tokens: int = 0
    status: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BurstResult:
    """One burst, as the client measured it."""

    requests: int
    errors: int
    output_tokens: int
    wall_s: float
    throughput_tok_s: float
    ttft_p50_ms: float
    itl_p50_ms: float
    client_cpu_s: float
    """CPU the load generator used during the burst (its process, all threads)."""


async def _one(session: aiohttp.ClientSession, url: str, body: dict[str, object]) -> RequestTiming:
    timing = RequestTiming(start_s=time.perf_counter())
    async with session.post(url + "/v1/completions", json=body) as response:
        timing.status = response.status
        last_s: float | None = None
        async for line in response.content:
            if not line.startswith(b"data:") or line.startswith(b"data: [DONE]"):
                continue
            now = time.perf_counter()
            if last_s is None:
                timing.first_s = now
            else:
                timing.gaps_s.append(now - last_s)
            last_s = now
            timing.tokens += 1
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
        }
        for i in range(requests)
    ]
    cpu_before_s = time.process_time()
    timeout = aiohttp.ClientTimeout(total=600)
    slots = asyncio.Semaphore(concurrency)

    async def bounded(session: aiohttp.ClientSession, body: dict[str, object]) -> RequestTiming:
        async with slots:
            return await _one(session, url, body)

    async with aiohttp.ClientSession(timeout=timeout) as session:
        timings = await asyncio.gather(*(bounded(session, body) for body in bodies))
    cpu_s = time.process_time() - cpu_before_s
    ok = [t for t in timings if t.status == 200 and t.first_s is not None and t.end_s]
    tokens = sum(t.tokens for t in ok)
    wall_s = max((t.end_s or 0.0) for t in timings) - min(t.start_s for t in timings)
    gaps = [gap for t in ok for gap in t.gaps_s]
    ttfts = [(t.first_s or 0.0) - t.start_s for t in ok]
    return BurstResult(
        requests=len(timings),
        errors=len(timings) - len(ok),
        output_tokens=tokens,
        wall_s=wall_s,
        throughput_tok_s=tokens / wall_s if wall_s > 0 else 0.0,
        ttft_p50_ms=statistics.median(ttfts) * 1000 if ttfts else float("nan"),
        itl_p50_ms=statistics.median(gaps) * 1000 if gaps else float("nan"),
        client_cpu_s=cpu_s,
    )
