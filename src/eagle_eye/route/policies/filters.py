"""Filters: narrow the candidates before scoring.

The fleet view already keeps only ready, healthy instances serving the model, and the
dispatch core drops instances at their concurrency limit and those a retry already
tried (``not_tried_under_limit``). A profile's own filters come after that:

================  =========================================================================
``sample``        power of d choices in large fleets, plus the engines holding the longest
                  prompt prefix (so sampling never loses a cache hit)
``prefix_gate``   only the engines holding enough of the prefix, unless they are much
                  busier than the idlest engine (SGLang's cache_aware balance thresholds)
================  =========================================================================
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from eagle_eye.fleet.target import Target
from eagle_eye.route.policies.base import PickContext, load_estimate


def not_tried_under_limit(
    candidates: Sequence[Target], tried: Collection[str], per_instance_limit: int | None
) -> list[Target]:
    """Candidates not tried yet by this request and below the per-instance limit."""
    return [
        t
        for t in candidates
        if t.url not in tried and (per_instance_limit is None or t.inflight < per_instance_limit)
    ]


class _UrlMap:
    """URL -> target for the current candidate list, rebuilt only when the fleet view
    hands out a different list (it caches one per membership version)."""

    __slots__ = ("_map", "_source", "_source_len")

    def __init__(self) -> None:
        self._source: Sequence[Target] | None = None
        self._source_len = 0
        self._map: dict[str, Target] = {}

    def of(self, candidates: Sequence[Target]) -> dict[str, Target]:
        if candidates is not self._source or len(candidates) != self._source_len:
            self._map = {t.url: t for t in candidates}
            self._source, self._source_len = candidates, len(candidates)
        return self._map


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleConfig:
    above: int = 64
    """Sample only when there are more candidates than this."""
    d: int = 8
    """How many random candidates to keep."""
    prefix_holders: bool = True
    """Also keep the (up to 4) engines holding the longest prefix of the prompt."""

    def __post_init__(self) -> None:
        if self.d < 1:
            raise ValueError(f"d must be at least 1, got {self.d}")


class Sample:
    """Power of d choices: O(d) scoring at any fleet size, herding avoided.

    Cost stays O(d x log(blocks)) however many engines share the prefix: the holders
    come from one binary search of the prefix index.
    """

    def __init__(self, config: SampleConfig) -> None:
        self.config = config
        self._urls = _UrlMap()

    def filter(self, ctx: PickContext, candidates: Sequence[Target]) -> Sequence[Target]:
        c = self.config
        if len(candidates) <= c.above:
            return candidates
        sampled = ctx.rng.sample(candidates, c.d)
        hashes = ctx.request.prefix_hashes
        if c.prefix_holders and hashes and ctx.index is not None:
            _, holders = ctx.index.deepest_holders(hashes)
            if holders:
                seen = {t.url for t in sampled}
                by_url = self._urls.of(candidates)
                sampled.extend(by_url[u] for u in holders if u not in seen and u in by_url)
        return sampled


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixGateConfig:
    stale_after_s: float
    cache_threshold: float = 0.3
    """Minimum fraction of the prompt's blocks an engine must hold to count as a holder."""
    balance_abs: float = 4.0
    balance_rel: float = 1.5
    """A holder is followed only if its load <= max(min_load * balance_rel,
    min_load + balance_abs), min_load being the idlest candidate's."""


class PrefixGate:
    """Keep the prefix holders that are not overloaded; keep everyone if there are none.

    The gate is per request and relative to the least-loaded candidate, so a system
    prompt shared by every request cannot pull the fleet onto one engine: once the holder
    is busier than the gate allows, the idlest engine gets the request (and from then on
    holds the prefix too). Sets ``ctx.followed_prefix`` when it kept holders only.
    """

    def __init__(self, config: PrefixGateConfig) -> None:
        self.config = config

    def filter(self, ctx: PickContext, candidates: Sequence[Target]) -> Sequence[Target]:
        c = self.config
        matched = ctx.matches(candidates)
        if not matched:
            return candidates
        now = ctx.request.now_mono_s
        loads = {t.url: load_estimate(t, now, c.stale_after_s) for t in candidates}
        min_load = min(loads.values())
        limit = max(min_load * c.balance_rel, min_load + c.balance_abs)
        needed = max(1.0, c.cache_threshold * len(ctx.request.prefix_hashes))
        holders = [
            t for t in candidates if matched.get(t.url, 0) >= needed and loads[t.url] <= limit
        ]
        if not holders:
            return candidates
        ctx.followed_prefix = True
        return holders
