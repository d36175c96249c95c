"""Traces of the router's requests: one OpenTelemetry span per client request.

``TracingObserver`` is a ``DispatchObserver``: append it to ``Router.dispatcher.observers``
with a tracer from a ``TracerProvider`` the composition root configured
(``commands/tracing.py``). Only that root and this module import OpenTelemetry; a router
without tracing never imports it.

The span (kind SERVER) continues the client's trace when the request carries a W3C
``traceparent`` (propagators as configured, ``tracecontext,baggage`` by default), and the
router passes its own span on to the engine in ``traceparent``, so vLLM's ``llm_request``
span (and the simulator's engine spans) join the same trace as children of this one.
Sampling is the provider's (parent-based ratio): an unsampled request still propagates
its context, flagged unsampled, so the engine does not record it either.

Attributes follow the OpenTelemetry GenAI semantic conventions: the span is named
``{gen_ai.operation.name} {gen_ai.request.model}`` and carries the request model and
parameters, the response model, id and finish reasons, the token usage, the serving
engine as ``server.address``/``server.port``, and ``error.type`` on failure. Events mark
what happened in between (``EVENT_*``): each routing decision with the score terms that
decided it, each upstream failure and retry, the first token, the end of a stream.
Everything beyond the trace context is recorded for sampled requests only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from opentelemetry import propagate
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.util.types import AttributeValue

from eagle_eye.route.observers import DispatchObserver, Outcome, RequestContext

if TYPE_CHECKING:
    from eagle_eye.route.dispatch import Attempt

EVENT_DECISION: Final = "eagle_eye.route.decision"
EVENT_RETRY: Final = "eagle_eye.route.retry"
EVENT_UPSTREAM_ERROR: Final = "eagle_eye.upstream.error"
EVENT_FIRST_TOKEN: Final = "eagle_eye.first_token"
EVENT_STREAM_END: Final = "eagle_eye.stream.end"

OPERATION_NAMES: Final = {"chat": "chat", "completion": "text_completion"}
"""Router operation -> GenAI ``gen_ai.operation.name`` (``/generate`` is a text completion)."""
REQUEST_PARAMETERS: Final = (
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("max_completion_tokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("top_k", "gen_ai.request.top_k"),
    ("seed", "gen_ai.request.seed"),
    ("n", "gen_ai.request.choice.count"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
)
"""Body field -> GenAI attribute, for the numeric sampling parameters."""
CLIENT_SIDE_ERRORS: Final = frozenset({"client_disconnected", "CancelledError"})
"""Ends that are the client's doing: recorded in ``error.type``, not as span errors."""
_MAX_ADDRESSES: Final = 4096


class TracingObserver(DispatchObserver):
    """Records each client request as a span; see the module docstring."""

    def __init__(self, tracer: Tracer, *, propagator: TextMapPropagator | None = None) -> None:
        self.tracer = tracer
        self.propagator = propagator if propagator is not None else propagate.get_global_textmap()
        self._addresses: dict[str, tuple[str, int]] = {}
        """Engine URL -> (host, port), parsed once per engine."""

    # -- the request's life --------------------------------------------------------------

    def on_request(self, context: RequestContext) -> None:
        parent = self.propagator.extract(context.client_headers)
        operation = OPERATION_NAMES.get(context.operation, "text_completion")
        span = self.tracer.start_span(operation, context=parent, kind=SpanKind.SERVER)
        context.span = span
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier, context=set_span_in_context(span, parent))
        context.upstream_headers = carrier
        if not span.is_recording():
            return
        context.detail = True
        span_context = span.get_span_context()
        if span_context.trace_flags.sampled:
            context.exemplar = {
                "trace_id": format(span_context.trace_id, "032x"),
                "span_id": format(span_context.span_id, "016x"),
            }
        span.set_attributes(
            {
                "gen_ai.operation.name": operation,
                "http.request.method": "POST",
                "http.route": context.path,
            }
        )

    def on_request_end(self, context: RequestContext) -> None:
        span = context.span
        if span is None:
            return
        if context.detail:
            model = context.model
            if model:
                operation = OPERATION_NAMES.get(context.operation, "text_completion")
                span.update_name(f"{operation} {model}")
                span.set_attribute("gen_ai.request.model", model)
            if context.body is not None:
                span.set_attributes(request_parameters(context.body))
            if context.error_type is not None:  # the router answered an error itself
                _set_error(span, context.error_type, context.status)
        span.end()

    # -- routing -------------------------------------------------------------------------

    def on_dispatched(self, attempt: Attempt) -> None:
        context = attempt.context
        if context is not None and context.detail:
            context.span.add_event(EVENT_DECISION, decision_attributes(attempt))

    def on_retry(self, attempt: Attempt) -> None:
        context = attempt.context
        if context is not None and context.detail:
            context.span.add_event(EVENT_RETRY, {"eagle_eye.route.attempt": attempt.number})

    def on_upstream_error(self, attempt: Attempt, kind: str) -> None:
        context = attempt.context
        if context is not None and context.detail:
            context.span.add_event(
                EVENT_UPSTREAM_ERROR,
                {
                    "error.type": kind,
                    "eagle_eye.route.instance": attempt.target.url,
                    "eagle_eye.route.attempt": attempt.number,
                },
            )

    def on_first_token(self, attempt: Attempt) -> None:
        context = attempt.context
        if context is not None and context.detail:
            context.span.add_event(
                EVENT_FIRST_TOKEN, {"eagle_eye.route.instance": attempt.target.url}
            )

    def on_complete(self, attempt: Attempt, outcome: Outcome) -> None:
        context = attempt.context
        if context is None or not context.detail:
            return
        span = context.span
        span.set_attributes(self._outcome_attributes(attempt, outcome))
        if outcome.ttft_s is not None:
            end: dict[str, AttributeValue] = {
                "eagle_eye.stream.events": outcome.stream_events,
                "eagle_eye.ttft_s": outcome.ttft_s,
            }
            if outcome.tpot_s is not None:
                end["eagle_eye.tpot_s"] = outcome.tpot_s
            span.add_event(EVENT_STREAM_END, end)
        if outcome.error_type is not None:
            _set_error(span, outcome.error_type, outcome.status)

    def _outcome_attributes(self, attempt: Attempt, outcome: Outcome) -> dict[str, AttributeValue]:
        host, port = self._address(attempt.target.url)
        attrs: dict[str, AttributeValue] = {
            "server.address": host,
            "server.port": port,
            "http.response.status_code": outcome.status,
            "eagle_eye.route.policy": attempt.policy,
            "eagle_eye.route.instance": attempt.target.url,
            "eagle_eye.route.attempts": attempt.number + 1,
        }
        if attempt.target.engine != "unknown":
            attrs["gen_ai.provider.name"] = attempt.target.engine
        if outcome.response_model is not None:
            attrs["gen_ai.response.model"] = outcome.response_model
        if outcome.response_id is not None:
            attrs["gen_ai.response.id"] = outcome.response_id
        if outcome.finish_reasons:
            attrs["gen_ai.response.finish_reasons"] = list(outcome.finish_reasons)
        if outcome.input_tokens is not None:
            attrs["gen_ai.usage.input_tokens"] = outcome.input_tokens
        if outcome.output_tokens is not None:
            attrs["gen_ai.usage.output_tokens"] = outcome.output_tokens
        return attrs

    def _address(self, url: str) -> tuple[str, int]:
        found = self._addresses.get(url)
        if found is None:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found = (parts.hostname or "", port)
            if len(self._addresses) >= _MAX_ADDRESSES:  # engines come and go: stay bounded
                self._addresses.clear()
            self._addresses[url] = found
        return found


