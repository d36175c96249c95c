"""``eagle-eye bench sim``: how fast the simulator runs, in real-time and offline modes.

* Real time: ``--engines`` engines (default 8) in one asyncio loop, each kept busy with a
  decode batch, stepping on the wall clock (speedup 1) and calling the real plugin's
  ``record()`` every step. Reported: steps per engine per second achieved, and steps per
  CPU-second of this process, i.e. how many engines at 50 steps/s one core carries.
* Offline: the Mooncake conversation trace (one hour, 12,031 requests) on 8 engines in
  virtual time with a least-loaded policy. Reported: simulated seconds per wall second.

Prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import click

from eagle_eye.publish.publisher import Publisher
from eagle_eye.settings import nats_from_env
from eagle_eye.sim.cost_model import DEFAULT_PROFILE, PROFILES
from eagle_eye.sim.offline import EngineView, OfflineFleet, OfflineRequest

_PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TRACE = _PROJECT_ROOT.parent / "shared" / "data" / "traces" / "mooncake_conversation.jsonl"
TARGET_STEPS_PER_S = 50


async def _real_time(
    engines: int, duration_s: float, batch: int, profile: str, nats_url: str | None
) -> dict[str, Any]:
    from eagle_eye.sim.fleet import SimFleet, SimFleetConfig

    config = SimFleetConfig(engines=engines, profile=profile, nats_url=nats_url)
    # Without NATS an inert publisher still runs the plugin's whole record() path.
    publisher = None if nats_url else Publisher(None)
    async with SimFleet(config, publisher=publisher) as fleet:
        for engine in fleet.engines:
            for _ in range(batch):
                engine.submit_local(64, 1_000_000 // batch)
        steps0 = [e.core.counters.steps for e in fleet.engines]
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(duration_s)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        steps = [e.core.counters.steps - s for e, s in zip(fleet.engines, steps0, strict=True)]
        step_s = [e.core.now_s / max(1, e.core.counters.steps) for e in fleet.engines]
    total = sum(steps)
    per_cpu = total / cpu if cpu > 0 else 0.0
    return {
        "engines": engines,
        "profile": profile,
        "batch_per_engine": batch,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "cpu_fraction_of_one_core": round(cpu / wall, 3),
        "steps_total": total,
        "steps_per_s_per_engine": round(total / wall / engines, 1),
        "cost_model_steps_per_s_per_engine": round(1 / statistics.mean(step_s), 1),
        "steps_per_cpu_s": round(per_cpu, 1),
        "engines_at_50_steps_per_s_per_core": round(per_cpu / TARGET_STEPS_PER_S, 1),
        "goal_engines_at_50_steps_per_s_per_core": 8,
        "with_nats": nats_url is not None,
    }


def _offline(trace: Path, engines: int, profile: str, limit: int | None) -> dict[str, Any]:
    rows = []
    with trace.open() as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            rows.append(json.loads(line))
    requests = [OfflineRequest.from_trace_row(row, i) for i, row in enumerate(rows)]

    def least_loaded(req: OfflineRequest, views: list[EngineView], fleet: OfflineFleet) -> int:
        return min(range(len(views)), key=lambda i: (views[i].running + views[i].waiting, i))

    fleet = OfflineFleet(engines, profile)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    done = fleet.run(requests, least_loaded)  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    ttfts = sorted(d.ttft_s for d in done)
    prompt = sum(d.prompt_tokens for d in done)
    return {
        "trace": trace.name,
        "requests": len(done),
        "engines": engines,
        "profile": profile,
        "policy": "least-loaded (running + waiting)",
        "simulated_s": round(fleet.now_s, 1),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "speed_x_real_time": round(fleet.now_s / wall, 1),
        "speed_x_per_cpu_s": round(fleet.now_s / cpu, 1) if cpu else None,
        "goal_speed_x": 60,
        "ttft_mean_s": round(statistics.mean(ttfts), 3),
        "ttft_p50_s": round(ttfts[len(ttfts) // 2], 3),
        "ttft_p99_s": round(ttfts[int(0.99 * (len(ttfts) - 1))], 3),
        "prefix_hit_rate": round(sum(d.cached_tokens for d in done) / prompt, 4) if prompt else 0,
        "preemptions": sum(d.preemptions for d in done),
    }


@click.command(name="sim")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the only output format).")
@click.option("--engines", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--duration", "duration_s", default=5.0, show_default=True, type=float)
@click.option("--batch", default=32, show_default=True, help="Running requests per engine.")
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default=DEFAULT_PROFILE)
@click.option(
    "--trace",
    type=click.Path(path_type=Path),
    default=DEFAULT_TRACE,
    show_default=True,
    help="Mooncake-format trace for the offline replay.",
)
@click.option("--limit", type=int, default=None, help="Replay only the first N requests.")
@click.option("--nats", "nats_url", default=None, help="Publish real-time snapshots here.")
@click.option("--skip-real-time", is_flag=True)
@click.option("--skip-offline", is_flag=True)
def sim(
    as_json: bool,
    engines: int,
    duration_s: float,
    batch: int,
    profile: str,
    trace: Path,
    limit: int | None,
    nats_url: str | None,
    skip_real_time: bool,
    skip_offline: bool,
) -> None:
    """Simulator speed: real-time steps/s per core and offline trace replay speed."""
    if nats_url:
        nats_from_env({}, url=nats_url)  # validate early
    out: dict[str, Any] = {"benchmark": "sim"}
    if not skip_real_time:
        out["real_time"] = asyncio.run(_real_time(engines, duration_s, batch, profile, nats_url))
    if not skip_offline:
        if not trace.is_file():
            out["offline"] = {"error": f"trace not found: {trace}"}
        else:
            out["offline"] = _offline(trace, engines, profile, limit)
    click.echo(json.dumps(out, indent=2))
