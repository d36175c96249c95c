"""``eagle-eye bench freshness``: how fresh is the router's fleet view, and how big can it get.

Freshness (end to end, real components): simulated engines call the real engine-side
``Publisher`` (``Channel.offer``, what the vLLM plugin calls from ``record()``) once per
step; the snapshots cross a real ``nats-server``; the real ``FleetSubscriber`` ingests them
into a ``FleetView``. Latency is the router's wall clock when the snapshot became visible
minus the snapshot's ``timestamp_s`` (the publisher's wall clock at ``offer``; same host,
same clock). The publishers run in a separate process, as engines would, with one
``Publisher`` (one NATS connection, one sender thread) per 64 simulated engines; each
engine offers at ``--step-hz`` with its own phase, so steps are spread evenly in time.
That engines' side is ``freshness_engines.py``; this module is the router's side, the
capacity measurements and the command.

Capacity (pure, in-process): ``FleetView.ingest`` of encoded snapshots from 1,000
instances, per second; and the default policy's ``pick`` latency over 1,000 candidates
with a realistic prompt prefix.

Goals (issue 7): p99 <= 5 ms at 64 publishers; >= 50,000 snapshots/s; pick <= 50 us.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from eagle_eye.bench.freshness_engines import publisher_main
from eagle_eye.bench.routing.metrics import quantile
from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.settings import NatsSettings
from eagle_eye.snapshot import Snapshot, encode

if TYPE_CHECKING:
    from eagle_eye.fleet.view import FleetView

DEFAULT_PUBLISHERS = (8, 64, 512)


# -- router side --------------------------------------------------------------------


@dataclass(slots=True)
class _Watch:
    """The router side of one level: latencies of snapshots seen while measuring."""

    fleet: FleetView
    engines: int
    latencies_ms: list[float] = field(default_factory=list)
    measuring: bool = False
    all_seen: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once every engine has been seen (before measuring starts)."""

    def on_snapshot(self, snapshot: Snapshot) -> None:
        """Subscriber listener: the snapshot is visible in the fleet view now."""
        if self.measuring:
            self.latencies_ms.append((time.time() - snapshot.timestamp_s) * 1000.0)
        elif len(self.fleet) >= self.engines:
            self.all_seen.set()


@dataclass(frozen=True, slots=True)
class _Window:
    """What one measurement window saw."""

    seen: int
    """Instances in the fleet view when measuring started."""
    ingested: int
    """Snapshots the fleet view applied during the window."""
    elapsed_s: float


