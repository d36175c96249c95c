"""The pipeline's parts: what a policy is, the state one pick shares, the load estimates.

A scheduling pass is ``filters -> scorers -> picker``, the shape of the Gateway API
Inference Extension's endpoint picker. Every part is a small object with one method:

* ``Filter.filter(ctx, candidates) -> candidates`` narrows the list (sampling, gates);
* ``Scorer.score(ctx, target) -> float`` is one cost term in *requests-equivalent* units
  (a queued request costs 1): no min-max rescaling, which would make queues of 1 vs 2
  score like 1 vs 200; a profile multiplies each term by its weight and adds them up;
* ``Picker.pick(ctx, candidates, weighted) -> target`` chooses (argmin with a random
  tie-break, round-robin, consistent hash, uniform).

``PickContext`` is what the parts of one pass share (the request, the randomness, the
prefix index, and the prefix matches computed once for the pool), like the endpoint
picker's cycle state. Nothing here does I/O or reads a clock: the request carries
``now_mono_s`` and randomness comes from ``rng``, so the offline benchmark drives the
very same code in virtual time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from eagle_eye.fleet.target import Target
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.prefix import CHARS_PER_TOKEN, PrefixIndex

TIE_EPSILON: Final = 1e-9
"""Scores this close are a tie, broken at random (a fixed order would hot-spot)."""


class Policy(Protocol):
    """What the dispatch core calls. ``candidates`` is non-empty and already filtered by
    the fleet view (ready, healthy, serving the model) and the dispatcher (limits,
    instances already tried)."""

    name: str

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target: ...


class PickContext:
    """State shared by the filters, scorers and picker of one pick."""

    __slots__ = ("followed_prefix", "index", "matched", "pool", "request", "rng")

    def __init__(
        self, request: RequestFeatures, rng: random.Random, index: PrefixIndex | None
    ) -> None:
        self.request = request
        self.rng = rng
        self.index = index
        self.matched: dict[str, int] | None = None
        """Leading prompt blocks each pool member holds (0s left out); None until known."""
        self.pool: Sequence[Target] = ()
        self.followed_prefix = False
        """Set by the prefix gate when it kept only the prefix holders."""

    def matches(self, pool: Sequence[Target]) -> dict[str, int]:
        """Prefix blocks held per URL for ``pool``, looked up once per pick."""
        if self.matched is None:
            hashes = self.request.prefix_hashes
            if not hashes or self.index is None:
                self.matched = {}
            else:
                self.matched = self.index.match(hashes, [t.url for t in pool])
        return self.matched


class Filter(Protocol):
    def filter(self, ctx: PickContext, candidates: Sequence[Target]) -> Sequence[Target]: ...


class Scorer(Protocol):
    def score(self, ctx: PickContext, t: Target) -> float: ...


Weighted = Sequence[tuple[float, Scorer]]
"""A profile's scorers with their weights."""


class Picker(Protocol):
    def pick(self, ctx: PickContext, candidates: Sequence[Target], weighted: Weighted) -> Target:
        """``candidates`` is non-empty."""
        ...


# -- load estimates (requests-equivalent) ------------------------------------------------


def queued_estimate(t: Target, now_mono_s: float, stale_after_s: float) -> float:
    """Requests ahead of a new one: snapshot ``waiting`` plus what the router sent since;
    the router's in-flight count when the snapshot is stale or missing."""
    if t.fresh(now_mono_s, stale_after_s):
        return float(t.waiting + t.sent_since_snapshot)
    return float(t.inflight)


def load_estimate(t: Target, now_mono_s: float, stale_after_s: float) -> float:
    """Everything the engine is doing (running + queued), by the same rule."""
    if t.fresh(now_mono_s, stale_after_s):
        return float(t.running + t.waiting + t.sent_since_snapshot)
    return float(t.inflight)


def kv_pressure(t: Target, now_mono_s: float, stale_after_s: float, extra_tokens: int) -> float:
    """KV-cache usage (0-1) expected once the requests sent since the snapshot land, plus
    ``extra_tokens``; 0 when unknown or stale."""
    if t.kv_usage is None or not t.fresh(now_mono_s, stale_after_s):
        return 0.0
    usage = t.kv_usage
    if t.kv_capacity_tokens:
        usage += extra_tokens / t.kv_capacity_tokens
    return usage


def request_tokens(request: RequestFeatures) -> int:
    """Tokens one request may occupy in the KV cache (prompt plus its output cap)."""
    return max(1, request.prompt_tokens + (request.max_tokens or 0))


def new_prefill_tokens(request: RequestFeatures, matched_blocks: int, block_chars: int) -> float:
    """Prompt tokens an engine holding ``matched_blocks`` leading blocks must still
    compute (what the dispatch core passes to ``FleetView.on_sent``)."""
    return max(0.0, request.prompt_tokens - matched_blocks * block_chars / CHARS_PER_TOKEN)


def argmin(
    candidates: Sequence[Target], score: Callable[[Target], float], rng: random.Random
) -> Target:
    """The lowest-scoring candidate; ties (within ``TIE_EPSILON``) broken at random."""
    best: list[Target] = []
    best_score = float("inf")
    for t in candidates:
        s = score(t)
        if s < best_score - TIE_EPSILON:
            best_score = s
            best = [t]
        elif s <= best_score + TIE_EPSILON:
            best.append(t)
    if not best:  # every score was inf/nan: fall back to uniform
        return candidates[rng.randrange(len(candidates))]
    return best[0] if len(best) == 1 else best[rng.randrange(len(best))]


def require(candidates: Sequence[Target]) -> None:
    if not candidates:
        raise ValueError("pick() needs at least one candidate")
