"""Traced router + simulated fleet for the tracing tests, and their small helpers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import pytest
from opentelemetry.sdk.trace import TracerProvider
from route_helpers import MODEL, running_router, wait_for_fleet

from eagle_eye.commands.tracing import TracingSettings, trace_router, tracer_provider
from eagle_eye.route.config import BACKEND_HEADER
from eagle_eye.route.gateway import Router
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from support import async_wait_for
from support.otlp import OtlpReceiver, ReceivedSpan, by_name

COST_TERMS = ("new_prefill", "pending_prefill", "queue", "running", "kv", "kv_full")


def traceparent() -> tuple[str, str, str]:
    """A client's sampled W3C traceparent: (header, trace id, span id)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


@dataclasses.dataclass
class Traced:
    router: Router
    fleet: SimFleet
    receiver: OtlpReceiver
    providers: list[TracerProvider]

    async def spans(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 10.0
    ) -> list[ReceivedSpan]:
        """The spans received once ``predicate`` holds, flushing the exporters (off the
        event loop, which must go on ending the spans) until it does."""
        return await flushed_spans(self.receiver, self.providers, predicate, timeout_s)


async def flushed_spans(
    receiver: OtlpReceiver,
    providers: list[TracerProvider],
    predicate: Callable[[list[ReceivedSpan]], bool],
    timeout_s: float = 10.0,
) -> list[ReceivedSpan]:
    async def holds() -> bool:
        for provider in providers:
            await asyncio.to_thread(provider.force_flush)
        return predicate(receiver.spans())

    assert await async_wait_for(holds, timeout_s), [(s.service, s.name) for s in receiver.spans()]
    return receiver.spans()


def named(*names: str) -> Callable[[list[ReceivedSpan]], bool]:
    """A predicate: at least one span of each name arrived."""
    return lambda spans: all(by_name(spans, n) for n in names)


@contextlib.asynccontextmanager
async def traced_fleet(
    nats_url: str,
    receiver: OtlpReceiver,
    *,
    engines: int = 2,
    router_settings: TracingSettings | None = None,
    sim_settings: TracingSettings | None = None,
    **router_overrides: Any,
) -> AsyncIterator[Traced]:
    router_settings = router_settings or TracingSettings(endpoint=receiver.traces_url)
    sim_settings = sim_settings or dataclasses.replace(
        router_settings, service_name="eagle-eye-sim"
    )
    router_provider = tracer_provider(router_settings)
    sim_provider = tracer_provider(sim_settings)
    try:
        async with (
            SimFleet(
                SimFleetConfig(engines=engines, nats_url=nats_url),
                tracer=sim_provider.get_tracer("eagle_eye.sim"),
            ) as fleet,
            running_router(nats_url, **router_overrides) as router,
        ):
            trace_router(router, router_provider)
            await wait_for_fleet(router, engines)
            yield Traced(router, fleet, receiver, [router_provider, sim_provider])
    finally:
        router_provider.shutdown()
        sim_provider.shutdown()


async def stream_chat(
    session: aiohttp.ClientSession, router: Router, headers: dict[str, str], max_tokens: int = 6
) -> tuple[str, dict[str, Any]]:
    """A streamed chat completion with usage; (serving backend, usage)."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hello AI"}],
        "max_tokens": max_tokens,
        "temperature": 0.5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    usage: dict[str, Any] = {}
    async with session.post(
        router.url + "/v1/chat/completions", json=body, headers=headers
    ) as resp:
        assert resp.status == 200
        backend = resp.headers[BACKEND_HEADER]
        async for line in resp.content:
            if line.startswith(b"data: {") and b'"usage": {' in line:
                usage = json.loads(line[6:])["usage"]
    return backend, usage
