"""``eagle-eye sim``: run N simulated engines on consecutive ports until Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import click

from eagle_eye.sim.cost_model import DEFAULT_PROFILE, PROFILES
from eagle_eye.sim.fleet import FLAVORS, SimFleet, SimFleetConfig


def _parse_factors(value: str | None, engines: int) -> list[float] | None:
    if not value:
        return None
    try:
        factors = [float(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: use numbers like 1,1,0.5") from None
    if len(factors) != engines:
        raise click.BadParameter(f"{len(factors)} factors given for {engines} engines")
    if any(not f > 0 for f in factors):
        raise click.BadParameter("factors must be positive")
    return factors


@click.command(name="sim")
@click.option("--engines", "-n", default=4, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--base-port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Engine i listens on BASE_PORT+i (0: kernel-chosen ports, printed at start).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--flavor",
    type=click.Choice(FLAVORS),
    default="vllm",
    show_default=True,
    help="Which engine to imitate: metric names, /v1/loads, /generate shape.",
)
@click.option(
    "--nats",
    "nats_url",
    envvar="EAGLE_EYE_NATS_URL",
    default=None,
    help="Publish per-step snapshots to this NATS URL (default: $EAGLE_EYE_NATS_URL).",
)
@click.option(
    "--speedup",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Run the clock S times faster; reported times stay in simulated seconds.",
)
@click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
    default=DEFAULT_PROFILE,
    show_default=True,
    help="Model-on-hardware cost profile (docs/simulator.md).",
)
@click.option(
    "--speed-factors",
    default=None,
    help="One speed multiplier per engine, e.g. 1,1,0.5 (0.5 = half as fast).",
)
@click.option("--model", default="sim-llama", show_default=True, help="Served model name.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of generated text.")
def sim(
    engines: int,
    base_port: int,
    host: str,
    flavor: str,
    nats_url: str | None,
    speedup: float,
    profile: str,
    speed_factors: str | None,
    model: str,
    seed: int,
) -> None:
    """Run simulated vLLM/SGLang engines: OpenAI API, /generate, /metrics, NATS snapshots.

    Each engine is a GPU-free model of vLLM's scheduler (continuous batching, chunked
    prefill, paged KV cache with prefix caching, preemption) timed by a calibrated cost
    model. Stop with Ctrl-C.
    """
    config = SimFleetConfig(
        engines=engines,
        host=host,
        base_port=base_port,
        flavor=flavor,
        nats_url=nats_url,
        speedup=speedup,
        profile=profile,
        speed_factors=_parse_factors(speed_factors, engines),
        model=model,
        seed=seed,
    )
    try:
        config.validate()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        asyncio.run(_serve(config))
    except OSError as exc:
        raise click.ClickException(f"could not start the engines: {exc}") from None


async def _serve(config: SimFleetConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with SimFleet(config) as fleet:
        for engine in fleet.engines:
            click.echo(f"{engine.instance_id}: {engine.url} ({config.flavor}, {config.profile})")
        if config.nats_url:
            click.echo(f"publishing snapshots to {config.nats_url}")
        click.echo("Ctrl-C to stop")
        await stop.wait()
        click.echo("stopping")
