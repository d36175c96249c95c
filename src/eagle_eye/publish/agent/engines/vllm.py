"""vLLM's ``/metrics`` page, plain (``vllm:*``) or through Ray Serve LLM (``ray_vllm_*``).

Names come from vLLM's ``PrometheusStatLogger`` (see ANCHORS.md). Ray Serve LLM runs
the same logger with Ray's metric classes (``RayPrometheusStatLogger``): ``:`` becomes
``_``, Ray prefixes ``ray_``, and every series gains a ``ReplicaId`` label, so one page
holds many replicas. Removed names (``gpu_cache_usage_perc``, ``gpu_prefix_cache_*``,
``time_per_output_token_seconds``) are read when the current ones are absent, so older
deployments work too. The ``engine`` label is vLLM's data-parallel engine index.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Final

from eagle_eye.publish.agent.engines.base import (
    EngineKind,
    EngineMap,
    RankKey,
    Reading,
    clamp_ratio,
    rank_label,
    readings_from_page,
)
from eagle_eye.publish.agent.promtext import PromSample, scan

VLLM_PREFIX: Final = "vllm:"
RAY_VLLM_PREFIX: Final = "ray_vllm_"

# Reading field -> metric names without prefix, current name first.
_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "running": ("num_requests_running",),
    "waiting": ("num_requests_waiting",),
    "kv_usage": ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
    "prefix_cache_queries_total": (
        "prefix_cache_queries_total",
        "gpu_prefix_cache_queries_total",
    ),
    "prefix_cache_hits_total": ("prefix_cache_hits_total", "gpu_prefix_cache_hits_total"),
    "preemptions_total": ("num_preemptions_total",),
    "prompt_tokens_total": ("prompt_tokens_total",),
    "generation_tokens_total": ("generation_tokens_total",),
    "ttft_sum_s": ("time_to_first_token_seconds_sum",),
    "ttft_count": ("time_to_first_token_seconds_count",),
    "itl_sum_s": ("inter_token_latency_seconds_sum", "time_per_output_token_seconds_sum"),
    "itl_count": ("inter_token_latency_seconds_count", "time_per_output_token_seconds_count"),
}
_CACHE_INFO: Final = "cache_config_info"


def _vllm_key(labels: dict[str, str]) -> RankKey:
    return RankKey(model=labels.get("model_name", ""), rank=rank_label(labels, "engine"))


def _ray_key(labels: dict[str, str]) -> RankKey:
    return RankKey(
        model=labels.get("model_name", ""),
        rank=rank_label(labels, "engine"),
        replica=labels.get("ReplicaId", ""),
    )


def _mapping(prefix: str, kind: EngineKind) -> EngineMap:
    fields = {f: tuple(prefix + n for n in names) for f, names in _FIELDS.items()}
    key = _ray_key if prefix == RAY_VLLM_PREFIX else _vllm_key
    return EngineMap(kind=kind, fields=fields, key=key)


VLLM: Final = _mapping(VLLM_PREFIX, EngineKind.VLLM)
RAY_VLLM: Final = _mapping(RAY_VLLM_PREFIX, EngineKind.RAY_SERVE)


def read(text: str, default_model: str | None = None, *, ray: bool = False) -> list[Reading]:
    """Readings per (model, engine index[, Ray replica]) from a vLLM page."""
    mapping = RAY_VLLM if ray else VLLM
    prefix = RAY_VLLM_PREFIX if ray else VLLM_PREFIX
    info_name = prefix + _CACHE_INFO
    page = scan(text, (*mapping.sample_names, info_name))
    readings = readings_from_page(page, mapping, default_model)
    capacity = _capacities(page.get(info_name, ()), mapping)
    out = []
    for reading in readings:
        tokens = capacity.get((reading.key.rank, reading.key.replica))
        if tokens is not None:
            reading = replace(reading, kv_capacity_tokens=tokens)
        out.append(clamp_ratio(reading))
    return out


def _capacities(samples: Iterable[PromSample], mapping: EngineMap) -> dict[tuple[int, str], int]:
    """(engine index, replica) -> KV capacity in tokens from ``cache_config_info``.

    vLLM publishes its cache config as an info gauge; recent releases label it with
    ``kv_cache_size_tokens``, older ones only with ``num_gpu_blocks`` and
    ``block_size`` (capacity is their product). The series has
    no ``model_name``, so it applies to every model on that engine index.
    """
    out: dict[tuple[int, str], int] = {}
    for sample in samples:
        labels = sample.labels
        key = mapping.key(labels)
        if key is None:
            continue
        size = labels.get("kv_cache_size_tokens", "")
        blocks, block_size = labels.get("num_gpu_blocks", ""), labels.get("block_size", "")
        if size.isdigit():
            out[(key.rank, key.replica)] = int(size)
        elif blocks.isdigit() and block_size.isdigit():
            out[(key.rank, key.replica)] = int(blocks) * int(block_size)
    return out
