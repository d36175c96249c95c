"""SGLang's ``/metrics`` page (``--enable-metrics``) and its ``/v1/loads`` JSON.

SGLang labels its series with ``model_name`` (``name`` in older releases), ``tp_rank``
and ``dp_rank``. Every tensor-parallel rank of a data-parallel group sees the same
queue, so only ``tp_rank`` 0 is read (absent means 0). ``GET /v1/loads?include=core``
gives the scheduler's own view per ``dp_rank``; where it answers, its queue and KV
numbers replace the gauges (they are the same quantities, fetched directly).
``sglang:cache_hit_rate`` is a ratio, not the cumulative token counts a snapshot
carries, so prefix-cache fields stay absent.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any, Final

from eagle_eye.errors import EagleEyeError
from eagle_eye.publish.agent.engines.base import (
    EngineKind,
    EngineMap,
    RankKey,
    Reading,
    clamp_ratio,
    rank_label,
    read_page,
)

PREFIX: Final = "sglang:"
LOADS_PATH: Final = "/v1/loads?include=core"
MAX_RANKS: Final = 4096


def _key(labels: dict[str, str]) -> RankKey | None:
    if rank_label(labels, "tp_rank") != 0:
        return None
    model = labels.get("model_name") or labels.get("name") or ""
    return RankKey(model=model, rank=rank_label(labels, "dp_rank"))


SGLANG: Final = EngineMap(
    kind=EngineKind.SGLANG,
    fields={
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_usage": ("sglang:token_usage",),
        "kv_capacity_tokens": ("sglang:max_total_num_tokens",),
        "prompt_tokens_total": ("sglang:prompt_tokens_total",),
        "generation_tokens_total": ("sglang:generation_tokens_total",),
        "ttft_sum_s": ("sglang:time_to_first_token_seconds_sum",),
        "ttft_count": ("sglang:time_to_first_token_seconds_count",),
        "itl_sum_s": ("sglang:inter_token_latency_seconds_sum",),
        "itl_count": ("sglang:inter_token_latency_seconds_count",),
    },
    key=_key,
)


def read(text: str, default_model: str | None = None) -> list[Reading]:
    """Readings per (model, dp_rank) from an SGLang ``/metrics`` page."""
    return [clamp_ratio(r) for r in read_page(text, SGLANG, default_model)]


class LoadsError(EagleEyeError, ValueError):
    """``/v1/loads`` answered with something that is not its documented shape."""


def parse_loads(body: bytes | str) -> tuple[dict[int, dict[str, Any]], str | None]:
    """``/v1/loads`` JSON -> ({dp_rank: numbers}, engine version)."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LoadsError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict) or not isinstance(obj.get("loads"), list):
        raise LoadsError("expected an object with a 'loads' list")
    ranks: dict[int, dict[str, Any]] = {}
    for item in obj["loads"][:MAX_RANKS]:
        if not isinstance(item, dict):
            raise LoadsError("a 'loads' entry is not an object")
        rank = item.get("dp_rank", 0)
        if type(rank) is not int or rank < 0:
            raise LoadsError(f"bad dp_rank {rank!r}")
        ranks[rank] = item
    version = obj.get("version")
    return ranks, version if isinstance(version, str) and version else None


def merge_loads(
    readings: list[Reading], loads: dict[int, dict[str, Any]], version: str | None
) -> list[Reading]:
    """Overlay ``/v1/loads`` numbers on the readings of the same ``dp_rank``."""
    out = []
    for reading in readings:
        item = loads.get(reading.key.rank)
        changes: dict[str, Any] = {}
        if item is not None:
            for field_name, key, kind in _LOADS_FIELDS:
                value = _number(item.get(key), integer=kind is int)
                if value is not None:
                    changes[field_name] = value
        if version is not None:
            changes["engine_version"] = version
        out.append(clamp_ratio(replace(reading, **changes)) if changes else reading)
    return out


def _number(value: object, *, integer: bool) -> int | float | None:
    """A finite number >= 0 from JSON (ints stay ints for counts), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    if integer:
        return value if isinstance(value, int) else None
    return float(value)


_LOADS_FIELDS: Final = (
    ("running", "num_running_reqs", int),
    ("waiting", "num_waiting_reqs", int),
    ("kv_usage", "token_usage", float),
    ("kv_capacity_tokens", "max_total_num_tokens", int),
)
