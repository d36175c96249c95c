"""The "one engine" dashboard: everything vLLM reports, plus the engine-agnostic view.

Seed 004 lists vLLM's metrics (scheduler state, latency phases, token counts, request
parameters, speculative decoding, LoRA); each row here answers one question about them.
The first row uses the ``eagle_eye:`` series so an SGLang, TGI or llama.cpp instance shows
too; the rows below read vLLM's own names for detail only vLLM has.
"""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.grafana import Dashboard, Panel, Query, Row, Variable, q

F: Final = 'namespace=~"$namespace", model_name=~"$model", instance=~"$instance"'
RATE: Final = "$__rate_interval"

VARIABLES: Final = (
    Variable("namespace", "namespace", "eagle_eye:requests_running"),
    Variable("model", "model_name", "eagle_eye:requests_running", (("namespace", "namespace"),)),
    Variable(
        "instance",
        "instance",
        "eagle_eye:requests_running",
        (("namespace", "namespace"), ("model_name", "model")),
    ),
)


def quantiles(metric: str, qs: tuple[float, ...] = (0.5, 0.9, 0.99)) -> tuple[Query, ...]:
    """p50/p90/p99 of a vLLM histogram over the selected instances."""
    return tuple(
        q(
            f"histogram_quantile({x}, sum by (le) (rate({metric}_bucket{{{F}}}[{RATE}])))",
            f"p{round(x * 100)}",
        )
        for x in qs
    )


def _rate(metric: str, legend: str, by: str = "") -> Query:
    group = f" by ({by})" if by else ""
    return q(f"sum{group} (rate({metric}{{{F}}}[{RATE}]))", legend)


def _heatmap(title: str, description: str, metric: str, unit: str = "short") -> Panel:
    return Panel(
        title,
        description,
        (q(f"sum by (le) (rate({metric}_bucket{{{F}}}[{RATE}]))", "{{le}}"),),
        unit=unit,
        kind="heatmap",
    )


NORMALISED: Final = Row(
    "Any engine (normalised eagle_eye: series)",
    (
        Panel(
            "Queue state",
            "Running and waiting requests per instance, whatever the engine.",
            (
                q(f"eagle_eye:requests_running{{{F}}}", "{{instance}} running"),
                q(f"eagle_eye:requests_waiting{{{F}}}", "{{instance}} waiting"),
            ),
        ),
        Panel(
            "KV-cache usage",
            "Fraction of the KV cache in use (the fullest data-parallel rank).",
            (q(f"eagle_eye:kv_cache_usage:ratio{{{F}}}", "{{instance}} ({{engine_kind}})"),),
            unit="percentunit",
            max_value=1,
        ),
        Panel(
            "TTFT and ITL p99",
            "99th percentile time to first token and inter-token latency, 5 m windows.",
            (
                q(f"eagle_eye:ttft_seconds:p99_5m{{{F}}}", "{{instance}} TTFT"),
                q(f"eagle_eye:itl_seconds:p99_5m{{{F}}}", "{{instance}} ITL"),
            ),
            unit="s",
        ),
    ),
)

VLLM_SCHEDULER: Final = Row(
    "vLLM scheduler",
    (
        Panel(
            "Scheduler state",
            "vllm:num_requests_running / waiting: is the engine queueing?",
            (
                q(f"sum(vllm:num_requests_running{{{F}}})", "running"),
                q(f"sum(vllm:num_requests_waiting{{{F}}})", "waiting"),
            ),
        ),
        Panel(
            "KV-cache usage",
            "vllm:kv_cache_usage_perc (0-1) per engine rank.",
            (q(f"vllm:kv_cache_usage_perc{{{F}}}", "{{instance}} engine {{engine}}"),),
            unit="percentunit",
            max_value=1,
        ),
        Panel(
            "Preemptions",
            "Requests preempted per second: the KV cache ran out mid-generation.",
            (_rate("vllm:num_preemptions_total", "preemptions/s"),),
            unit="reqps",
        ),
        Panel(
            "Prefix-cache hit rate",
            "Share of prompt tokens served from the prefix cache.",
            (
                q(
                    f"sum(rate(vllm:prefix_cache_hits_total{{{F}}}[{RATE}])) / "
                    f"sum(rate(vllm:prefix_cache_queries_total{{{F}}}[{RATE}]))",
                    "hit rate",
                ),
            ),
            unit="percentunit",
            max_value=1,
        ),
        Panel(
            "Token throughput",
            "Prompt (prefill) and generation (decode) tokens per second.",
            (
                _rate("vllm:prompt_tokens_total", "prompt tokens/s"),
                _rate("vllm:generation_tokens_total", "generation tokens/s"),
            ),
        ),
        Panel(
            "Finish reasons",
            "Finished requests per second by reason (stop, length, abort).",
            (_rate("vllm:request_success_total", "{{finished_reason}}", "finished_reason"),),
            unit="reqps",
        ),
    ),
)

