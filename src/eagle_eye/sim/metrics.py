"""``/metrics`` for a simulated engine, with vLLM's (or SGLang's) names, labels and buckets.

Names, labels and buckets follow ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``)
and ``sglang/srt/metrics/collector.py``; the facts are recorded in ANCHORS.md. Label
children are bound once at start, as vLLM does, so the per-step path only calls
``inc``/``observe``. Each engine owns a private ``CollectorRegistry``.

Each flavour's series are tables of ``_Series`` specs (``_VLLM_*``, ``_SGLANG``) read by
one function, ``_register``; a spec's ``key`` is how the observing code finds its child.
Registration order is exposition order, so the tables list series as the engines do.

The simulated accelerator gauge ``DCGM_FI_DEV_GPU_UTIL`` (percent of the last scrape
interval the engine spent stepping) carries ``simulated="true"`` so nobody mistakes it
for a real DCGM series.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from eagle_eye.sim.cost_model import CostProfile
from eagle_eye.sim.engine import EngineCore
from eagle_eye.sim.step import StepResult

TTFT_BUCKETS_S: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS_S: Final = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
SGLANG_TTFT_BUCKETS_S: Final = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
)  # fmt: skip
SGLANG_ITL_BUCKETS_S: Final = (
    0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
    0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0,
)  # fmt: skip
SGLANG_E2E_BUCKETS_S: Final = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800,
)  # fmt: skip


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, 20, 50, ... up to ``max_value``."""
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