def decision_attributes(attempt: Attempt) -> dict[str, AttributeValue]:
    """The ``eagle_eye.route.decision`` event: what was chosen, among what, and why.

    ``score.<term>`` are the chosen engine's terms (weight x score: what each added to
    the total the picker minimised) and ``runner_up.score.<term>`` the next best engine's,
    so the terms that decided are the ones that differ; ``margin`` is how far behind the
    runner-up was. ``candidate.instances`` and ``candidate.scores`` list the candidates,
    lowest total first (at most ``explain.DEFAULT_ROWS``; ``partial`` when cut).
    """
    target = attempt.target
    attrs: dict[str, AttributeValue] = {
        "eagle_eye.route.policy": attempt.policy,
        "eagle_eye.route.attempt": attempt.number,
        "eagle_eye.route.instance": target.url,
        "eagle_eye.route.prefix_blocks": attempt.matched_blocks,
        "eagle_eye.route.prefill_tokens": attempt.prefill_tokens,
    }
    if target.ranks:
        attrs["eagle_eye.route.instance_id"] = min(instance for instance, _ in target.ranks)
    decision = attempt.decision
    if decision is None:
        return attrs
    attrs["eagle_eye.route.candidates"] = decision.candidates
    attrs["eagle_eye.route.picker"] = decision.picker
    chosen = decision.row(decision.chosen)
    if not decision.terms or chosen is None:
        return attrs
    rows = decision.rows
    attrs["eagle_eye.route.score"] = chosen.total
    for term, value in zip(decision.terms, chosen.terms, strict=True):
        attrs[f"eagle_eye.route.score.{term}"] = value
    attrs["eagle_eye.route.candidate.instances"] = [r.url for r in rows]
    attrs["eagle_eye.route.candidate.scores"] = [r.total for r in rows]
    attrs["eagle_eye.route.partial"] = decision.partial
    runner_up = next((r for r in rows if r.url != decision.chosen), None)
    if runner_up is not None:
        attrs["eagle_eye.route.runner_up"] = runner_up.url
        attrs["eagle_eye.route.margin"] = runner_up.total - chosen.total
        for term, value in zip(decision.terms, runner_up.terms, strict=True):
            attrs[f"eagle_eye.route.runner_up.score.{term}"] = value
    return attrs


def request_parameters(body: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """The GenAI ``gen_ai.request.*`` sampling parameters present in ``body``."""
    attrs: dict[str, AttributeValue] = {}
    for field, attribute in REQUEST_PARAMETERS:
        value = body.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attrs[attribute] = value
    stop = body.get("stop")
    if isinstance(stop, str):
        attrs["gen_ai.request.stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        attrs["gen_ai.request.stop_sequences"] = stop
    return attrs


def _set_error(span: Any, error_type: str, status: int | None) -> None:
    """``error.type`` always; the span's status is ERROR for failures on the server side
    (5xx, an engine that died, an unexpected exception), not for the client's own doing
    (4xx, a client that went away)."""
    span.set_attribute("error.type", error_type)
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    server_side = status is None or status >= 500 or error_type == "upstream_died"
    if server_side and error_type not in CLIENT_SIDE_ERRORS:
        span.set_status(Status(StatusCode.ERROR, error_type))
