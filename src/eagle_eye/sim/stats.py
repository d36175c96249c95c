"""Per-step statistics shaped like vLLM V1's ``SchedulerStats`` and ``IterationStats``.

Field names follow ``vllm/v1/metrics/stats.py`` so the real ``EagleEyeStatLogger.record``
(which reads them with ``getattr``) sees exactly what it sees inside vLLM. Times inside
are simulated seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle_eye.sim.request import SimRequest


@dataclass(slots=True)
class PrefixCacheStats:
    """Prefix-cache lookups since the previous step (vLLM ``PrefixCacheStats``)."""

    reset: bool = False
    requests: int = 0
    queries: int = 0
    """Prompt tokens looked up."""
    hits: int = 0
    """Prompt tokens found cached."""
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0


@dataclass(slots=True)
class SchedulerStats:
    """Scheduler state after a step (vLLM ``SchedulerStats``)."""

    num_running_reqs: int = 0
    num_waiting_reqs: int = 0
    num_skipped_waiting_reqs: int = 0
    step_counter: int = 0
    current_wave: int = 0
    kv_cache_usage: float = 0.0
    prefix_cache_stats: PrefixCacheStats = field(default_factory=PrefixCacheStats)
    spec_decoding_stats: None = None
    waiting_lora_adapters: dict[str, int] = field(default_factory=dict)
    running_lora_adapters: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class PromptTokenStats:
    """Prompt tokens of the requests that produced their first token this step."""

    computed: int = 0
    local_cache_hit: int = 0
    external_kv_transfer: int = 0
    cached_tokens: int = 0
    total: int = 0


@dataclass(slots=True)
class FinishedRequestStats:
    """One finished request (vLLM ``FinishedRequestStats``); times in seconds."""

    finish_reason: str
    e2e_latency: float = 0.0
    num_prompt_tokens: int = 0
    num_generation_tokens: int = 0
    max_tokens_param: int | None = None
    queued_time: float = 0.0
    prefill_time: float = 0.0
    inference_time: float = 0.0
    decode_time: float = 0.0
    mean_time_per_output_token: float = 0.0
    num_cached_tokens: int = 0


@dataclass(slots=True)
class IterationStats:
    """What one step produced (vLLM ``IterationStats``)."""

    iteration_timestamp: float = 0.0
    num_generation_tokens: int = 0
    num_prompt_tokens: int = 0
    prompt_token_stats: PromptTokenStats = field(default_factory=PromptTokenStats)
    num_preempted_reqs: int = 0
    finished_requests: list[FinishedRequestStats] = field(default_factory=list)
    max_num_generation_tokens_iter: list[int] = field(default_factory=list)
    n_params_iter: list[int] = field(default_factory=list)
    time_to_first_tokens_iter: list[float] = field(default_factory=list)
    inter_token_latencies_iter: list[float] = field(default_factory=list)
    waiting_lora_adapters: dict[str, int] = field(default_factory=dict)
    running_lora_adapters: dict[str, int] = field(default_factory=dict)
    num_scheduled_tokens: int = 0
    """Tokens in this step's batch (``vllm:iteration_tokens_total``)."""


def finished_request_stats(req: SimRequest) -> FinishedRequestStats:
    """What vLLM reports for a request that has just finished (``finish_s`` set)."""
    assert req.finish_s is not None and req.finish_reason is not None
    first_sched = req.first_scheduled_s if req.first_scheduled_s is not None else req.arrival_s
    first_tok = req.first_token_s if req.first_token_s is not None else req.finish_s
    decode = req.finish_s - first_tok
    return FinishedRequestStats(
        finish_reason=req.finish_reason.value,
        e2e_latency=req.finish_s - req.arrival_s,
        num_prompt_tokens=req.prompt_tokens,
        num_generation_tokens=req.output_tokens,
        max_tokens_param=req.max_tokens,
        queued_time=first_sched - req.arrival_s,
        prefill_time=first_tok - first_sched,
        inference_time=req.finish_s - first_sched,
        decode_time=decode,
        mean_time_per_output_token=decode / (req.output_tokens - 1)
        if req.output_tokens > 1
        else 0.0,
        num_cached_tokens=max(0, req.num_cached_tokens),
    )
