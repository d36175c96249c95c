"""Full-link traces on the paths that are not the happy one: retries, errors, gRPC export,
a router that does not trace, many requests at once. Real pieces as in test_tracing.py."""

from __future__ import annotations

import asyncio

import aiohttp
from route_helpers import MODEL, running_router, wait_for_fleet
from tracing_helpers import (
    flushed_spans,
    named,
    receiver,
    stream_chat,
    traced_fleet,
    traceparent,
)

from eagle_eye.commands.tracing import TracingSettings, trace_router, tracer_provider
from eagle_eye.route.tracing import EVENT_DECISION, EVENT_RETRY, EVENT_UPSTREAM_ERROR
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from support import free_tcp_port
from support.otlp import OtlpReceiver, by_name, one

__all__ = ["receiver"]  # the fixture, shared from tracing_helpers


async def test_retries_and_upstream_errors_are_events_on_the_request_span(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    dead = f"http://127.0.0.1:{free_tcp_port()}"
    provider = tracer_provider(TracingSettings(endpoint=receiver.traces_url))
    try:
        async with (
            SimFleet(SimFleetConfig(engines=1)) as fleet,
            running_router(
                backends=(dead, fleet.urls[0]), policy="round_robin", failures_to_eject=10
            ) as router,
        ):
            trace_router(router, provider)
            async with aiohttp.ClientSession() as session:
                for _ in range(2):  # round robin: exactly one of two starts on `dead`
                    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 2}
                    async with session.post(router.url + "/v1/completions", json=body) as r:
                        assert r.status == 200
            spans = await flushed_spans(
                receiver,
                [provider],
                lambda got: len(by_name(got, f"text_completion {MODEL}")) == 2,
            )
    finally:
        provider.shutdown()
    spans = by_name(spans, f"text_completion {MODEL}")
    retried = [s for s in spans if s.events_named(EVENT_RETRY)]
    assert len(spans) == 2 and len(retried) == 1
    span = retried[0]
    names = [e.name for e in span.events]
    assert names == [EVENT_DECISION, EVENT_UPSTREAM_ERROR, EVENT_RETRY, EVENT_DECISION]
    error = span.event(EVENT_UPSTREAM_ERROR).attributes
    assert error["error.type"] == "connect" and error["eagle_eye.route.instance"] == dead
    decisions = span.events_named(EVENT_DECISION)
    assert [d.attributes["eagle_eye.route.attempt"] for d in decisions] == [0, 1]
    assert decisions[1].attributes["eagle_eye.route.instance"] == fleet.urls[0]
    assert decisions[0].attributes["eagle_eye.route.picker"] == "round_robin"
    assert span.attributes["eagle_eye.route.attempts"] == 2
    assert span.status == "UNSET"  # the client got its answer


async def test_router_errors_end_the_span_with_error_type(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    async with traced_fleet(nats_url, receiver, engines=1) as traced:
        async with aiohttp.ClientSession() as session:
            body = {"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}
            async with session.post(traced.router.url + "/v1/chat/completions", json=body) as r:
                assert r.status == 404
        spans = await traced.spans(named("chat no-such-model"))
    span = one(spans, "chat no-such-model")
    assert span.attributes["error.type"] == "model_not_found"
    assert span.attributes["http.response.status_code"] == 404
    assert span.status == "UNSET"  # a client's mistake is not a server error
    assert by_name(spans, "llm_request") == []


async def test_spans_travel_over_otlp_grpc_too(nats_url: str) -> None:
    with OtlpReceiver(grpc=True) as receiver:
        settings = TracingSettings(protocol="grpc", endpoint=receiver.grpc_url)
        header, trace_id, _ = traceparent()
        async with traced_fleet(nats_url, receiver, engines=1, router_settings=settings) as traced:
            async with aiohttp.ClientSession() as session:
                await stream_chat(session, traced.router, {"traceparent": header})
            spans = await traced.spans(named(f"chat {MODEL}", "llm_request"))
    assert {s.name for s in spans if s.trace_id == trace_id} >= {f"chat {MODEL}", "llm_request"}


async def test_with_tracing_off_the_router_passes_the_clients_trace_context_on(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    """A router that does not trace is transparent: the engine joins the client's span."""
    header, trace_id, client_span_id = traceparent()
    provider = tracer_provider(TracingSettings(endpoint=receiver.traces_url))
    try:
        async with (
            SimFleet(SimFleetConfig(engines=1, nats_url=nats_url), tracer=provider.get_tracer("t")),
            running_router(nats_url) as router,
        ):
            await wait_for_fleet(router, 1)
            async with aiohttp.ClientSession() as session:
                await stream_chat(
                    session, router, {"traceparent": header, "tracestate": "vendor=1"}
                )
            spans = await flushed_spans(receiver, [provider], named("llm_request"))
    finally:
        provider.shutdown()
    engine_span = one(spans, "llm_request")
    assert (engine_span.trace_id, engine_span.parent_span_id) == (trace_id, client_span_id)


async def test_many_concurrent_traced_requests_each_get_their_own_trace(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    async with traced_fleet(nats_url, receiver) as traced:
        async with aiohttp.ClientSession() as session:
            headers = [traceparent() for _ in range(12)]
            await asyncio.gather(
                *(stream_chat(session, traced.router, {"traceparent": h}) for h, _, _ in headers)
            )
        spans = await traced.spans(
            lambda got: (
                len(by_name(got, f"chat {MODEL}")) == 12 and len(by_name(got, "llm_request")) == 12
            )
        )
    routers = {s.trace_id: s for s in by_name(spans, f"chat {MODEL}")}
    assert set(routers) == {t for _, t, _ in headers}
    for engine_span in by_name(spans, "llm_request"):
        assert engine_span.parent_span_id == routers[engine_span.trace_id].span_id
