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

``--tracing-overhead`` adds a ``tracing`` section: our router with tracing off, at 1 %
and at 100 % sampling, in rotated rounds (``router_tracing.py``); ``--routers ''`` skips
the side-by-side part.

This module is the command and the run's JSON; ``router_load.py`` generates the load,
``router_contenders.py`` starts the backend and each router.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
from collections.abc import Sequence
from typing import Any, Final

import click

from eagle_eye.bench.router_contenders import start_backend, start_router
from eagle_eye.bench.router_load import LoadPlan, measure
from eagle_eye.bench.router_tracing import measure_tracing_overhead

ROUTERS: Final = ("eagle-eye", "litellm", "vllm-router", "sglang-router")
OVERHEAD_P50_GOAL_MS: Final = 1.0
OVERHEAD_P99_GOAL_MS: Final = 5.0
MAX_RPS_GOAL_VS_LITELLM: Final = 2.0
"""Our max rate must be at least this multiple of LiteLLM's."""


async def _measure_router(name: str, backend_url: str, plan: LoadPlan) -> dict[str, Any]:
    """Start ``name`` alone in front of the backend, measure it paired with the direct
    path, stop it; a router that will not start is reported with its ``error``."""
    try:
        router = await start_router(name, backend_url)
    except Exception as exc:  # noqa: BLE001 - a peer that will not start is reported
        return {"error": f"{type(exc).__name__}: {exc}"[-1500:]}
    try:
        return await asyncio.to_thread(
            measure, router.url, router.headers, plan, direct_url=backend_url
        )
    finally:
        router.handle.stop()


def goals(results: dict[str, Any]) -> dict[str, bool]:
    """The issue's goals for our router, where its numbers (and LiteLLM's) exist."""
    ours = results.get("eagle-eye", {})
    lite = results.get("litellm", {})
    met: dict[str, bool] = {}
    if "overhead_ms_p50" in ours:
        met["overhead_p50_le_1ms"] = ours["overhead_ms_p50"] <= OVERHEAD_P50_GOAL_MS
        met["overhead_p99_le_5ms"] = ours["overhead_ms_p99"] <= OVERHEAD_P99_GOAL_MS
    if "max_rps" in ours and "max_rps" in lite:
        met["max_rps_ge_2x_litellm"] = ours["max_rps"] >= MAX_RPS_GOAL_VS_LITELLM * lite["max_rps"]
    return met


def _document(plan: LoadPlan, direct: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """The JSON the command prints: machine, method, direct path, routers, goals."""
    return {
        "benchmark": "router",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "method": {
            "rate_rps": plan.rate_rps,
            "concurrency": plan.concurrency,
            "duration_s": plan.duration_s,
            "request": "chat completion, 1 short message; streaming: 16 SSE chunks",
            "backend": "fast fake backend (own process)",
            "load_generator": "aiohttp on uvloop, own process",
        },
        "direct": direct,
        "routers": results,
        "goals": goals(results),
    }


async def run_benchmark(
    routers: Sequence[str], plan: LoadPlan, *, tracing_rounds: int = 0
) -> dict[str, Any]:
    """The direct path, then each router in turn, one at a time (2 cores: no two
    routers ever compete); then, with ``tracing_rounds``, the tracing overhead."""
    backend, backend_url = await start_backend()
    results: dict[str, Any] = {}
    tracing = None
    try:
        direct = await asyncio.to_thread(measure, backend_url, {}, plan) if routers else {}
        for name in routers:
            results[name] = await _measure_router(name, backend_url, plan)
        if tracing_rounds:
            tracing = await measure_tracing_overhead(backend_url, plan, tracing_rounds)
    finally:
        backend.stop()
    document = _document(plan, direct, results)
    if tracing is not None:
        document["tracing"] = tracing
        document["goals"].update(tracing["goals"])
    return document


def parse_routers(value: str) -> list[str]:
    """``--routers``: a comma-separated subset of ``ROUTERS``, in the order given."""
    names = [r.strip() for r in value.split(",") if r.strip()]
    unknown = set(names) - set(ROUTERS)
    if unknown:
        raise click.BadParameter(f"unknown routers {sorted(unknown)}; known: {ROUTERS}")
    return names


@click.command("router")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the only output format).")
@click.option("--rate", type=float, default=300.0, show_default=True)
@click.option("--concurrency", type=int, default=32, show_default=True)
@click.option("--duration", "duration_s", type=float, default=5.0, show_default=True)
@click.option(
    "--routers",
    default=",".join(ROUTERS),
    show_default=True,
    help="Comma-separated subset of routers to measure ('' for none).",
)
@click.option(
    "--tracing-overhead",
    "tracing_rounds",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Also measure our router with tracing off, at 1%% and 100%% sampling, in this "
    "many rotated rounds (medians reported).",
)
def router(
    as_json: bool,
    rate: float,
    concurrency: int,
    duration_s: float,
    routers: str,
    tracing_rounds: int,
) -> None:
    """Router added latency vs direct and max request rate, side by side with peers."""
    names = parse_routers(routers)
    plan = LoadPlan(rate_rps=rate, concurrency=concurrency, duration_s=duration_s)
    result = asyncio.run(run_benchmark(names, plan, tracing_rounds=tracing_rounds))
    click.echo(json.dumps(result, indent=2))
