"""The fleet overview: every model and engine at a glance (normalised series only)."""

# ruff: noqa: E501  -- a PromQL query reads (and greps) best on one line.

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.grafana import Dashboard, Panel, Row, Variable, q

RATE: Final = "$__rate_interval"
FM: Final = 'namespace=~"$namespace", model_name=~"$model"'
FP: Final = 'namespace=~"$namespace", model_name=~"$model", instance=~"$instance"'

_NS = Variable("namespace", "namespace", "eagle_eye:requests_running")
_MODEL = Variable(
    "model", "model_name", "eagle_eye:requests_running", (("namespace", "namespace"),)
)
_INSTANCE = Variable(
    "instance",
    "instance",
    "eagle_eye:requests_running",
    (("namespace", "namespace"), ("model_name", "model")),
)

FLEET: Final = Dashboard(
    uid="eagle-eye-fleet",
    title="Eagle Eye / Fleet overview",
    description="Every model and engine at a glance: load, latency, throughput, SLOs.",
    variables=(_NS, _MODEL, _INSTANCE),
    rows=(
        Row(
            "Now",
            (
                Panel(
                    "Ready instances",
                    "Instances in state ready with a fresh snapshot, per model (exporter).",
                    (
                        q(
                            'sum by (model_name) (eagle_eye_model_ready_instances{model_name=~"$model"})',
                            "{{model_name}}",
                        ),
                    ),
                    kind="stat",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Running / waiting",
                    "Requests in batches and in queues across the selection.",
                    (
                        q(f"sum(eagle_eye:model_requests_running{{{FM}}})", "running"),
                        q(f"sum(eagle_eye:model_requests_waiting{{{FM}}})", "waiting"),
                    ),
                    kind="stat",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Generation throughput",
                    "Generated tokens per second across the selection.",
                    (q(f"sum(eagle_eye:model_generation_tokens:rate5m{{{FM}}})", "tokens/s"),),
                    kind="stat",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Fullest KV cache",
                    "The highest KV-cache usage of any pod: how close the fleet is to preempting.",
                    (q(f"max(eagle_eye:kv_cache_usage:ratio{{{FP}}})", "max"),),
                    unit="percentunit",
                    kind="stat",
                    width=6,
                    height=5,
                    max_value=1,
                ),
            ),
        ),
        Row(
            "Load",
            (
                Panel(
                    "Running requests per model",
                    "Is the load where we expect it?",
                    (q(f"eagle_eye:model_requests_running{{{FM}}}", "{{model_name}}"),),
                ),
                Panel(
                    "Waiting requests per model",
                    "Which models queue: a growing line needs replicas.",
                    (q(f"eagle_eye:model_requests_waiting{{{FM}}}", "{{model_name}}"),),
                ),
                Panel(
                    "KV-cache usage per pod",
                    "Which pods are about to run out of KV cache?",
                    (
                        q(
                            f"eagle_eye:kv_cache_usage:ratio{{{FP}}}",
                            "{{pod}}{{instance}} ({{engine_kind}})",
                        ),
                    ),
                    unit="percentunit",
                    max_value=1,
                ),
                Panel(
                    "Waiting requests per pod",
                    "Is the router balancing? Pods of one model should queue alike.",
                    (q(f"eagle_eye:requests_waiting{{{FP}}}", "{{pod}}{{instance}}"),),
                ),
                Panel(
                    "Token throughput per model",
                    "Prompt and generated tokens per second.",
                    (
                        q(f"eagle_eye:model_prompt_tokens:rate5m{{{FM}}}", "{{model_name}} prompt"),
                        q(
                            f"eagle_eye:model_generation_tokens:rate5m{{{FM}}}",
                            "{{model_name}} generation",
                        ),
                    ),
                ),
                Panel(
                    "Finished requests per model",
                    "Completed requests per second.",
                    (q(f"eagle_eye:model_requests_finished:rate5m{{{FM}}}", "{{model_name}}"),),
                    unit="reqps",
                ),
            ),
        ),
        Row(
            "Latency and SLOs",
            (
                Panel(
                    "TTFT per model",
                    "Time to first token p50/p99 (5 m).",
                    (
                        q(f"eagle_eye:model_ttft_seconds:p50_5m{{{FM}}}", "{{model_name}} p50"),
                        q(f"eagle_eye:model_ttft_seconds:p99_5m{{{FM}}}", "{{model_name}} p99"),
                    ),
                    unit="s",
                ),
                Panel(
                    "ITL per model",
                    "Inter-token latency p50/p99 (5 m).",
                    (
                        q(f"eagle_eye:model_itl_seconds:p50_5m{{{FM}}}", "{{model_name}} p50"),
                        q(f"eagle_eye:model_itl_seconds:p99_5m{{{FM}}}", "{{model_name}} p99"),
                    ),
                    unit="s",
                ),
                Panel(
                    "E2E latency per model",
                    "End-to-end latency inside the engines, p50/p99 (5 m).",
                    (
                        q(f"eagle_eye:model_e2e_seconds:p50_5m{{{FM}}}", "{{model_name}} p50"),
                        q(f"eagle_eye:model_e2e_seconds:p99_5m{{{FM}}}", "{{model_name}} p99"),
                    ),
                    unit="s",
                ),
                Panel(
                    "SLO error ratio (1 h)",
                    "Share of requests over the TTFT and ITL thresholds in the last hour.",
                    (
                        q(f"eagle_eye:ttft_slo_errors:ratio_rate1h{{{FM}}}", "{{model_name}} TTFT"),
                        q(f"eagle_eye:itl_slo_errors:ratio_rate1h{{{FM}}}", "{{model_name}} ITL"),
                    ),
                    unit="percentunit",
                ),
                Panel(
                    "Prefix-cache hit ratio per pod",
                    "How much prompt work the prefix cache saves.",
                    (q(f"eagle_eye:prefix_cache_hit:ratio_rate5m{{{FP}}}", "{{pod}}{{instance}}"),),
                    unit="percentunit",
                    max_value=1,
                ),
                Panel(
                    "Preemptions per pod",
                    "Requests preempted per second (KV cache exhausted).",
                    (q(f"eagle_eye:preemptions:rate5m{{{FP}}}", "{{pod}}{{instance}}"),),
                    unit="reqps",
                ),
            ),
        ),
    ),
)
