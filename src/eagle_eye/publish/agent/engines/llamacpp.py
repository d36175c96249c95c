"""llama.cpp server's ``/metrics`` page (``--metrics``; names from its documentation).

One model, no labels: the model name comes from the agent. ``requests_processing`` and
``requests_deferred`` are the queue; the KV ratio gauge exists only in older builds
(``kv_cache_usage_ratio``) and is absent otherwise. No latency histograms are exported.
"""

from __future__ import annotations

from typing import Final

from eagle_eye.publish.agent.engines.base import (
    EngineKind,
    EngineMap,
    RankKey,
    Reading,
    clamp_ratio,
    read_page,
)


def _key(_labels: dict[str, str]) -> RankKey:
    return RankKey(model="")


LLAMACPP: Final = EngineMap(
    kind=EngineKind.LLAMACPP,
    fields={
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_usage": ("llamacpp:kv_cache_usage_ratio",),
        "prompt_tokens_total": ("llamacpp:prompt_tokens_total",),
        "generation_tokens_total": ("llamacpp:tokens_predicted_total",),
    },
    key=_key,
)


def read(text: str, default_model: str | None = None) -> list[Reading]:
    """One reading for the server's model."""
    return [clamp_ratio(r) for r in read_page(text, LLAMACPP, default_model)]
