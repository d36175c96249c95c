"""What an engine's page says about one of its ranks, and the table-driven reader.

Each engine module describes its page as an ``EngineMap``: which sample names feed which
``Reading`` field (first name present wins, so current names come before removed ones)
and which labels split the page into ranks, replicas and models. ``read_page`` is the
one generic function that applies a mapping; engines with quirks post-process its
output. Everything here is pure: a page in, readings out.

A field the page does not carry stays ``None``: the agent never invents a number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Final

from eagle_eye.errors import EagleEyeError
from eagle_eye.publish.agent.promtext import Page, PromSample, finite, scan


class EngineKind(str, Enum):
    """Engines the agent understands; the value is the snapshot's ``engine`` field."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TGI = "tgi"
    LLAMACPP = "llamacpp"
    RAY_SERVE = "ray-serve"


class MappingError(EagleEyeError, ValueError):
    """The page parsed but lacks what every page of this engine has (wrong kind?)."""


@dataclass(frozen=True, slots=True, order=True)
class RankKey:
    """Which snapshot a reading belongs to: one model on one rank of one replica."""

    model: str
    rank: int = 0
    replica: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """One rank's numbers as the engine printed them. ``None`` means "not exposed"."""

    key: RankKey
    running: int | None = None
    waiting: int | None = None
    kv_usage: float | None = None
    """Fraction 0-1 of the KV cache in use."""
    kv_capacity_tokens: int | None = None
    prefix_cache_queries_total: int | None = None
    prefix_cache_hits_total: int | None = None
    preemptions_total: int | None = None
    prompt_tokens_total: int | None = None
    generation_tokens_total: int | None = None
    ttft_sum_s: float | None = None
    """Histogram ``_sum`` of time to first token (cumulative)."""
    ttft_count: int | None = None
    itl_sum_s: float | None = None
    itl_count: int | None = None
    engine_version: str | None = None


# Fields filled from a gauge/counter value; the rest are computed by hooks.
NUMERIC_FIELDS: Final = (
    "running",
    "waiting",
    "kv_usage",
    "kv_capacity_tokens",
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "ttft_sum_s",
    "ttft_count",
    "itl_sum_s",
    "itl_count",
)
_INT_FIELDS: Final = frozenset(NUMERIC_FIELDS) - {"kv_usage", "ttft_sum_s", "itl_sum_s"}

KeyFn = Callable[[dict[str, str]], RankKey | None]
"""Labels of one sample -> the rank it describes (None: skip this sample)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineMap:
    """How one engine's page maps onto ``Reading`` fields."""

    kind: EngineKind
    fields: Mapping[str, tuple[str, ...]]
    """Reading field -> candidate sample names, preferred first."""
    key: KeyFn
    required: tuple[str, ...] = ("running", "waiting")
    """Fields every page of this engine has; missing ones make the page an error."""
    scale: Mapping[str, float] = field(default_factory=dict)
    """Multiply a field by this (e.g. percent -> fraction)."""

    @property
    def sample_names(self) -> tuple[str, ...]:
        """Every sample name the mapping may read (what the parser is asked for)."""
        seen: dict[str, None] = {}
        for names in self.fields.values():
            for name in names:
                seen[name] = None
        return tuple(seen)


def read_page(text: str, mapping: EngineMap, default_model: str | None = None) -> list[Reading]:
    """Parse ``text`` and apply ``mapping``; raises ``PromParseError``/``MappingError``."""
    page = scan(text, mapping.sample_names)
    return readings_from_page(page, mapping, default_model)


def readings_from_page(
    page: Page, mapping: EngineMap, default_model: str | None = None
) -> list[Reading]:
    """Apply ``mapping`` to an already-scanned page (one reading per rank key)."""
    values: dict[RankKey, dict[str, float]] = {}
    for field_name, names in mapping.fields.items():
        for name in names:
            samples = page.get(name)
            if not samples:
                continue
            for sample in samples:
                key = _key_for(mapping, sample, default_model)
                if key is None:
                    continue
                slot = values.setdefault(key, {})
                value = finite(sample.value)
                if value is None:
                    continue
                # Several series for one key (e.g. one per Ray worker process) add up.
                slot[field_name] = slot.get(field_name, 0.0) + value
            break  # the first candidate name present on the page wins
    missing = [f for f in mapping.required if not any(f in v for v in values.values())]
    if not values or missing:
        raise MappingError(
            f"no {mapping.kind.value} series for {', '.join(missing or mapping.required)}"
        )
    readings = []
    for key in sorted(values):
        slot = values[key]
        kwargs: dict[str, float | int] = {}
        for name, value in slot.items():
            value *= mapping.scale.get(name, 1.0)
            if name in _INT_FIELDS:
                if value < 0:
                    continue
                kwargs[name] = round(value)
            else:
                kwargs[name] = value
        readings.append(Reading(key=key, **kwargs))  # type: ignore[arg-type]
    return readings


def _key_for(mapping: EngineMap, sample: PromSample, default_model: str | None) -> RankKey | None:
    key = mapping.key(sample.labels)
    if key is None:
        return None
    if not key.model:
        if default_model is None:
            return None
        key = replace(key, model=default_model)
    return key


def rank_label(labels: Mapping[str, str], name: str) -> int:
    """An integer rank label (``engine``, ``dp_rank``); absent or odd values mean 0."""
    raw = labels.get(name, "")
    return int(raw) if raw.isdigit() else 0


def clamp_ratio(reading: Reading) -> Reading:
    """Keep ``kv_usage`` within 0-1 (engines round; a snapshot must validate)."""
    usage = reading.kv_usage
    if usage is None or 0.0 <= usage <= 1.0:
        return reading
    return replace(reading, kv_usage=min(1.0, max(0.0, usage)))
