"""Engine spans of a simulated engine, shaped like vLLM's, joined to the caller's trace.

vLLM (0.32, ``--otlp-traces-endpoint``) reads the W3C ``traceparent``/``tracestate``
headers of each request and, when the request finishes, records one SERVER span
``llm_request`` from its arrival with its latency breakdown as attributes
(``gen_ai.latency.time_in_queue``, ``..._time_in_model_prefill``, ``..._decode``, ...).
The simulator records the same span with the same attributes, from the request's
simulated timeline, plus three child spans a trace view draws as a waterfall:

* ``queued``: arrival to first scheduled (waiting for a batch slot or KV blocks);
* ``prefill``: first scheduled to first token (prompt computation, chunked or not);
* ``decode``: first token to last token.

Times in attributes are simulated seconds, as the engine reports everywhere; span
timestamps are wall-clock, the simulated timeline mapped back through the clock's
``speedup``, so at ``speedup`` 1 they line up with the router's span. Only the HTTP
server (``process.py``) uses this module: nothing changes in the scheduler, so traced and
untraced runs schedule identically.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from eagle_eye.sim.clock import SimClock
from eagle_eye.sim.request import FinishReason, SimRequest

SPAN_NAME: Final = "llm_request"
"""vLLM's span name."""
PHASES: Final = ("queued", "prefill", "decode")
_PROPAGATOR: Final = TraceContextTextMapPropagator()
"""vLLM extracts W3C trace context only (no baggage, no other formats)."""


class EngineTracer:
    """Starts nothing until a request finishes: then writes its spans in one go."""

    def __init__(self, tracer: Tracer, clock: SimClock, *, model: str, instance_id: str) -> None:
        self.tracer = tracer
        self.clock = clock
        self.model = model
        self.instance_id = instance_id

    def parent_of(self, headers: Mapping[str, str] | None) -> Context:
        """The context a request arrived with (empty: the span starts a new trace)."""
        if not headers:
            return Context()
        carrier = {k: headers[k] for k in ("traceparent", "tracestate") if k in headers}
        return _PROPAGATOR.extract(carrier) if carrier else Context()

    def record(self, req: SimRequest) -> None:
        """Write ``req``'s spans; call once, when it is finished (or aborted)."""
        parent = req.trace
        if not isinstance(parent, Context):
            return
        to_ns = self._wall_ns()
        span = self.tracer.start_span(
            SPAN_NAME,
            context=parent,
            kind=SpanKind.SERVER,
            start_time=to_ns(req.arrival_s),
            attributes=self.attributes(req),
        )
        if span.is_recording():
            inside = set_span_in_context(span, parent)
            bounds = (req.arrival_s, req.first_scheduled_s, req.first_token_s, req.last_token_s)
            for name, start_s, end_s in zip(PHASES, bounds[:-1], bounds[1:], strict=True):
                if start_s is not None and end_s is not None:
                    child = self.tracer.start_span(
                        name, context=inside, kind=SpanKind.INTERNAL, start_time=to_ns(start_s)
                    )
                    child.end(end_time=to_ns(end_s))
            if req.finish_reason is FinishReason.ABORT:
                span.set_status(Status(StatusCode.ERROR, "aborted"))
        end_s = req.finish_s if req.finish_s is not None else self.clock.now_s()
        span.end(end_time=to_ns(end_s))

    def attributes(self, req: SimRequest) -> dict[str, AttributeValue]:
        """vLLM's ``llm_request`` attributes (``vllm/v1/engine/output_processor.py``),
        plus what the simulator knows beyond them under ``eagle_eye.sim.*``."""
        attrs: dict[str, AttributeValue] = {
            "gen_ai.request.id": req.request_id,
            "gen_ai.usage.prompt_tokens": req.prompt_tokens,
            "gen_ai.usage.completion_tokens": req.output_tokens,
            "gen_ai.request.max_tokens": req.max_tokens,
            "gen_ai.response.model": self.model,
            "eagle_eye.sim.instance_id": self.instance_id,
            "eagle_eye.sim.preemptions": req.num_preemptions,
            "eagle_eye.sim.cached_prompt_tokens": max(0, req.num_cached_tokens),
        }
        if req.finish_reason is not None:
            attrs["gen_ai.response.finish_reasons"] = [req.finish_reason.value]
        latencies: dict[str, float | None] = {
            "gen_ai.latency.time_in_queue": _between(req.arrival_s, req.first_scheduled_s),
            "gen_ai.latency.time_to_first_token": req.ttft_s,
            "gen_ai.latency.time_in_model_prefill": _between(
                req.first_scheduled_s, req.first_token_s
            ),
            "gen_ai.latency.time_in_model_decode": _between(req.first_token_s, req.last_token_s),
            "gen_ai.latency.time_in_model_inference": _between(
                req.first_scheduled_s, req.last_token_s
            ),
            "gen_ai.latency.e2e": req.e2e_s,
        }
        attrs.update({k: v for k, v in latencies.items() if v is not None})
        return attrs

    def _wall_ns(self) -> Callable[[float], int]:
        """Simulated seconds -> wall-clock nanoseconds, anchored now."""
        now_ns, now_s, speedup = time.time_ns(), self.clock.now_s(), self.clock.speedup

        def to_ns(sim_s: float) -> int:
            return now_ns - int((now_s - sim_s) / speedup * 1e9)

        return to_ns


def _between(start_s: float | None, end_s: float | None) -> float | None:
    return None if start_s is None or end_s is None else end_s - start_s
