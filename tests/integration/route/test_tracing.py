"""Full-link traces: client -> router -> simulated engine, received over real OTLP.

Real pieces throughout: nats-server, simulated engines on HTTP, the router on HTTP, the
OpenTelemetry SDK exporting over OTLP/HTTP (and gRPC) to ``support.otlp.OtlpReceiver``,
which decodes the protobuf the way a collector does. Each test flushes the providers
(``shutdown``) before it reads what arrived, so nothing waits on a timer.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest
from route_helpers import MODEL
from tracing_helpers import (
    COST_TERMS,
    named,
    receiver,
    stream_chat,
    traced_fleet,
    traceparent,
)

from eagle_eye.commands.tracing import TracingSettings
from eagle_eye.route.tracing import EVENT_DECISION, EVENT_FIRST_TOKEN, EVENT_STREAM_END
from eagle_eye.sim.fleet import SimFleet
from support.otlp import OtlpReceiver, ReceivedSpan, by_name, one

__all__ = ["receiver"]  # the fixture, shared from tracing_helpers


async def test_router_and_engine_spans_form_one_trace_under_the_clients_span(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    header, trace_id, client_span_id = traceparent()
    async with traced_fleet(nats_url, receiver) as traced:
        async with aiohttp.ClientSession() as session:
            backend, usage = await stream_chat(session, traced.router, {"traceparent": header})
        spans = await traced.spans(named(f"chat {MODEL}", "llm_request", "decode"))

    router_span = one(spans, f"chat {MODEL}")
    assert router_span.service == "eagle-eye-router"
    assert router_span.kind == "SERVER"
    assert router_span.trace_id == trace_id
    assert router_span.parent_span_id == client_span_id
    attrs = router_span.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.response.model"] == MODEL
    assert attrs["gen_ai.request.max_tokens"] == 6
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == usage["completion_tokens"] == 6
    assert attrs["gen_ai.response.finish_reasons"] == ["length"]
    assert attrs["gen_ai.response.id"].startswith("chatcmpl")
    host, port = re.fullmatch(r"http://([\d.]+):(\d+)", backend).groups()  # type: ignore[union-attr]
    assert (attrs["server.address"], attrs["server.port"]) == (host, int(port))
    assert attrs["http.response.status_code"] == 200
    assert "error.type" not in attrs and router_span.status == "UNSET"

    decision = router_span.event(EVENT_DECISION).attributes
    assert decision["eagle_eye.route.policy"] == "cost"
    assert decision["eagle_eye.route.candidates"] == 2
    assert decision["eagle_eye.route.instance"] == backend
    assert sorted(decision["eagle_eye.route.candidate.instances"]) == sorted(traced.fleet.urls)
    other = next(u for u in traced.fleet.urls if u != backend)
    assert decision["eagle_eye.route.runner_up"] == other
    for who in ("score", "runner_up.score"):
        terms = [decision[f"eagle_eye.route.{who}.{t}"] for t in COST_TERMS]
        total = decision["eagle_eye.route.score"] + (
            decision["eagle_eye.route.margin"] if who != "score" else 0.0
        )
        assert sum(terms) == pytest.approx(total)
    assert decision["eagle_eye.route.margin"] >= 0
    assert decision["eagle_eye.route.candidate.scores"] == sorted(
        decision["eagle_eye.route.candidate.scores"]
    )
    assert decision["eagle_eye.route.candidate.instances"][0] == backend
    names = [e.name for e in router_span.events]
    assert names == [EVENT_DECISION, EVENT_FIRST_TOKEN, EVENT_STREAM_END]
    assert router_span.event(EVENT_STREAM_END).attributes["eagle_eye.ttft_s"] > 0

    check_engine_side(spans, router_span, traced.fleet, backend, usage)


def check_engine_side(
    spans: list[ReceivedSpan],
    router_span: ReceivedSpan,
    fleet: SimFleet,
    backend: str,
    usage: dict[str, Any],
) -> None:
    """The engine's ``llm_request`` is the router span's child, its phases its children."""
    trace_id = router_span.trace_id
    engine_span = one(spans, "llm_request")
    assert engine_span.service == "eagle-eye-sim"
    assert engine_span.kind == "SERVER"
    assert engine_span.trace_id == trace_id
    assert engine_span.parent_span_id == router_span.span_id
    served_by = {e.url: e.instance_id for e in fleet.engines}[backend]
    e_attrs = engine_span.attributes
    assert e_attrs["eagle_eye.sim.instance_id"] == served_by
    assert e_attrs["gen_ai.usage.completion_tokens"] == 6
    assert e_attrs["gen_ai.usage.prompt_tokens"] == usage["prompt_tokens"]
    assert router_span.start_ns <= engine_span.start_ns <= engine_span.end_ns <= router_span.end_ns

    phases = {name: one(spans, name) for name in ("queued", "prefill", "decode")}
    for name, attribute in (
        ("queued", "gen_ai.latency.time_in_queue"),
        ("prefill", "gen_ai.latency.time_in_model_prefill"),
        ("decode", "gen_ai.latency.time_in_model_decode"),
    ):
        phase = phases[name]
        assert phase.parent_span_id == engine_span.span_id and phase.trace_id == trace_id
        assert (phase.end_ns - phase.start_ns) / 1e9 == pytest.approx(e_attrs[attribute], abs=1e-6)
    assert phases["queued"].start_ns == engine_span.start_ns
    assert phases["queued"].end_ns == phases["prefill"].start_ns
    assert phases["prefill"].end_ns == phases["decode"].start_ns


async def test_a_request_without_traceparent_starts_a_trace_at_the_router(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    async with traced_fleet(nats_url, receiver, engines=1) as traced:
        async with aiohttp.ClientSession() as session:
            body = {"model": MODEL, "prompt": "Hi", "max_tokens": 3}
            async with session.post(traced.router.url + "/v1/completions", json=body) as resp:
                assert resp.status == 200
            async with session.post(traced.router.url + "/generate", json={"prompt": "Hi"}) as r:
                assert r.status == 200
        spans = await traced.spans(
            lambda got: (
                len(by_name(got, f"text_completion {MODEL}")) == 2
                and len(by_name(got, "llm_request")) == 2
            )
        )
    routers = by_name(spans, f"text_completion {MODEL}")
    engines = by_name(spans, "llm_request")
    assert len(routers) == 2 and len(engines) == 2
    assert {s.attributes["http.route"] for s in routers} == {"/v1/completions", "/generate"}
    for router_span in routers:
        assert router_span.parent_span_id == ""
        assert router_span.attributes["gen_ai.response.finish_reasons"] == ["length"]
        assert "eagle_eye.stream.end" not in [e.name for e in router_span.events]
        (child,) = [e for e in engines if e.parent_span_id == router_span.span_id]
        assert child.trace_id == router_span.trace_id


async def test_unsampled_requests_propagate_the_decision_and_record_nothing(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    settings = TracingSettings(endpoint=receiver.traces_url, sample_ratio=0.0)
    async with (
        traced_fleet(
            nats_url,
            receiver,
            router_settings=settings,
            # The engines alone would record every request: only the router's
            # unsampled traceparent can stop them.
            sim_settings=TracingSettings(endpoint=receiver.traces_url, sample_ratio=1.0),
        ) as traced,
        aiohttp.ClientSession() as session,
    ):
        await stream_chat(session, traced.router, {})  # a new trace: ratio 0 drops it
        sampled_out, _, _ = traceparent()
        await stream_chat(session, traced.router, {"traceparent": sampled_out[:-2] + "00"})
        async with session.get(
            traced.router.url + "/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        ) as resp:
            metrics = await resp.text()
    # Everything stopped and the providers flushed: the engines (parent-based) followed.
    assert receiver.spans() == []
    assert 'trace_id="' not in metrics
    assert "gen_ai_server_request_duration_seconds_count" in metrics


async def test_a_client_that_sampled_wins_over_the_ratio(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    settings = TracingSettings(endpoint=receiver.traces_url, sample_ratio=0.0)
    header, trace_id, _ = traceparent()
    async with traced_fleet(nats_url, receiver, engines=1, router_settings=settings) as traced:
        async with aiohttp.ClientSession() as session:
            await stream_chat(session, traced.router, {"traceparent": header})
        spans = await traced.spans(named(f"chat {MODEL}", "llm_request"))
    assert {(s.service, s.trace_id) for s in spans if s.kind == "SERVER"} == {
        ("eagle-eye-router", trace_id),
        ("eagle-eye-sim", trace_id),
    }


async def test_latency_histograms_carry_the_trace_as_an_exemplar(
    nats_url: str, receiver: OtlpReceiver
) -> None:
    header, trace_id, _ = traceparent()
    async with traced_fleet(nats_url, receiver, engines=1) as traced:
        async with aiohttp.ClientSession() as session:
            await stream_chat(session, traced.router, {"traceparent": header})
            openmetrics = "application/openmetrics-text; version=1.0.0"
            async with session.get(
                traced.router.url + "/metrics", headers={"Accept": openmetrics}
            ) as resp:
                assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
                exposition = await resp.text()
            async with session.get(traced.router.url + "/metrics") as resp:
                plain = await resp.text()
        router_span = one(await traced.spans(named(f"chat {MODEL}")), f"chat {MODEL}")
    exemplar = f'# {{span_id="{router_span.span_id}",trace_id="{trace_id}"}}'
    for family in (
        "gen_ai_server_request_duration_seconds_bucket",
        "gen_ai_server_time_to_first_token_seconds_bucket",
        "gen_ai_server_time_per_output_token_seconds_bucket",
    ):
        lines = [ln for ln in exposition.splitlines() if ln.startswith(family)]
        assert any(exemplar in ln for ln in lines), (family, lines)
    assert trace_id not in plain  # the classic text format has no exemplars
