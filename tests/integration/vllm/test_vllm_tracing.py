"""Real vLLM with its own tracing on: its ``llm_request`` span lands inside the router's trace.

vLLM (0.32) reads ``traceparent``/``tracestate`` from each request and, with
``--otlp-traces-endpoint``, records one SERVER span ``llm_request`` per finished request
whose parent is that context (``vllm/v1/engine/output_processor.py: do_tracing``). The
router passes its own span on in ``traceparent``, so the engine's span must be the
router span's child, in the client's trace. Both export over OTLP/HTTP to the test's
receiver (vLLM's default protocol is gRPC; ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``
switches it, as vLLM's ``get_span_exporter`` reads it).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from vllm_harness import SERVED_MODEL_NAME

from eagle_eye.commands.tracing import TracingSettings, trace_router, tracer_provider
from eagle_eye.route.config import RouterConfig
from eagle_eye.route.gateway import Router
from support.otlp import OtlpReceiver, ReceivedSpan, by_name

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

MAX_TOKENS = 8


def _spans_of(trace_id: str) -> Callable[[list[ReceivedSpan]], bool]:
    def ready(spans: list[ReceivedSpan]) -> bool:
        names = {s.name for s in spans if s.trace_id == trace_id}
        return {"llm_request", f"chat {SERVED_MODEL_NAME}"} <= names

    return ready


async def test_vllms_own_span_is_a_child_of_the_routers_span(vllm_server_factory: Any) -> None:
    with OtlpReceiver() as receiver:
        server = vllm_server_factory(
            name="traced",
            plugins=False,
            env={
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                "OTEL_SERVICE_NAME": "vllm",
                "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: export promptly
            },
            extra_args=["--otlp-traces-endpoint", receiver.traces_url],
        )
        provider = tracer_provider(TracingSettings(endpoint=receiver.traces_url))
        trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
        try:
            async with Router(RouterConfig(port=0, backends=(server.url,), rng_seed=0)) as router:
                trace_router(router, provider)
                body = {
                    "model": SERVED_MODEL_NAME,
                    "messages": [{"role": "user", "content": "Hello AI"}],
                    "max_tokens": MAX_TOKENS,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
                headers = {"traceparent": f"00-{trace_id}-{client_span}-01"}
                async with (
                    aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session,
                    session.post(
                        router.url + "/v1/chat/completions", json=body, headers=headers
                    ) as resp,
                ):
                    assert resp.status == 200
                    streamed = await resp.read()
                assert b"[DONE]" in streamed
            provider.force_flush()  # the router is closed: its span has ended
            spans = receiver.wait_for(_spans_of(trace_id), timeout_s=60)
        finally:
            provider.shutdown()
            server.stop()

    (router_span,) = by_name(spans, f"chat {SERVED_MODEL_NAME}")
    (engine_span,) = [s for s in by_name(spans, "llm_request") if s.trace_id == trace_id]
    assert router_span.parent_span_id == client_span
    assert router_span.service == "eagle-eye-router"
    assert engine_span.service == "vllm"
    assert engine_span.kind == "SERVER"
    assert engine_span.parent_span_id == router_span.span_id
    # The two sides agree on the request: vLLM's counts are the router's usage.
    e, r = engine_span.attributes, router_span.attributes
    assert e["gen_ai.usage.completion_tokens"] == r["gen_ai.usage.output_tokens"] == MAX_TOKENS
    assert e["gen_ai.usage.prompt_tokens"] == r["gen_ai.usage.input_tokens"]
    for phase in ("time_in_queue", "time_in_model_prefill", "time_in_model_decode"):
        assert e[f"gen_ai.latency.{phase}"] >= 0.0
    assert r["server.port"] == server.port
    assert engine_span.start_ns >= router_span.start_ns