VLLM_LATENCY: Final = Row(
    "vLLM latency",
    (
        Panel(
            "Time to first token",
            "vllm:time_to_first_token_seconds quantiles.",
            quantiles("vllm:time_to_first_token_seconds"),
            unit="s",
        ),
        Panel(
            "Inter-token latency",
            "vllm:inter_token_latency_seconds quantiles.",
            quantiles("vllm:inter_token_latency_seconds"),
            unit="s",
        ),
        Panel(
            "Time per output token (per request)",
            "vllm:request_time_per_output_token_seconds: decode time / output tokens.",
            quantiles("vllm:request_time_per_output_token_seconds"),
            unit="s",
        ),
        Panel(
            "End-to-end latency",
            "vllm:e2e_request_latency_seconds quantiles.",
            quantiles("vllm:e2e_request_latency_seconds"),
            unit="s",
        ),
        Panel(
            "Request phases (p90)",
            "Where a request's time goes: queued, prefill, decode, total inference.",
            (
                *quantiles("vllm:request_queue_time_seconds", (0.9,)),
                *quantiles("vllm:request_prefill_time_seconds", (0.9,)),
                *quantiles("vllm:request_decode_time_seconds", (0.9,)),
                *quantiles("vllm:request_inference_time_seconds", (0.9,)),
            ),
            unit="s",
        ),
        Panel(
            "Request phases (mean)",
            "Mean queue, prefill, decode and inference time per finished request.",
            tuple(
                q(
                    f"sum(rate(vllm:request_{p}_time_seconds_sum{{{F}}}[{RATE}])) / "
                    f"sum(rate(vllm:request_{p}_time_seconds_count{{{F}}}[{RATE}]))",
                    p,
                )
                for p in ("queue", "prefill", "decode", "inference")
            ),
            unit="s",
        ),
    ),
)

VLLM_SHAPES: Final = Row(
    "vLLM request shapes",
    (
        _heatmap(
            "Prompt length",
            "Distribution of prompt tokens per request.",
            "vllm:request_prompt_tokens",
        ),
        _heatmap(
            "Generation length",
            "Distribution of generated tokens per request.",
            "vllm:request_generation_tokens",
        ),
        _heatmap(
            "Tokens per engine step",
            "vllm:iteration_tokens_total: how full each batch step is.",
            "vllm:iteration_tokens_total",
        ),
        _heatmap(
            "Request max_tokens",
            "vllm:request_params_max_tokens: what clients ask for.",
            "vllm:request_params_max_tokens",
        ),
        _heatmap(
            "Request n",
            "vllm:request_params_n: parallel samples per request.",
            "vllm:request_params_n",
        ),
        Panel(
            "Iteration tokens (p50/p99)",
            "Tokens scheduled per engine step.",
            quantiles("vllm:iteration_tokens_total", (0.5, 0.99)),
        ),
    ),
)

VLLM_FEATURES: Final = Row(
    "vLLM LoRA, speculative decoding, configuration",
    (
        Panel(
            "LoRA adapters running / waiting",
            "vllm:lora_requests_info: adapters with running and waiting requests.",
            (
                q(
                    "count by (running_lora_adapters, waiting_lora_adapters, max_lora) "
                    f"(vllm:lora_requests_info{{{F}}})",
                    "running={{running_lora_adapters}} waiting={{waiting_lora_adapters}}",
                    instant=True,
                ),
            ),
            kind="table",
        ),
        Panel(
            "Speculative decoding acceptance",
            "Accepted / proposed draft tokens; mean accepted length per draft.",
            (
                q(
                    f"sum(rate(vllm:spec_decode_num_accepted_tokens_total{{{F}}}[{RATE}])) / "
                    f"sum(rate(vllm:spec_decode_num_draft_tokens_total{{{F}}}[{RATE}]))",
                    "acceptance rate",
                ),
                q(
                    f"1 + sum(rate(vllm:spec_decode_num_accepted_tokens_total{{{F}}}[{RATE}])) / "
                    f"sum(rate(vllm:spec_decode_num_drafts_total{{{F}}}[{RATE}]))",
                    "mean accepted length",
                ),
            ),
        ),
        Panel(
            "Cache configuration",
            "vllm:cache_config_info: block size, GPU blocks, memory utilisation.",
            (
                q(
                    "max by (instance, block_size, num_gpu_blocks, gpu_memory_utilization) "
                    f"(vllm:cache_config_info{{{F}}})",
                    instant=True,
                ),
            ),
            kind="table",
        ),
    ),
)

ENGINE: Final = Dashboard(
    uid="eagle-eye-engine",
    title="Eagle Eye / Engine",
    description=(
        "One engine in depth: queue, KV cache, latency phases, request shapes, LoRA and "
        "speculative decoding. Pick the instance at the top."
    ),
    variables=VARIABLES,
    rows=(NORMALISED, VLLM_SCHEDULER, VLLM_LATENCY, VLLM_SHAPES, VLLM_FEATURES),
)
