"""Where each engine-agnostic signal comes from: a table of engine metric names.

Every inference engine names the same thing differently (``vllm:num_requests_waiting``,
``sglang:num_queue_reqs``, ``tgi_queue_size``...), and vLLM renamed several metrics in
2025-26 while older deployments still emit the old names. The recording rules turn this
table into one ``eagle_eye:*`` series per signal, labelled ``engine_kind``, so alerts and
dashboards never mention an engine-specific name.

Names inside one ``Source`` are tried in order and joined with PromQL ``or``: the first
(current) name wins when an engine emits both, so a vLLM release in the middle of a rename
is not counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

POD_LABELS: Final = ("namespace", "pod", "instance", "job", "model_name")
"""Labels every per-pod ``eagle_eye:*`` series keeps (besides ``engine_kind``).

``namespace``/``pod`` come from the PodMonitor, ``instance``/``job`` from the scrape and
``model_name`` from the engine (vLLM, SGLang, Ray vLLM); TGI and llama.cpp carry no model
label, so their series have none and still match ``model_name=~".*"``.
"""
MODEL_LABELS: Final = ("namespace", "model_name")
"""Labels of the per-model (fleet-level) series."""


class Kind(str, Enum):
    """How a signal is aggregated per pod."""

    GAUGE_SUM = "gauge_sum"
    """Counts (requests): summed over data-parallel ranks of one pod."""
    GAUGE_MAX = "gauge_max"
    """Ratios (KV usage): the fullest rank is what limits the pod."""
    COUNTER = "counter"
    """Monotonic counters: per-second rate over the window."""
    HISTOGRAM = "histogram"
    """Classic histograms: bucket rates kept per ``le`` for quantiles."""


@dataclass(frozen=True, slots=True)
class Source:
    """One engine's metric for a signal. ``names``: current name first, removed after."""

    engine_kind: str
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Signal:
    """An engine-agnostic quantity and the engine metrics that report it."""

    name: str
    """Base of the recorded series name, with its unit (``ttft_seconds``)."""
    kind: Kind
    help: str
    sources: tuple[Source, ...]


def _s(engine_kind: str, *names: str) -> Source:
    return Source(engine_kind, names)


