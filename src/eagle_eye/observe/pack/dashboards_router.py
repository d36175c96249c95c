"""The router dashboard: traffic, client-side latency, routing decisions, freshness.

The p99 latency queries fetch exemplars: the router attaches the trace id of sampled
requests to its latency histograms, so a dot on those graphs opens the request's trace
(router span, engine span, queue/prefill/decode; docs/tracing.md).

The router labels upstream engines ``instance``; Prometheus renames that to
``exported_instance`` because ``instance`` is the scrape target's own label.
"""

# ruff: noqa: E501  -- a PromQL query reads (and greps) best on one line.

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.grafana import Dashboard, Panel, Row, Variable, q

RATE: Final = "$__rate_interval"
_ROUTER_MODEL = 'gen_ai_request_model=~"$model"'
ROUTER: Final = Dashboard(
    uid="eagle-eye-router",
    title="Eagle Eye / Router",
    description=(
        "The routing gateway as clients see it: request rate, status codes, client-side "
        "latency, routing decisions, upstream errors and the freshness of routing metrics."
    ),
    variables=(
        Variable("namespace", "namespace", "eagle_eye_router_requests_total"),
        Variable(
            "model",
            "gen_ai_request_model",
            "eagle_eye_router_requests_total",
            (("namespace", "namespace"),),
        ),
        Variable(
            "instance",
            "instance",
            "eagle_eye_router_requests_total",
            (("namespace", "namespace"),),
        ),
    ),
    rows=(
        Row(
            "Requests",
            (
                Panel(
                    "Requests by status",
                    "Client requests per second by HTTP status code.",
                    (
                        q(
                            f'sum by (code) (rate(eagle_eye_router_requests_total{{{_ROUTER_MODEL}, instance=~"$instance"}}[{RATE}]))',
                            "{{code}}",
                        ),
                    ),
                    unit="reqps",
                ),
                Panel(
                    "Requests per upstream",
                    "Where the router sends traffic (the engine's URL).",
                    (
                        q(
                            f'sum by (exported_instance) (rate(eagle_eye_router_requests_total{{{_ROUTER_MODEL}, instance=~"$instance"}}[{RATE}]))',
                            "{{exported_instance}}",
                        ),
                    ),
                    unit="reqps",
                ),
                Panel(
                    "Error ratio",
                    "Share of requests answered 5xx, per model.",
                    (
                        q(
                            'eagle_eye:request_errors:ratio_rate5m{source="router", model_name=~"$model"}',
                            "{{model_name}}",
                        ),
                    ),
                    unit="percentunit",
                ),
                Panel(
                    "Client-side TTFT",
                    "Time to first token through the router, p50/p99.",
                    tuple(
                        q(
                            f'histogram_quantile({x}, sum by (le) (rate(gen_ai_server_time_to_first_token_seconds_bucket{{{_ROUTER_MODEL}, instance=~"$instance"}}[{RATE}])))',
                            f"p{round(x * 100)}",
                            exemplar=x == 0.99,  # a slow request links to its trace
                        )
                        for x in (0.5, 0.99)
                    ),
                    unit="s",
                ),
                Panel(
                    "Client-side time per output token",
                    "Decode speed through the router, p50/p99.",
                    tuple(
                        q(
                            f'histogram_quantile({x}, sum by (le) (rate(gen_ai_server_time_per_output_token_seconds_bucket{{{_ROUTER_MODEL}, instance=~"$instance"}}[{RATE}])))',
                            f"p{round(x * 100)}",
                            exemplar=x == 0.99,  # a slow request links to its trace
                        )
                        for x in (0.5, 0.99)
                    ),
                    unit="s",
                ),
                Panel(
                    "Request duration",
                    "Time to the last byte, p50/p99.",
                    tuple(
                        q(
                            f'histogram_quantile({x}, sum by (le) (rate(gen_ai_server_request_duration_seconds_bucket{{{_ROUTER_MODEL}, instance=~"$instance"}}[{RATE}])))',
                            f"p{round(x * 100)}",
                            exemplar=x == 0.99,  # a slow request links to its trace
                        )
                        for x in (0.5, 0.99)
                    ),
                    unit="s",
                ),
            ),
        ),
        Row(
            "Routing",
            (
                Panel(
                    "Decisions per upstream",
                    "Routing decisions per second by policy and chosen engine: is load spread?",
                    (
                        q(
                            f'sum by (policy, exported_instance) (rate(eagle_eye_router_decisions_total{{instance=~"$instance"}}[{RATE}]))',
                            "{{policy}} → {{exported_instance}}",
                        ),
                    ),
                    unit="reqps",
                ),
                Panel(
                    "In-flight per upstream",
                    "Requests the router has open to each engine.",
                    (
                        q(
                            'eagle_eye_router_inflight_requests{instance=~"$instance"}',
                            "{{exported_instance}}",
                        ),
                    ),
                ),
                Panel(
                    "Upstream failures and retries",
                    "Failed upstream attempts by kind, and retries on another engine.",
                    (
                        q(
                            f'sum by (kind) (rate(eagle_eye_router_upstream_errors_total{{instance=~"$instance"}}[{RATE}]))',
                            "{{kind}}",
                        ),
                        q(
                            f'sum(rate(eagle_eye_router_retries_total{{instance=~"$instance"}}[{RATE}]))',
                            "retries",
                        ),
                    ),
                    unit="reqps",
                ),
                Panel(
                    "Routing-metrics age",
                    "Age of the newest snapshot per engine as the router sees it (seconds).",
                    (
                        q(
                            'max by (instance_id) (eagle_eye_router_snapshot_age_seconds{instance=~"$instance"})',
                            "{{instance_id}}",
                        ),
                    ),
                    unit="s",
                ),
                Panel(
                    "Fleet by state",
                    "Routing targets by lifecycle state and passive health.",
                    (
                        q(
                            'sum by (state, health) (eagle_eye_router_fleet_instances{instance=~"$instance"})',
                            "{{state}}/{{health}}",
                        ),
                    ),
                ),
                Panel(
                    "Snapshots received",
                    "Snapshots per second from NATS by outcome (malformed and out-of-order are dropped).",
                    (
                        q(
                            f'sum by (outcome) (rate(eagle_eye_router_snapshots_total{{instance=~"$instance"}}[{RATE}]))',
                            "{{outcome}}",
                        ),
                    ),
                ),
            ),
        ),
        Row(
            "Exporter (NATS to Prometheus)",
            (
                Panel(
                    "Snapshot age per instance",
                    "Seconds since the exporter received each engine rank's snapshot.",
                    (
                        q(
                            'eagle_eye_snapshot_age_seconds{model_name=~"$model"}',
                            "{{instance_id}}/{{dp_rank}}",
                        ),
                    ),
                    unit="s",
                ),
                Panel(
                    "Instances by state",
                    "Engine ranks per lifecycle state as published on NATS.",
                    (
                        q(
                            'sum by (state) (eagle_eye_instance_state{model_name=~"$model"})',
                            "{{state}}",
                        ),
                    ),
                ),
                Panel(
                    "Snapshots ingested",
                    "Snapshots per second the exporter accepted.",
                    (q(f"sum(rate(eagle_eye_exporter_snapshots_total[{RATE}]))", "snapshots/s"),),
                ),
            ),
        ),
    ),
)
