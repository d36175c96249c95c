"""The router's Prometheus metrics, on its own ``CollectorRegistry``.

Names follow the OpenTelemetry GenAI semantic conventions as the OpenTelemetry
Prometheus exporter would translate them (dots to underscores, unit suffix), so
dashboards built for OTel-instrumented gateways read them unchanged:

===============================================  =========================================
Prometheus name                                  OpenTelemetry instrument
===============================================  =========================================
gen_ai_server_time_to_first_token_seconds        gen_ai.server.time_to_first_token
gen_ai_server_time_per_output_token_seconds      gen_ai.server.time_per_output_token
gen_ai_server_request_duration_seconds           gen_ai.server.request.duration
gen_ai_client_token_usage                        gen_ai.client.token.usage
===============================================  =========================================

Labels ``gen_ai_request_model``, ``gen_ai_operation_name`` and ``gen_ai_token_type``
(input|output) are the OTel attributes; ``error_type`` is set on failed requests. Router
specifics live under ``eagle_eye_router_*``. Fleet gauges (snapshot age, fleet size by
state, in-flight) are computed at scrape time by a custom collector from the fleet view,
so the request path never touches them. Label children are cached so the hot path calls
``.labels()`` once per new label combination only.

Exemplars: when a trace sampled the request (``RequestContext.exemplar``, set by the
tracing observer), the duration, TTFT and TPOT observations carry its ``trace_id`` and
``span_id``; ``/metrics`` shows them in the OpenMetrics exposition (what Prometheus asks
for when it stores exemplars), so a Grafana panel links a slow bucket to its trace.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from eagle_eye.fleet.view import FleetView
from eagle_eye.route.observers import DispatchObserver, Outcome

if TYPE_CHECKING:
    from eagle_eye.route.dispatch import Attempt

# OTel GenAI recommended bucket boundaries.
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0
)  # fmt: skip
TPOT_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5
)  # fmt: skip
DURATION_BUCKETS_S = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92
)  # fmt: skip
TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216
)  # fmt: skip


class RouterMetrics(DispatchObserver):
    """All router metrics; ``registry`` is private to this router (never the global one).

    An observer of the dispatch core: the request path reaches it only through the
    ``on_*`` hooks below."""

    def __init__(self, fleet: FleetView, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "eagle_eye_router_requests",
            "Client requests by model, serving instance and HTTP status.",
            ["gen_ai_request_model", "gen_ai_operation_name", "instance", "code"],
            registry=r,
        )
        self.ttft = Histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "Time to first token as the client sees it (streaming requests).",
            ["gen_ai_request_model", "gen_ai_operation_name"],
            buckets=TTFT_BUCKETS_S,
            registry=r,
        )
        self.tpot = Histogram(
            "gen_ai_server_time_per_output_token_seconds",
            "Time per output token after the first, as the client sees it.",
            ["gen_ai_request_model", "gen_ai_operation_name"],
            buckets=TPOT_BUCKETS_S,
            registry=r,
        )
        self.duration = Histogram(
            "gen_ai_server_request_duration_seconds",
            "Request duration as the client sees it (to the last byte).",
            ["gen_ai_request_model", "gen_ai_operation_name", "error_type"],
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.tokens = Histogram(
            "gen_ai_client_token_usage",
            "Tokens per request from the engine's usage report.",
            ["gen_ai_request_model", "gen_ai_operation_name", "gen_ai_token_type"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.decisions = Counter(
            "eagle_eye_router_decisions",
            "Routing decisions by policy and chosen instance.",
            ["policy", "instance"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "eagle_eye_router_upstream_errors",
            "Failed upstream attempts: connect, status_5xx, midstream, timeout.",
            ["instance", "kind"],
            registry=r,
        )
        self.retries = Counter(
            "eagle_eye_router_retries", "Requests retried on another instance.", registry=r
        )
        self.rejected = Counter(
            "eagle_eye_router_rejected",
            "Requests answered by the router itself with an error (by reason).",
            ["reason"],
            registry=r,
        )
        r.register(_FleetCollector(fleet))
        self._children: dict[tuple[Any, ...], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """A cached label child (``.labels()`` costs microseconds on the hot path)."""
        key = (id(metric), *labels)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*labels)
        return c

    # -- DispatchObserver ----------------------------------------------------------------

    def on_rejected(self, reason: str) -> None:
        self.child(self.rejected, reason).inc()

    def on_dispatched(self, attempt: Attempt) -> None:
        self.child(self.decisions, attempt.policy, attempt.target.url).inc()

    def on_retry(self, attempt: Attempt) -> None:
        self.retries.inc()

    def on_upstream_error(self, attempt: Attempt, kind: str) -> None:
        self.child(self.upstream_errors, attempt.target.url, kind).inc()

    def on_complete(self, attempt: Attempt, outcome: Outcome) -> None:
        child, model, op = self.child, outcome.model, outcome.operation
        context = attempt.context
        exemplar = context.exemplar if context is not None else None
        child(self.requests, model, op, outcome.instance, str(outcome.status)).inc()
        child(self.duration, model, op, outcome.error_type or "").observe(
            outcome.duration_s, exemplar
        )
        if outcome.input_tokens is not None:
            child(self.tokens, model, op, "input").observe(outcome.input_tokens)
        if outcome.output_tokens is not None:
            child(self.tokens, model, op, "output").observe(outcome.output_tokens)
        if outcome.ttft_s is not None:
            child(self.ttft, model, op).observe(outcome.ttft_s, exemplar)
        if outcome.tpot_s is not None:
            child(self.tpot, model, op).observe(outcome.tpot_s, exemplar)


class _FleetCollector(Collector):
    """Fleet-wide gauges computed from the fleet view at scrape time."""

    def __init__(self, fleet: FleetView) -> None:
        self._fleet = fleet

    def collect(self) -> Iterator[Any]:
        now = time.monotonic()
        fleet = self._fleet
        age = GaugeMetricFamily(
            "eagle_eye_router_snapshot_age_seconds",
            "Age of the newest snapshot per instance rank.",
            labels=["instance_id", "dp_rank", "endpoint"],
        )
        for info in fleet.instances(now):
            age.add_metric(
                [info.snapshot.instance_id, str(info.snapshot.dp_rank), info.endpoint or ""],
                info.age_s,
            )
        yield age
        size = GaugeMetricFamily(
            "eagle_eye_router_fleet_instances",
            "Routing targets by lifecycle state and passive health.",
            labels=["state", "health"],
        )
        counts: dict[tuple[str, str], int] = {}
        inflight = GaugeMetricFamily(
            "eagle_eye_router_inflight_requests",
            "Requests in flight through this router per instance.",
            labels=["instance"],
        )
        for t in fleet.targets():
            key = (t.state.value, t.health.value)
            counts[key] = counts.get(key, 0) + 1
            inflight.add_metric([t.url], t.inflight)
        for (state, health), n in sorted(counts.items()):
            size.add_metric([state, health], n)
        yield size
        yield inflight
        snaps = CounterMetricFamily(
            "eagle_eye_router_snapshots",
            "Snapshots received from NATS, by outcome.",
            labels=["outcome"],
        )
        snaps.add_metric(["accepted"], fleet.ingested)
        snaps.add_metric(["malformed"], fleet.malformed)
        snaps.add_metric(["out_of_order"], fleet.out_of_order)
        yield snaps