SIGNALS: Final[tuple[Signal, ...]] = (
    Signal(
        "requests_running",
        Kind.GAUGE_SUM,
        "Requests being processed (in the running batch).",
        (
            _s("vllm", "vllm:num_requests_running"),
            _s("ray-vllm", "ray_vllm_num_requests_running"),
            _s("sglang", "sglang:num_running_reqs"),
            _s("tgi", "tgi_batch_current_size"),
            _s("llamacpp", "llamacpp:requests_processing"),
        ),
    ),
    Signal(
        "requests_waiting",
        Kind.GAUGE_SUM,
        "Requests queued, not yet scheduled.",
        (
            _s("vllm", "vllm:num_requests_waiting"),
            _s("ray-vllm", "ray_vllm_num_requests_waiting"),
            _s("sglang", "sglang:num_queue_reqs"),
            _s("tgi", "tgi_queue_size"),
            _s("llamacpp", "llamacpp:requests_deferred"),
        ),
    ),
    Signal(
        "kv_cache_usage",
        Kind.GAUGE_MAX,
        "Fraction 0-1 of the KV cache in use (TGI reports none).",
        (
            _s("vllm", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            _s("ray-vllm", "ray_vllm_kv_cache_usage_perc", "ray_vllm_gpu_cache_usage_perc"),
            _s("sglang", "sglang:token_usage"),
            _s("llamacpp", "llamacpp:kv_cache_usage_ratio"),
        ),
    ),
    Signal(
        "prompt_tokens",
        Kind.COUNTER,
        "Prompt (prefill) tokens per second.",
        (
            _s("vllm", "vllm:prompt_tokens_total"),
            _s("ray-vllm", "ray_vllm_prompt_tokens_total"),
            _s("sglang", "sglang:prompt_tokens_total"),
            _s("tgi", "tgi_request_input_length_sum"),
            _s("llamacpp", "llamacpp:prompt_tokens_total"),
        ),
    ),
    Signal(
        "generation_tokens",
        Kind.COUNTER,
        "Generated (decode) tokens per second.",
        (
            _s("vllm", "vllm:generation_tokens_total"),
            _s("ray-vllm", "ray_vllm_generation_tokens_total"),
            _s("sglang", "sglang:generation_tokens_total"),
            _s("tgi", "tgi_request_generated_tokens_sum"),
            _s("llamacpp", "llamacpp:tokens_predicted_total"),
        ),
    ),
    Signal(
        "requests_finished",
        Kind.COUNTER,
        "Requests completed per second (any finish reason).",
        (
            _s("vllm", "vllm:request_success_total"),
            _s("ray-vllm", "ray_vllm_request_success_total"),
            _s("sglang", "sglang:num_requests_total"),
            _s("tgi", "tgi_request_success"),
        ),
    ),
    Signal(
        "preemptions",
        Kind.COUNTER,
        "Requests preempted per second (KV cache ran out mid-generation).",
        (
            _s("vllm", "vllm:num_preemptions_total"),
            _s("ray-vllm", "ray_vllm_num_preemptions_total"),
        ),
    ),
    Signal(
        "prefix_cache_queries",
        Kind.COUNTER,
        "Prompt tokens looked up in the prefix cache per second.",
        (
            _s("vllm", "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
            _s(
                "ray-vllm",
                "ray_vllm_prefix_cache_queries_total",
                "ray_vllm_gpu_prefix_cache_queries_total",
            ),
        ),
    ),
    Signal(
        "prefix_cache_hits",
        Kind.COUNTER,
        "Prompt tokens found in the prefix cache per second.",
        (
            _s("vllm", "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
            _s(
                "ray-vllm",
                "ray_vllm_prefix_cache_hits_total",
                "ray_vllm_gpu_prefix_cache_hits_total",
            ),
        ),
    ),
    Signal(
        "ttft_seconds",
        Kind.HISTOGRAM,
        "Time to first token.",
        (
            _s("vllm", "vllm:time_to_first_token_seconds"),
            _s("ray-vllm", "ray_vllm_time_to_first_token_seconds"),
            _s("sglang", "sglang:time_to_first_token_seconds"),
        ),
    ),
    Signal(
        "itl_seconds",
        Kind.HISTOGRAM,
        "Inter-token latency (time between two output tokens of one request).",
        (
            _s("vllm", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
            _s(
                "ray-vllm",
                "ray_vllm_inter_token_latency_seconds",
                "ray_vllm_time_per_output_token_seconds",
            ),
            _s("sglang", "sglang:inter_token_latency_seconds"),
            _s("tgi", "tgi_request_mean_time_per_token_duration"),
        ),
    ),
    Signal(
        "e2e_seconds",
        Kind.HISTOGRAM,
        "End-to-end request latency inside the engine.",
        (
            _s("vllm", "vllm:e2e_request_latency_seconds"),
            _s("ray-vllm", "ray_vllm_e2e_request_latency_seconds"),
            _s("sglang", "sglang:e2e_request_latency_seconds"),
            _s("tgi", "tgi_request_duration"),
        ),
    ),
    Signal(
        "queue_seconds",
        Kind.HISTOGRAM,
        "Time a request waited before being scheduled.",
        (
            _s("vllm", "vllm:request_queue_time_seconds"),
            _s("ray-vllm", "ray_vllm_request_queue_time_seconds"),
            _s("sglang", "sglang:queue_time_seconds"),
            _s("tgi", "tgi_request_queue_duration"),
        ),
    ),
)

SIGNALS_BY_NAME: Final = {signal.name: signal for signal in SIGNALS}

HISTOGRAM_SIGNALS: Final = tuple(s for s in SIGNALS if s.kind is Kind.HISTOGRAM)

SGLANG_PREFIX_HIT_RATIO: Final = "sglang:cache_hit_rate"
"""SGLang reports its radix-cache hit ratio as a gauge, not as counters."""


def by(labels: tuple[str, ...], *extra: str) -> str:
    """A ``by (...)`` clause."""
    return f"by ({', '.join((*labels, *extra))})"


def union(names: tuple[str, ...], template: str = "{name}") -> str:
    """``template`` applied to each name, joined with ``or`` (first name wins)."""
    parts = [template.format(name=name) for name in names]
    return parts[0] if len(parts) == 1 else " or ".join(f"({p})" for p in parts)


def le_regex(bound_s: float) -> str:
    """A matcher for one bucket boundary however the client formatted it (1, 1.0, 1e0)."""
    text = repr(float(bound_s))
    if text.endswith(".0"):
        whole = text[:-2]
        return f"{whole}|{whole}\\\\.0"
    return text.replace(".", "\\\\.")
