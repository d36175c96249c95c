"""What happens to a request, fanned out to observers (metrics, dashboard, tracing, ...).

The dispatch core reports each event once, to a list of ``DispatchObserver``s, the way
vLLM fans its per-step stats out to its stat loggers: Prometheus (``RouterMetrics``), the
live dashboard's statistics (``StatsObserver``), traces (``tracing.TracingObserver``)
and, later, model-behaviour detectors are all observers; none of them is called from the
HTTP code directly. Every hook does nothing by default, so an observer implements only
what it needs. Hooks run on the event loop that serves requests: they must be fast and
must not raise.

Per-request state lives in a ``RequestContext`` the gateway makes for each client
request: ``on_request`` and ``on_request_end`` bracket its life, and every ``Attempt``
carries it (``attempt.context``; None in the offline benchmark, which has no clients).
An observer may ask for more through it: headers for the engine (``upstream_headers``,
e.g. ``traceparent``), an explained routing decision and a parsed answer (``detail``),
exemplar labels for the latency histograms (``exemplar``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eagle_eye.fleet.stats import RouterStatsRecorder

if TYPE_CHECKING:
    from eagle_eye.route.dispatch import Attempt


class RequestContext:
    """One client request from arrival to the end of its answer, as observers see it.

    The gateway fills in what it learns (model, body, the error it answered); observers
    fill in what they want from the rest of the router. Plain slots: making one costs
    well under a microsecond, and nothing here is read unless an observer set it.
    """

    __slots__ = (
        "body",
        "client_headers",
        "detail",
        "error_type",
        "exemplar",
        "model",
        "operation",
        "path",
        "span",
        "status",
        "upstream_headers",
    )

    def __init__(self, *, operation: str, path: str, client_headers: Mapping[str, str]) -> None:
        self.operation = operation
        """``chat``, ``completion`` or ``generate`` (as ``Outcome.operation``)."""
        self.path = path
        """The route the client called (``/v1/chat/completions``, ``/generate``, ...)."""
        self.client_headers = client_headers
        """The client's request headers (case-insensitive for aiohttp requests)."""
        self.model: str | None = None
        """The model the request resolved to; None until the body was parsed."""
        self.body: Mapping[str, Any] | None = None
        """The parsed request body (read-only), once known."""
        self.status: int | None = None
        """Set when the router answered with an error itself (``ApiError``, 500)."""
        self.error_type: str | None = None
        """The code or kind of that error (``model_not_found``, ``CancelledError``...)."""
        self.upstream_headers: dict[str, str] | None = None
        """Headers an observer wants sent to the engine with every attempt (trace
        context); None: the gateway passes the client's ``traceparent`` through as is."""
        self.detail = False
        """An observer records this request in detail (a sampled trace): the dispatch
        core then explains its pick (``Attempt.decision``) and the proxy reads the
        answer's model, id and finish reasons into the ``Outcome``. Costs microseconds,
        so only for sampled requests."""
        self.exemplar: dict[str, str] | None = None
        """Exemplar labels (``trace_id``, ``span_id``) for the latency histograms."""
        self.span: Any = None
        """The request's trace span, owned by the tracing observer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """A finished request as the client saw it (times on the router's monotonic clock)."""

    model: str
    operation: str
    """``chat``, ``completion`` or ``generate``."""
    instance: str
    """Endpoint URL of the engine that answered."""
    status: int
    error_type: str | None
    """None on success; the HTTP status or a kind such as ``upstream_died``."""
    duration_s: float
    ttft_s: float | None
    """Time to the first byte of a stream; None when not streamed."""
    tpot_s: float | None
    """Time per output token after the first; None unless more than one token streamed."""
    input_tokens: int | None
    output_tokens: int | None
    """From the engine's ``usage`` report, when it sent one."""
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] = ()
    """From the engine's answer; read only when ``RequestContext.detail`` is set."""
    stream_events: int = 0
    """SSE ``data:`` events relayed (0 when not streamed)."""


class DispatchObserver:
    """Base class of observers: every hook is a no-op."""

    def on_request(self, context: RequestContext) -> None:
        """A client request arrived (before validation)."""

    def on_api_error(self, kind: str) -> None:
        """The router answered the client with an error of ``kind`` (its code or type)."""

    def on_request_end(self, context: RequestContext) -> None:
        """The request is over, however it ended (answered, refused, failed, cancelled);
        called exactly once per ``on_request``, after every other hook."""

    def on_rejected(self, reason: str) -> None:
        """The router refused a request itself (no instance, a limit, bad auth, ...)."""

    def on_dispatched(self, attempt: Attempt) -> None:
        """``attempt.target`` was chosen and the request counted against it."""

    def on_retry(self, attempt: Attempt) -> None:
        """The request is being tried again (``attempt`` is the new try)."""

    def on_upstream_error(self, attempt: Attempt, kind: str) -> None:
        """The engine failed: ``connect``, ``status_5xx`` or ``midstream``."""

    def on_first_token(self, attempt: Attempt) -> None:
        """The first byte of the engine's answer arrived (prefill is done)."""

    def on_complete(self, attempt: Attempt, outcome: Outcome) -> None:
        """The client got its whole answer (or an error mid-stream)."""


class StatsObserver(DispatchObserver):
    """Feeds the dashboard's cumulative counters and latency histograms."""

    def __init__(self, recorder: RouterStatsRecorder) -> None:
        self.recorder = recorder

    def on_request(self, context: RequestContext) -> None:
        self.recorder.observe_request()

    def on_api_error(self, kind: str) -> None:
        self.recorder.observe_error(kind)

    def on_retry(self, attempt: Attempt) -> None:
        self.recorder.observe_retry()

    def on_upstream_error(self, attempt: Attempt, kind: str) -> None:
        self.recorder.observe_error(f"upstream_{kind}")

    def on_complete(self, attempt: Attempt, outcome: Outcome) -> None:
        r = self.recorder
        r.observe_duration(outcome.duration_s)
        if outcome.ttft_s is not None:
            r.observe_ttft(outcome.ttft_s)
        if outcome.tpot_s is not None:
            r.observe_tpot(outcome.tpot_s)
