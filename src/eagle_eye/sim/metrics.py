"""``/metrics`` for a simulated engine, with vLLM's (or SGLang's) names, labels and buckets.

Names, labels and buckets follow ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``)
and ``sglang/srt/metrics/collector.py``; the facts are recorded in ANCHORS.md. Label
children are bound once at start, as vLLM does, so the per-step path only calls
``inc``/``observe``. Each engine owns a private ``CollectorRegistry``.

The simulated accelerator gauge ``DCGM_FI_DEV_GPU_UTIL`` (percent of the last scrape
interval the engine spent stepping) carries ``simulated="true"`` so nobody mistakes it
for a real DCGM series.
"""

from __future__ import annotations

import time
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from eagle_eye.sim.engine import EngineCore, StepResult

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
        r = self.registry
        gpu = Gauge(
            "DCGM_FI_DEV_GPU_UTIL",
            "Simulated GPU utilisation (%) of this engine: share of time spent stepping.",
            ["gpu", "UUID", "modelName", "Hostname", "simulated"],
            registry=r,
        )
        self._gpu = gpu.labels("0", gpu_uuid, "Simulated GPU", "eagle-eye-sim", "true")
        if flavor == "sglang":
            self._build_sglang(model)
        else:
            self._build_vllm(model, engine_index)

    # -- vLLM ----------------------------------------------------------------------------

    def _build_vllm(self, model: str, engine_index: int) -> None:
        r, names, values = self.registry, ["model_name", "engine"], [model, str(engine_index)]
        p = self.core.profile

        def g(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, names, registry=r, multiprocess_mode="mostrecent")

        def c(name: str, doc: str) -> Counter:
            return Counter(name, doc, names, registry=r)

        def h(name: str, doc: str, buckets: tuple[float, ...] | list[int]) -> Histogram:
            return Histogram(name, doc, names, buckets=buckets, registry=r)

        self.running = g(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        ).labels(*values)
        self.waiting = g(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        ).labels(*values)
        self.kv_usage = g(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        ).labels(*values)
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
        self.prompt_tokens = c("vllm:prompt_tokens", "Number of prefill tokens processed.").labels(
            *values
        )
        self.generation_tokens = c(
            "vllm:generation_tokens", "Number of generation tokens processed."
        ).labels(*values)
        self.prefix_queries = c(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        ).labels(*values)
        self.prefix_hits = c(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        ).labels(*values)
        self.preemptions = c(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        ).labels(*values)
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*names, "finished_reason"],
            registry=r,
        )
        self.success = {
            reason: success.labels(*values, reason) for reason in ("stop", "length", "abort")
        }
        self.ttft = h(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS_S,
        ).labels(*values)
        self.itl = h(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS_S,
        ).labels(*values)
        self.tpot = h(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS_S,
        ).labels(*values)
        self.e2e = h(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS_S,
        ).labels(*values)
        self.queue = h(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        ).labels(*values)
        self.prefill = h(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        ).labels(*values)
        self.decode = h(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        ).labels(*values)
        self.inference = h(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        ).labels(*values)
        len_buckets = build_1_2_5_buckets(p.max_model_len)
        self.req_prompt = h(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", len_buckets
        ).labels(*values)
        self.req_gen = h(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", len_buckets
        ).labels(*values)
        self.req_max_tokens = h(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            len_buckets,
        ).labels(*values)
        iter_buckets = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
        self.iteration_tokens = h(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            [b for b in iter_buckets if b <= max(p.max_num_batched_tokens, 1)],
        ).labels(*values)

    def _observe_vllm(self, result: StepResult) -> None:
        sched, it = result.scheduler_stats, result.iteration_stats
        if sched is None or it is None:
            return
        self.prompt_tokens.inc(it.num_prompt_tokens)
        self.generation_tokens.inc(it.num_generation_tokens)
        pcs = sched.prefix_cache_stats
        self.prefix_queries.inc(pcs.queries)
        self.prefix_hits.inc(pcs.hits)
        self.preemptions.inc(it.num_preempted_reqs)
        self.iteration_tokens.observe(it.num_scheduled_tokens)
        for v in it.time_to_first_tokens_iter:
            self.ttft.observe(v)
        for v in it.inter_token_latencies_iter:
            self.itl.observe(v)
        for f in it.finished_requests:
            self.success[f.finish_reason].inc()
            self.e2e.observe(f.e2e_latency)
            self.queue.observe(f.queued_time)
            self.prefill.observe(f.prefill_time)
            self.decode.observe(f.decode_time)
            self.inference.observe(f.inference_time)
            self.req_prompt.observe(f.num_prompt_tokens)
            self.req_gen.observe(f.num_generation_tokens)
            if f.max_tokens_param is not None:
                self.req_max_tokens.observe(f.max_tokens_param)
            if f.num_generation_tokens > 1:
                self.tpot.observe(f.mean_time_per_output_token)

    # -- SGLang --------------------------------------------------------------------------

    def _build_sglang(self, model: str) -> None:
        r = self.registry
        names = ["model_name", "tp_rank", "dp_rank"]
        values = [model, "0", "0"]

        def g(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, names, registry=r, multiprocess_mode="mostrecent")

        def h(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, names, buckets=buckets, registry=r)

        def c(name: str, doc: str) -> Counter:
            return Counter(name, doc, names, registry=r)

        self.running = g("sglang:num_running_reqs", "The number of running requests.").labels(
            *values
        )
        self.waiting = g(
            "sglang:num_queue_reqs", "The number of requests in the waiting queue."
        ).labels(*values)
        self.kv_usage = g("sglang:token_usage", "The token usage.").labels(*values)
        self.cache_hit_rate = g("sglang:cache_hit_rate", "The prefix cache hit rate.").labels(
            *values
        )
        self.gen_throughput = g(
            "sglang:gen_throughput", "The generation throughput (token/s)."
        ).labels(*values)
        self.utilization = g("sglang:utilization", "The utilization.").labels(*values)
        g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV pool.").labels(
            *values
        ).set(self.core.profile.kv_capacity_tokens)
        self.ttft = h(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            SGLANG_TTFT_BUCKETS_S,
        ).labels(*values)
        self.itl = h(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            SGLANG_ITL_BUCKETS_S,
        ).labels(*values)
        self.e2e = h(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            SGLANG_E2E_BUCKETS_S,
        ).labels(*values)
        self.queue = h(
            "sglang:queue_time_seconds",
            "Histogram of queueing time in seconds.",
            SGLANG_E2E_BUCKETS_S,
        ).labels(*values)
        # prometheus_client appends ``_total`` itself: these export as sglang:*_total.
        self.prompt_tokens = c(
            "sglang:prompt_tokens", "Number of prefill tokens processed."
        ).labels(*values)
        self.generation_tokens = c(
            "sglang:generation_tokens", "Number of generation tokens processed."
        ).labels(*values)
        self.num_requests = c("sglang:num_requests", "Number of requests processed.").labels(
            *values
        )

    def _observe_sglang(self, result: StepResult) -> None:
        it = result.iteration_stats
        if it is None:
            return
        self.prompt_tokens.inc(it.num_prompt_tokens)
        self.generation_tokens.inc(it.num_generation_tokens)
        for v in it.time_to_first_tokens_iter:
            self.ttft.observe(v)
        for v in it.inter_token_latencies_iter:
            self.itl.observe(v)
        for f in it.finished_requests:
            self.num_requests.inc()
            self.e2e.observe(f.e2e_latency)
            self.queue.observe(f.queued_time)

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
        self.running.set(len(core.running))
        self.waiting.set(len(core.waiting))
        self.kv_usage.set(core.kv.usage)
        busy = core.counters.busy_s
        sim_now = max(core.now_s, self._last_sim_s)
        span = sim_now - self._last_sim_s
        util = 100.0 * (busy - self._last_busy_s) / span if span > 0 else 0.0
        util = min(100.0, max(0.0, util))
        self._gpu.set(util if core.has_work or span > 0 else 0.0)
        self._last_busy_s, self._last_sim_s = busy, sim_now
        if self.flavor == "sglang":
            c = core.counters
            self.cache_hit_rate.set(c.prefix_hits / c.prefix_queries if c.prefix_queries else 0.0)
            self.gen_throughput.set(gen_throughput)
            self.utilization.set(util / 100.0)
        return generate_latest(self.registry)