async def _measure_window(watch: _Watch, warmup_s: float, duration_s: float) -> _Window:
    """Wait (30 s at most) for every engine, warm up, then measure for ``duration_s``."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(watch.all_seen.wait(), 30.0)
    seen = len(watch.fleet)
    await asyncio.sleep(warmup_s)
    ingested_before = watch.fleet.ingested
    watch.measuring = True
    started = time.monotonic()
    await asyncio.sleep(duration_s)
    watch.measuring = False
    elapsed = time.monotonic() - started
    return _Window(seen, watch.fleet.ingested - ingested_before, elapsed)


def _level_result(
    engines: int, step_hz: float, watch: _Watch, window: _Window, child: Any
) -> dict[str, Any]:
    latencies_ms = watch.latencies_ms
    return {
        "publishers": engines,
        "instances_seen": window.seen,
        "step_hz": step_hz,
        "offered_per_s": round(engines * step_hz, 1),
        "visible_per_s": round(window.ingested / window.elapsed_s, 1),
        "p50_ms": _r(quantile(latencies_ms, 0.50)),
        "p99_ms": _r(quantile(latencies_ms, 0.99)),
        "max_ms": _r(max(latencies_ms) if latencies_ms else None),
        "samples": len(latencies_ms),
        "publisher": child,
    }


async def measure_freshness(
    nats_url: str, engines: int, *, step_hz: float, duration_s: float, warmup_s: float = 1.0
) -> dict[str, Any]:
    """One level: ``engines`` publishers at ``step_hz`` for ``warmup_s + duration_s``."""
    from eagle_eye.fleet.subscriber import FleetSubscriber
    from eagle_eye.fleet.view import FleetView

    watch = _Watch(FleetView(), engines)
    subscriber = FleetSubscriber(
        NatsSettings(servers=(nats_url,)), watch.fleet, client_name="bench-freshness"
    )
    subscriber.listeners.append(watch.on_snapshot)
    await subscriber.start(wait_s=10.0)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(
        target=publisher_main,
        args=(nats_url, engines, step_hz, warmup_s + duration_s + 1.0, queue),
        daemon=True,
    )
    try:
        proc.start()
        window = await _measure_window(watch, warmup_s, duration_s)
        loop = asyncio.get_running_loop()
        child = await loop.run_in_executor(None, queue.get, True, 60.0)
    finally:
        await subscriber.close()
        proc.join(10.0)
        if proc.is_alive():
            proc.kill()
            proc.join(5.0)
    return _level_result(engines, step_hz, watch, window, child)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# -- capacity (pure) ----------------------------------------------------------------


def _snapshots(instances: int, per_instance: int) -> list[bytes]:
    rng = random.Random(1)
    now = time.time()
    out = []
    for seq in range(1, per_instance + 1):
        for i in range(instances):
            out.append(
                encode(
                    Snapshot(
                        instance_id=f"sim-{i}",
                        model="bench",
                        engine="sim",
                        seq=seq,
                        timestamp_s=now,
                        endpoint=f"http://10.0.{i // 250}.{i % 250}:8000",
                        running=rng.randrange(64),
                        waiting=rng.randrange(8),
                        kv_usage=rng.random(),
                        kv_capacity_tokens=430_000,
                        prefix_cache_queries_total=seq * 1000,
                        prefix_cache_hits_total=seq * 400,
                        step=seq,
                    )
                )
            )
    return out


def measure_ingest(instances: int = 1000, per_instance: int = 60) -> dict[str, Any]:
    """``FleetView.ingest`` throughput: decode + apply, snapshots per second."""
    from eagle_eye.fleet.view import FleetView

    messages = _snapshots(instances, per_instance)
    fleet = FleetView()
    now = time.monotonic()
    t0 = time.perf_counter()
    for data in messages:
        fleet.ingest(data, now)
    elapsed = time.perf_counter() - t0
    return {
        "instances": instances,
        "snapshots": len(messages),
        "snapshots_per_s": round(len(messages) / elapsed),
        "us_per_snapshot": round(1e6 * elapsed / len(messages), 3),
        "accepted": fleet.ingested,
    }


def measure_pick(
    instances: int = 1000, picks: int = 20_000, policies: Sequence[str] = ("default",)
) -> dict[str, Any]:
    """Latency of ``candidates()`` + ``pick`` over ``instances`` ready targets."""
    from eagle_eye.fleet.view import FleetView
    from eagle_eye.route.features import RequestFeatures
    from eagle_eye.route.policies import make_policies
    from eagle_eye.route.prefix import block_hashes

    fleet = FleetView()
    now = time.monotonic()
    for data in _snapshots(instances, 1):
        fleet.ingest(data, now)
    policy_map = make_policies()
    rng = random.Random(2)
    prompts = [" ".join(f"w{rng.randrange(10**6)}" for _ in range(600)) for _ in range(64)]
    system = "sys " * 1000
    out: dict[str, Any] = {"instances": instances}
    for name in policies:
        policy = policy_map[name]
        samples_us: list[float] = []
        for k in range(picks):
            text = system + prompts[k % len(prompts)]
            features = RequestFeatures(
                model="bench",
                prompt_tokens=len(text) // 4,
                max_tokens=256,
                prefix_hashes=block_hashes(text),
                now_mono_s=now,
            )
            t0 = time.perf_counter()
            candidates = fleet.candidates("bench", now)
            target = policy.pick(features, candidates, rng)
            samples_us.append((time.perf_counter() - t0) * 1e6)
            fleet.on_sent(target)
            fleet.on_finished(target)
            index = getattr(policy, "index", None)
            if index is not None:  # what the gateway does after a pick: remember the prefix
                index.insert(features.prefix_hashes, target.url)
        out[name] = {
            "pick_us_p50": round(statistics.median(samples_us), 2),
            "pick_us_p99": round(quantile(samples_us, 0.99) or 0.0, 2),
            "picks": picks,
        }
    return out


async def run_all(publishers: Sequence[int], step_hz: float, duration_s: float) -> dict[str, Any]:
    levels = []
    with EmbeddedNats() as server:
        for n in publishers:
            levels.append(
                await measure_freshness(server.url, n, step_hz=step_hz, duration_s=duration_s)
            )
    ingest = measure_ingest()
    pick = measure_pick()
    by_n = {lvl["publishers"]: lvl for lvl in levels}
    at64 = by_n.get(64, {}).get("p99_ms")
    pick_default = pick["default"]["pick_us_p99"]
    return {
        "benchmark": "freshness",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "method": (
            "publishers: real Publisher in a child process (64 engines per connection), "
            "one offer per step; real nats-server; real FleetSubscriber+FleetView; latency = "
            "visible-in-router wall time - snapshot timestamp_s"
        ),
        "levels": levels,
        "fleet_view": {"ingest": ingest, "pick": pick},
        "goals": {
            "p99_ms_at_64_publishers<=5": at64 is not None and at64 <= 5.0,
            "snapshots_per_s>=50000": ingest["snapshots_per_s"] >= 50_000,
            "pick_us_p99_at_1000<=50": pick_default <= 50.0,
        },
    }


@click.command("freshness")
@click.option(
    "--publishers",
    default=",".join(map(str, DEFAULT_PUBLISHERS)),
    show_default=True,
    help="Comma-separated publisher counts, one measurement each.",
)
@click.option(
    "--step-hz",
    default=50.0,
    show_default=True,
    help="Steps per second per simulated engine (50: a 20 ms decode step).",
)
@click.option(
    "--duration", "duration_s", default=5.0, show_default=True, help="Seconds measured per level."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (the default; kept for symmetry)."
)
def freshness(publishers: str, step_hz: float, duration_s: float, as_json: bool) -> None:
    """Publish-to-visible latency at 8/64/512 publishers, fleet-view ingest and pick cost."""
    counts = [int(x) for x in publishers.split(",") if x.strip()]
    result = asyncio.run(run_all(counts, step_hz, duration_s))
    click.echo(json.dumps(result, indent=2))