class _Kind(Enum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


_Buckets = Sequence[float] | Callable[[CostProfile], Sequence[float]]


@dataclass(frozen=True, slots=True)
class _Series:
    """One metric family with the engine's standard labels."""

    key: str
    """How ``EngineMetrics`` finds the bound child (``gauge("running")``)."""
    kind: _Kind
    name: str
    doc: str
    buckets: _Buckets = ()
    """Histograms only: fixed buckets, or a function of the engine's profile."""


def _length_buckets(profile: CostProfile) -> list[int]:
    return build_1_2_5_buckets(profile.max_model_len)


def _iteration_buckets(profile: CostProfile) -> list[int]:
    limit = max(profile.max_num_batched_tokens, 1)
    return [
        b for b in (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384) if b <= limit
    ]


_G, _C, _H = _Kind.GAUGE, _Kind.COUNTER, _Kind.HISTOGRAM

_VLLM_GAUGES: Final = (
    _Series("running", _G, "vllm:num_requests_running",
            "Number of requests in model execution batches."),
    _Series("waiting", _G, "vllm:num_requests_waiting",
            "Number of requests waiting to be processed."),
    _Series("kv_usage", _G, "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage."),
)  # fmt: skip
_VLLM_COUNTERS: Final = (
    _Series("prompt_tokens", _C, "vllm:prompt_tokens", "Number of prefill tokens processed."),
    _Series("generation_tokens", _C, "vllm:generation_tokens",
            "Number of generation tokens processed."),
    _Series("prefix_queries", _C, "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens."),
    _Series("prefix_hits", _C, "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens."),
    _Series("preemptions", _C, "vllm:num_preemptions",
            "Cumulative number of preemption from the engine."),
)  # fmt: skip
_VLLM_HISTOGRAMS: Final = (
    _Series("ttft", _H, "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.", TTFT_BUCKETS_S),
    _Series("itl", _H, "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.", ITL_BUCKETS_S),
    _Series("tpot", _H, "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS_S),
    _Series("e2e", _H, "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS_S),
    _Series("queue", _H, "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.", REQUEST_LATENCY_BUCKETS_S),
    _Series("prefill", _H, "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.", REQUEST_LATENCY_BUCKETS_S),
    _Series("decode", _H, "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.", REQUEST_LATENCY_BUCKETS_S),
    _Series("inference", _H, "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.", REQUEST_LATENCY_BUCKETS_S),
    _Series("req_prompt", _H, "vllm:request_prompt_tokens",
            "Number of prefill tokens processed.", _length_buckets),
    _Series("req_gen", _H, "vllm:request_generation_tokens",
            "Number of generation tokens processed.", _length_buckets),
    _Series("req_max_tokens", _H, "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.", _length_buckets),
    _Series("iteration_tokens", _H, "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.", _iteration_buckets),
)  # fmt: skip
_VLLM_FINISHED: Final = (
    ("e2e", "e2e_latency"),
    ("queue", "queued_time"),
    ("prefill", "prefill_time"),
    ("decode", "decode_time"),
    ("inference", "inference_time"),
    ("req_prompt", "num_prompt_tokens"),
    ("req_gen", "num_generation_tokens"),
)
"""(histogram key, ``FinishedRequestStats`` field) observed once per finished request."""
_VLLM_REASONS: Final = ("stop", "length", "abort")

# prometheus_client appends ``_total`` to counters: these export as sglang:*_total.
_SGLANG: Final = (
    _Series("running", _G, "sglang:num_running_reqs", "The number of running requests."),
    _Series("waiting", _G, "sglang:num_queue_reqs", "The number of requests in the waiting queue."),
    _Series("kv_usage", _G, "sglang:token_usage", "The token usage."),
    _Series("cache_hit_rate", _G, "sglang:cache_hit_rate", "The prefix cache hit rate."),
    _Series("gen_throughput", _G, "sglang:gen_throughput", "The generation throughput (token/s)."),
    _Series("utilization", _G, "sglang:utilization", "The utilization."),
    _Series("max_total_num_tokens", _G, "sglang:max_total_num_tokens",
            "Maximum total number of tokens in the KV pool."),
    _Series("ttft", _H, "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.", SGLANG_TTFT_BUCKETS_S),
    _Series("itl", _H, "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.", SGLANG_ITL_BUCKETS_S),
    _Series("e2e", _H, "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds", SGLANG_E2E_BUCKETS_S),
    _Series("queue", _H, "sglang:queue_time_seconds",
            "Histogram of queueing time in seconds.", SGLANG_E2E_BUCKETS_S),
    _Series("prompt_tokens", _C, "sglang:prompt_tokens", "Number of prefill tokens processed."),
    _Series("generation_tokens", _C, "sglang:generation_tokens",
            "Number of generation tokens processed."),
    _Series("num_requests", _C, "sglang:num_requests", "Number of requests processed."),
)  # fmt: skip


@dataclass(slots=True)
class _Children:
    """The label children of one engine's series, bound once, by ``_Series.key``."""

    gauges: dict[str, Gauge] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)


def _register(
    into: _Children,
    registry: CollectorRegistry,
    specs: Sequence[_Series],
    labels: dict[str, str],
    profile: CostProfile,
) -> None:
    """Register ``specs`` in order and bind each family's child for ``labels``."""
    names, values = list(labels), list(labels.values())
    for spec in specs:
        if spec.kind is _Kind.GAUGE:
            gauge = Gauge(
                spec.name, spec.doc, names, registry=registry, multiprocess_mode="mostrecent"
            )
            into.gauges[spec.key] = gauge.labels(*values)
        elif spec.kind is _Kind.COUNTER:
            counter = Counter(spec.name, spec.doc, names, registry=registry)
            into.counters[spec.key] = counter.labels(*values)
        else:
            buckets = spec.buckets(profile) if callable(spec.buckets) else spec.buckets
            histogram = Histogram(spec.name, spec.doc, names, buckets=buckets, registry=registry)
            into.histograms[spec.key] = histogram.labels(*values)


class EngineMetrics:
    """The Prometheus series of one simulated engine."""

    def __init__(
        self, *, flavor: str, model: str, engine_index: int, core: EngineCore, gpu_uuid: str
    ) -> None:
        self.flavor = flavor
        self.core = core
        self.registry = CollectorRegistry()
        self._last_scrape_mono = time.monotonic()
        self._last_busy_s = 0.0
        self._last_sim_s = 0.0
        gpu = Gauge(
            "DCGM_FI_DEV_GPU_UTIL",
            "Simulated GPU utilisation (%) of this engine: share of time spent stepping.",
            ["gpu", "UUID", "modelName", "Hostname", "simulated"],
            registry=self.registry,
        )
        self._gpu = gpu.labels("0", gpu_uuid, "Simulated GPU", "eagle-eye-sim", "true")
        self._children = _Children()
        self._success: dict[str, Counter] = {}
        if flavor == "sglang":
            self._build_sglang(model)
        else:
            self._build_vllm(model, engine_index)

    # -- vLLM ----------------------------------------------------------------------------

    def _build_vllm(self, model: str, engine_index: int) -> None:
        r, p = self.registry, self.core.profile
        labels = {"model_name": model, "engine": str(engine_index)}
        _register(self._children, r, _VLLM_GAUGES, labels, p)
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            ["block_size", "num_gpu_blocks", "enable_prefix_caching", "engine"],
            registry=r,
        )
        info.labels(
            str(p.block_size),
            str(p.num_gpu_blocks),
            str(self.core.kv.enable_prefix_caching),
            str(engine_index),
        ).set(1)
        _register(self._children, r, _VLLM_COUNTERS, labels, p)
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*labels, "finished_reason"],
            registry=r,
        )
        self._success = {
            reason: success.labels(*labels.values(), reason) for reason in _VLLM_REASONS
        }
        _register(self._children, r, _VLLM_HISTOGRAMS, labels, p)

    def _observe_vllm(self, result: StepResult) -> None:
        sched, it = result.scheduler_stats, result.iteration_stats
        if sched is None or it is None:
            return
        c, h = self._children.counters, self._children.histograms
        c["prompt_tokens"].inc(it.num_prompt_tokens)
        c["generation_tokens"].inc(it.num_generation_tokens)
        pcs = sched.prefix_cache_stats
        c["prefix_queries"].inc(pcs.queries)
        c["prefix_hits"].inc(pcs.hits)
        c["preemptions"].inc(it.num_preempted_reqs)
        h["iteration_tokens"].observe(it.num_scheduled_tokens)
        for v in it.time_to_first_tokens_iter:
            h["ttft"].observe(v)
        for v in it.inter_token_latencies_iter:
            h["itl"].observe(v)
        for f in it.finished_requests:
            self._success[f.finish_reason].inc()
            for key, stat in _VLLM_FINISHED:
                h[key].observe(getattr(f, stat))
            if f.max_tokens_param is not None:
                h["req_max_tokens"].observe(f.max_tokens_param)
            if f.num_generation_tokens > 1:
                h["tpot"].observe(f.mean_time_per_output_token)

    # -- SGLang --------------------------------------------------------------------------

    def _build_sglang(self, model: str) -> None:
        labels = {"model_name": model, "tp_rank": "0", "dp_rank": "0"}
        _register(self._children, self.registry, _SGLANG, labels, self.core.profile)
        self._children.gauges["max_total_num_tokens"].set(self.core.profile.kv_capacity_tokens)

    def _observe_sglang(self, result: StepResult) -> None:
        it = result.iteration_stats
        if it is None:
            return
        c, h = self._children.counters, self._children.histograms
        c["prompt_tokens"].inc(it.num_prompt_tokens)
        c["generation_tokens"].inc(it.num_generation_tokens)
        for v in it.time_to_first_tokens_iter:
            h["ttft"].observe(v)
        for v in it.inter_token_latencies_iter:
            h["itl"].observe(v)
        for f in it.finished_requests:
            c["num_requests"].inc()
            h["e2e"].observe(f.e2e_latency)
            h["queue"].observe(f.queued_time)

    # -- shared --------------------------------------------------------------------------

    def observe_step(self, result: StepResult) -> None:
        """Fold one completed step into the counters and histograms."""
        if self.flavor == "sglang":
            self._observe_sglang(result)
        else:
            self._observe_vllm(result)

    def render(self, *, gen_throughput: float = 0.0) -> bytes:
        """Refresh the gauges from the engine and return the exposition text."""
        core = self.core
        g = self._children.gauges
        g["running"].set(len(core.running))
        g["waiting"].set(len(core.waiting))
        g["kv_usage"].set(core.kv.usage)
        busy = core.counters.busy_s
        sim_now = max(core.now_s, self._last_sim_s)
        span = sim_now - self._last_sim_s
        util = 100.0 * (busy - self._last_busy_s) / span if span > 0 else 0.0
        util = min(100.0, max(0.0, util))
        self._gpu.set(util if core.has_work or span > 0 else 0.0)
        self._last_busy_s, self._last_sim_s = busy, sim_now
        if self.flavor == "sglang":
            c = core.counters
            g["cache_hit_rate"].set(c.prefix_hits / c.prefix_queries if c.prefix_queries else 0.0)
            g["gen_throughput"].set(gen_throughput)
            g["utilization"].set(util / 100.0)
        return generate_latest(self.registry)
