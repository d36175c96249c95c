"""``eagle-eye up`` with tracing: router and simulated engines report to one endpoint."""

from __future__ import annotations

import time

import aiohttp

from eagle_eye.commands.tracing import TracingSettings
from eagle_eye.commands.up import UpOptions, banner, start_all
from support import async_wait_for
from support.otlp import OtlpReceiver, one


async def test_up_sends_router_and_engine_spans_of_each_request_to_the_endpoint() -> None:
    with OtlpReceiver() as receiver:
        options = UpOptions(
            port=0,
            engines=2,
            tracing=TracingSettings(endpoint=receiver.traces_url),
            tracing_required=True,
        )
        async with start_all(options) as running:
            text = banner(running)
            fleet = running.router.fleet
            assert await async_wait_for(
                lambda: len(fleet.candidates(running.model, time.monotonic())) == 2, 10.0
            )
            body = {"model": running.model, "prompt": "Hello AI", "max_tokens": 4}
            async with (
                aiohttp.ClientSession() as session,
                session.post(running.router.url + "/v1/completions", json=body) as resp,
            ):
                assert resp.status == 200
        # start_all flushed both providers on the way out.
        spans = receiver.spans()
    assert f"traces               tracing to {receiver.traces_url}" in text
    router_span = one(spans, f"text_completion {running.model}")
    engine_span = one(spans, "llm_request")
    assert (router_span.service, engine_span.service) == ("eagle-eye-router", "eagle-eye-sim")
    assert engine_span.trace_id == router_span.trace_id
    assert engine_span.parent_span_id == router_span.span_id


async def test_up_without_tracing_says_so() -> None:
    async with start_all(UpOptions(port=0, engines=1)) as running:
        assert "traces               off" in banner(running)
