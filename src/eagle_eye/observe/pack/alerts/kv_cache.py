"""KV cache: an engine runs out of cache blocks and starts preempting running requests."""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.alerts.model import (
    VLLM_POD_OUT,
    Alert,
    Case,
    label,
    percent,
    vllm_series,
)

KV_CACHE_SATURATED_RATIO: Final = 0.9
"""KV-cache usage (0-1) above which an engine is saturated: vLLM and SGLang admit new
requests only while blocks are free, and past 90 % one long prompt is enough to stall the
queue or preempt a running request."""

KV_CACHE_SATURATED_FOR_MIN: Final = 10
"""Minutes the cache must stay that full: a busy engine touches 90 % in bursts; ten
minutes of it is a capacity problem, not a burst."""

PREEMPTIONS_PER_S_MAX: Final = 0.2
"""Preempted requests per second one engine may show: an occasional preemption is the
scheduler doing its job; one every five seconds means a sizeable share of the decode work
is thrown away and recomputed."""

KV_CACHE_SATURATED: Final = Alert(
    name="EagleEyeKVCacheSaturated",
    expr=f"eagle_eye:kv_cache_usage:ratio > {KV_CACHE_SATURATED_RATIO}",
    for_=f"{KV_CACHE_SATURATED_FOR_MIN}m",
    severity="warning",
    summary=(
        f"KV cache of {label('pod')} above {percent(KV_CACHE_SATURATED_RATIO)} "
        f"for {KV_CACHE_SATURATED_FOR_MIN} minutes"
    ),
    description=(
        f"{label('pod')} ({label('model_name')}) has almost no free KV-cache "
        "blocks: new requests queue and running ones get preempted."
    ),
    runbook=(
        "Check preemptions and TTFT for the pod; raise gpu_memory_utilization, lower "
        "max_num_seqs or max_model_len, or add replicas."
    ),
    fires=Case(
        # The name vLLM removed: old deployments must still alert.
        series=(vllm_series("vllm:gpu_cache_usage_perc", "0.97x20"),),
        eval_time="15m",
        fired=(VLLM_POD_OUT,),
    ),
    silent=Case(
        series=(vllm_series("vllm:kv_cache_usage_perc", "0.5x20"),),
        eval_time="15m",
    ),
)

PREEMPTION_STORM: Final = Alert(
    name="EagleEyePreemptionStorm",
    expr=f"eagle_eye:preemptions:rate5m > {PREEMPTIONS_PER_S_MAX}",
    for_="5m",
    severity="warning",
    summary=f"{label('pod')} preempts more than {PREEMPTIONS_PER_S_MAX:g} requests per second",
    description=(
        f"{label('pod')} keeps evicting running requests because its KV cache is "
        "full; each preemption recomputes the request's prefix and wastes compute."
    ),
    runbook=(
        "Lower max_num_seqs or max_num_batched_tokens, give the KV cache more memory, "
        "or route long-context requests to pods with more KV capacity."
    ),
    fires=Case(
        series=(vllm_series("vllm:num_preemptions_total", "0+30x20"),),
        eval_time="15m",
        fired=(VLLM_POD_OUT,),
    ),
    silent=Case(
        series=(vllm_series("vllm:num_preemptions_total", "0+3x20"),),
        eval_time="15m",
    ),
)

ALERTS: Final = (KV_CACHE_SATURATED, PREEMPTION_STORM)
