"""``eagle-eye up``: the whole thing on one machine in one command.

An embedded NATS server, a simulated fleet (default 4 engines, the last one at half
speed, so routing has something to do) publishing per-step snapshots, and the router in
front of them. ``--engine URL`` puts real engines behind the router instead (they are
routed by the router's own accounting, and by their snapshots if they publish to the
printed NATS URL). Ctrl-C (or SIGTERM) stops everything, in reverse order.

With tracing on (``--otlp-traces-endpoint`` or the ``OTEL_*`` variables, docs/tracing.md)
the router (service ``eagle-eye-router``) and the simulated engines (``eagle-eye-sim``)
send their spans to the same OTLP endpoint, one trace per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shlex
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import click

from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.commands.compose import mount_dashboard, run_loop
from eagle_eye.commands.tracing import (
    TracingFlags,
    TracingSettings,
    describe,
    provider_or_none,
    trace_router,
    tracing_options,
)
from eagle_eye.route.config import RouterConfig
from eagle_eye.route.gateway import Router
from eagle_eye.route.policies import POLICY_NAMES
from eagle_eye.settings import nats_from_env

DEFAULT_UP_PORT = 8080


@dataclass(frozen=True, slots=True, kw_only=True)
class UpOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_UP_PORT
    engines: int = 4
    engine_urls: tuple[str, ...] = ()
    policy: str = "cost"
    model: str = "sim-llama"
    speedup: float = 1.0
    slow_factor: float = 0.5
    """Speed of the last simulated engine relative to the others."""
    nats_url: str | None = None
    """Use this NATS instead of starting an embedded one."""
    extra_engine_env: dict[str, str] = field(default_factory=dict)
    tracing: TracingSettings | None = None
    """Send the router's and the simulated engines' spans here; None: no tracing."""
    tracing_required: bool = False
    """Fail (rather than warn) when the tracing packages are missing."""


@dataclass(slots=True)
class Running:
    """What ``start_all`` brought up (for printing and tests)."""

    router: Router
    nats_url: str
    engines: list[tuple[str, str, float]]
    """(instance id or "static", URL, speed factor)."""
    model: str
    tracing: str | None = None
    """Where traces go, for the banner; None: tracing off."""


def _tracing(options: UpOptions, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
    """(the router's TracerProvider, the simulated engines' Tracer), None when off; both
    providers are flushed last, after everything stopped."""
    if options.tracing is None:
        return None, None
    router_provider = provider_or_none(options.tracing, required=options.tracing_required)
    sim_settings = dataclasses.replace(options.tracing, service_name="eagle-eye-sim")
    sim_provider = provider_or_none(sim_settings, required=options.tracing_required)
    for provider in (router_provider, sim_provider):
        if provider is not None:
            stack.push_async_callback(asyncio.to_thread, provider.shutdown)
    sim_tracer = sim_provider.get_tracer("eagle_eye.sim") if sim_provider is not None else None
    return router_provider, sim_tracer


@contextlib.asynccontextmanager
async def start_all(options: UpOptions) -> AsyncIterator[Running]:
    """NATS, then engines, then the router; torn down in reverse order."""
    async with contextlib.AsyncExitStack() as stack:
        if options.nats_url:
            nats_url = options.nats_url
        else:
            embedded = await asyncio.to_thread(EmbeddedNats().start)
            stack.callback(embedded.close)
            nats_url = embedded.url
        router_provider, sim_tracer = _tracing(options, stack)
        engines: list[tuple[str, str, float]] = []
        model = options.model
        if options.engine_urls:
            engines = [("static", u.rstrip("/"), 1.0) for u in options.engine_urls]
        else:
            from eagle_eye.sim.fleet import SimFleet, SimFleetConfig

            n = options.engines
            factors = [1.0] * n
            if n > 1:
                factors[-1] = options.slow_factor
            fleet = SimFleet(
                SimFleetConfig(
                    engines=n,
                    host="127.0.0.1",
                    nats_url=nats_url,
                    speed_factors=factors,
                    model=model,
                    speedup=options.speedup,
                ),
                tracer=sim_tracer,
            )
            await stack.enter_async_context(fleet)
            engines = [
                (e.instance_id, e.url, f) for e, f in zip(fleet.engines, factors, strict=True)
            ]
        router = Router(
            RouterConfig(
                host=options.host,
                port=options.port,
                nats=nats_from_env({}, url=nats_url),
                backends=options.engine_urls,
                policy=options.policy,
            )
        )
        mount_dashboard(router)
        tracing = None
        if router_provider is not None and options.tracing is not None:
            trace_router(router, router_provider)
            tracing = describe(options.tracing)
        await router.start(nats_wait_s=3.0)
        stack.push_async_callback(router.close)
        yield Running(
            router=router, nats_url=nats_url, engines=engines, model=model, tracing=tracing
        )


def banner(running: Running) -> str:
    """The URLs and ready-to-paste examples printed once everything is up."""
    base = running.router.url
    models = sorted(running.router.fleet.models())
    model = running.model if running.model in models or not models else models[0]
    chat = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "Hello AI"}], "stream": True}
    )
    python = (
        "from openai import OpenAI\n"
        f"client = OpenAI(base_url='{base}/v1', api_key='none')\n"
        f"for chunk in client.chat.completions.create(model='{model}', stream=True,\n"
        "        messages=[{'role': 'user', 'content': 'Hello AI'}]):\n"
        "    print(chunk.choices[0].delta.content or '', end='', flush=True)"
    )
    lines = [
        "Eagle Eye is up.",
        "",
        f"  router (OpenAI API)  {base}/v1",
        f"  dashboard            {base}/dashboard/",
        f"  fleet (JSON)         {base}/fleet",
        f"  metrics              {base}/metrics",
        f"  NATS                 {running.nats_url}   (engines publish with EAGLE_EYE_NATS_URL)",
        f"  routing policy       {running.router.default_policy.name}",
        f"  traces               {running.tracing or 'off (--otlp-traces-endpoint URL)'}",
        "",
        "  engines:",
    ]
    for instance, url, factor in running.engines:
        speed = "" if factor == 1.0 else f"  (speed x{factor:g})"
        lines.append(f"    {instance:<10} {url}{speed}")
    lines += [
        "",
        "Try:",
        f"  curl -N {base}/v1/chat/completions -H 'Content-Type: application/json' \\",
        f"    -d {shlex.quote(chat)}",
        "",
        f'  curl -X POST {base}/generate -d \'{{"prompt": "Hello AI"}}\'',
        "",
        "  python - <<'EOF'",
        python,
        "EOF",
        "",
        "Ctrl-C stops everything.",
    ]
    return "\n".join(lines)


async def serve(options: UpOptions, echo: Callable[[str], None] = click.echo) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with start_all(options) as running:
        echo(banner(running))
        await stop.wait()
        echo("\nStopping: router, engines, NATS...")
    echo("Stopped.")


@click.command("up")
@click.option("--host", default="127.0.0.1", show_default=True, help="Router bind address.")
@click.option("--port", default=DEFAULT_UP_PORT, show_default=True, type=int, help="0 picks one.")
@click.option("--engines", default=4, show_default=True, type=click.IntRange(1, 256))
@click.option(
    "--engine",
    "engine_urls",
    multiple=True,
    help="Use this real engine (OpenAI-compatible base URL) instead of simulated ones.",
)
@click.option(
    "--policy", default="cost", show_default=True, type=click.Choice([*POLICY_NAMES, "default"])
)
@click.option("--model", default="sim-llama", show_default=True, help="Simulated model name.")
@click.option("--speedup", default=1.0, show_default=True, type=float)
@click.option("--nats", "nats_url", default=None, help="Use this NATS instead of an embedded one.")
@tracing_options
def up(
    host: str,
    port: int,
    engines: int,
    engine_urls: tuple[str, ...],
    policy: str,
    model: str,
    speedup: float,
    nats_url: str | None,
    tracing: TracingFlags,
) -> None:
    """Run NATS, a simulated fleet and the router in one go."""
    options = UpOptions(
        host=host,
        port=port,
        engines=engines,
        engine_urls=engine_urls,
        policy=policy,
        model=model,
        speedup=speedup,
        nats_url=nats_url,
        tracing=tracing.settings("eagle-eye-router"),
        tracing_required=tracing.otlp_traces_endpoint is not None,
    )
    run_loop(lambda: serve(options))
