"""Pickers: choose one of the filtered candidates.

==================  ====================================================================
``argmin``          lowest weighted sum of the scorers; ties broken at random (a fixed
                    order would send every tie to the same engine)
``round_robin``     next candidate in turn
``random``          uniform
``consistent_hash`` the session key's point on a hash ring of the candidates: a
                    conversation stays on one engine (its KV cache) and adding or
                    removing an engine moves only ~1/N of the sessions; requests without
                    a key go to a fallback policy
==================  ====================================================================
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from eagle_eye.fleet.target import Target
from eagle_eye.route.policies.base import PickContext, Policy, Weighted, argmin


class ArgMin:
    def pick(self, ctx: PickContext, candidates: Sequence[Target], weighted: Weighted) -> Target:
        ctx.pool = candidates

        def total(t: Target) -> float:
            s = 0.0
            for weight, scorer in weighted:
                s += weight * scorer.score(ctx, t)
            return s

        return argmin(candidates, total, ctx.rng)


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def pick(self, ctx: PickContext, candidates: Sequence[Target], weighted: Weighted) -> Target:
        i = self._next % len(candidates)
        self._next = i + 1
        return candidates[i]


class Uniform:
    def pick(self, ctx: PickContext, candidates: Sequence[Target], weighted: Weighted) -> Target:
        return candidates[ctx.rng.randrange(len(candidates))]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsistentHashConfig:
    vnodes: int = 64
    """Points per engine on the ring: more spreads sessions more evenly."""


class ConsistentHash:
    """Ring over the candidates' URLs, rebuilt only when the candidate list changes (the
    fleet view hands out the same list object until membership changes)."""

    def __init__(self, config: ConsistentHashConfig, fallback: Policy) -> None:
        self.config = config
        self.fallback = fallback
        self._ring_key: tuple[str, ...] = ()
        self._ring_source: Sequence[Target] | None = None
        self._ring_source_len = 0
        self._by_url: dict[str, Target] = {}
        self._ring_points: list[int] = []
        self._ring_urls: list[str] = []

    def pick(self, ctx: PickContext, candidates: Sequence[Target], weighted: Weighted) -> Target:
        key = ctx.request.session_key
        if key is None:
            return self.fallback.pick(ctx.request, candidates, ctx.rng)
        if candidates is not self._ring_source or len(candidates) != self._ring_source_len:
            urls = tuple(sorted(t.url for t in candidates))
            if urls != self._ring_key:
                self._build(urls)
            self._ring_source, self._ring_source_len = candidates, len(candidates)
            self._by_url = {t.url: t for t in candidates}
        i = bisect.bisect(self._ring_points, stable_hash(key)) % len(self._ring_points)
        return self._by_url[self._ring_urls[i]]

    def _build(self, urls: tuple[str, ...]) -> None:
        points = sorted(
            (stable_hash(f"{url}#{v}"), url) for url in urls for v in range(self.config.vnodes)
        )
        self._ring_key = urls
        self._ring_points = [p for p, _ in points]
        self._ring_urls = [u for _, u in points]


def stable_hash(text: str) -> int:
    """Same on every router replica (Python's ``hash`` is randomised per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
