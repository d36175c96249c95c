"""Routing policies: pure functions of a request and the candidate targets.

Every policy is an object with ``name`` and ``pick(request, candidates, rng) -> Target``;
``candidates`` is non-empty and already filtered (model, state, health) by the fleet view.
Nothing here does I/O or reads a clock: the request carries ``now_mono_s``, randomness
comes from ``rng``, so the benchmark's offline simulator can drive the very same code in
virtual time.

Load between snapshots. A snapshot says what the engine had when it was sampled; the
router adds what it sent since (``Target.sent_since_snapshot``), which an engine will
count as waiting, so a burst of requests arriving between two snapshots spreads out
instead of herding onto the engine that looked least loaded. When the snapshot is older
than ``stale_after_s`` only the router's own in-flight count is used.

Policies (``POLICIES``):

=================  =====================================================================
round_robin        next candidate in turn
random             uniform
least_request      fewest requests in flight through this router
power_of_two       least_request over two random candidates
least_waiting      fewest queued (snapshot waiting + sent since), then fewest running
kv_aware           queue + running + KV-cache pressure; a near-full KV cache is avoided
prefix_affinity    engine holding the longest prompt prefix, unless it is overloaded
session            consistent hash of the session key (falls back to ``cost``)
cost (default)     Dynamo-like: new prefill tokens after prefix overlap + queue + decode
                   load + KV pressure, argmin with random tie-break
=================  =====================================================================
"""

from __future__ import annotations

import bisect
import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from eagle_eye.fleet.target import Target
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.prefix import CHARS_PER_TOKEN, DEFAULT_BLOCK_CHARS, PrefixIndex
from eagle_eye.settings import DEFAULT_STALE_AFTER_S

DEFAULT_POLICY: Final = "cost"
_TIE_EPSILON: Final = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyConfig:
    """Parameters of every policy, in one small typed value (the benchmark tunes these)."""

    stale_after_s: float = DEFAULT_STALE_AFTER_S
    """Snapshots older than this are ignored; only local accounting counts."""
    sample_above: int = 64
    """With more candidates than this, score only ``sample_d`` random ones (power of d
    choices) plus the best prefix holders: keeps ``pick`` O(d) at any fleet size."""
    sample_d: int = 8
    """Random engines scored per pick in large fleets. Balancing gains little beyond a few
    choices (power of two already avoids herding) while ``pick`` cost grows with d; 8
    keeps ``pick`` well under 50 us at 1,000 instances."""
    block_chars: int = DEFAULT_BLOCK_CHARS
    # cost: all terms in "requests-equivalent" units.
    prefill_weight: float = 1.0
    """Cost per ``prefill_unit_tokens`` of prompt the engine must still compute."""
    prefill_unit_tokens: float = 1000.0
    waiting_weight: float = 1.0
    """Cost per queued request (waiting + sent since the snapshot)."""
    running_weight: float = 0.25
    """Cost per running request (decode load); vLLM's DP balancer uses 4:1 waiting:running."""
    kv_weight: float = 2.0
    """Cost per unit of KV-cache usage (0-1)."""
    kv_full: float = 0.95
    """KV usage at or above this is treated as full: the engine would preempt."""
    kv_full_penalty: float = 1000.0
    pending_prefill_weight: float = 0.1
    """Cost per ``prefill_unit_tokens`` of prompt the router has sent to the engine and
    seen no first token for (``Target.pending_prefill_tokens``): the work queued ahead."""
    # prefix_affinity gate (like the SGLang router's cache_aware balance thresholds).
    cache_threshold: float = 0.3
    """Minimum fraction of the prompt's blocks the holder must have to follow the prefix."""
    balance_abs: float = 4.0
    balance_rel: float = 1.5
    """Follow the prefix only if holder load <= max(min_load * balance_rel,
    min_load + balance_abs); otherwise the least-loaded engine takes the request."""
    session_vnodes: int = 64


class Policy(Protocol):
    """What the gateway calls. ``candidates`` is non-empty."""

    name: str

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target: ...


# -- load estimates -------------------------------------------------------------------


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


def _argmin(
    candidates: Sequence[Target], score: Callable[[Target], float], rng: random.Random
) -> Target:
    best: list[Target] = []
    best_score = float("inf")
    for t in candidates:
        s = score(t)
        if s < best_score - _TIE_EPSILON:
            best_score = s
            best = [t]
        elif s <= best_score + _TIE_EPSILON:
            best.append(t)
    if not best:  # every score was inf/nan: fall back to uniform
        return candidates[rng.randrange(len(candidates))]
    return best[0] if len(best) == 1 else best[rng.randrange(len(best))]


def _sample(
    candidates: Sequence[Target], config: PolicyConfig, rng: random.Random
) -> Sequence[Target]:
    if len(candidates) <= config.sample_above:
        return candidates
    return rng.sample(candidates, config.sample_d)


def _require(candidates: Sequence[Target]) -> None:
    if not candidates:
        raise ValueError("pick() needs at least one candidate")


# -- simple policies --------------------------------------------------------------------


class RoundRobin:
    name = "round_robin"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self._next = 0

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        i = self._next % len(candidates)
        self._next = i + 1
        return candidates[i]


class Random:
    name = "random"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        pass

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        return candidates[rng.randrange(len(candidates))]


class LeastRequest:
    name = "least_request"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        return _argmin(_sample(candidates, self.config, rng), lambda t: t.inflight, rng)


class PowerOfTwo:
    name = "power_of_two"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        pass

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        if len(candidates) <= 2:
            return _argmin(candidates, lambda t: t.inflight, rng)
        return _argmin(rng.sample(list(candidates), 2), lambda t: t.inflight, rng)


class LeastWaiting:
    name = "least_waiting"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        now, stale = request.now_mono_s, self.config.stale_after_s

        def score(t: Target) -> float:
            # Running breaks ties between equal queues (1e-3 per running request).
            running = t.running if t.fresh(now, stale) else 0
            return queued_estimate(t, now, stale) + 1e-3 * running

        return _argmin(_sample(candidates, self.config, rng), score, rng)


def kv_pressure(t: Target, now_mono_s: float, config: PolicyConfig, extra_tokens: int) -> float:
    """KV-cache usage (0-1) expected once the requests sent since the snapshot land, plus
    ``extra_tokens``; 0 when unknown or stale."""
    if t.kv_usage is None or not t.fresh(now_mono_s, config.stale_after_s):
        return 0.0
    usage = t.kv_usage
    if t.kv_capacity_tokens:
        usage += extra_tokens / t.kv_capacity_tokens
    return usage


class KvAware:
    """Queue and decode load from the latest snapshot plus requests sent since, and KV
    pressure: an engine whose KV cache is (about to be) full gets nothing while any other
    engine has room."""

    name = "kv_aware"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        c, now = self.config, request.now_mono_s
        per_request_tokens = max(1, request.prompt_tokens + (request.max_tokens or 0))

        def score(t: Target) -> float:
            fresh = t.fresh(now, c.stale_after_s)
            kv = kv_pressure(t, now, c, per_request_tokens * (t.sent_since_snapshot + 1))
            return (
                c.waiting_weight * queued_estimate(t, now, c.stale_after_s)
                + c.running_weight * (t.running if fresh else 0)
                + c.kv_weight * kv
                + (c.kv_full_penalty if kv >= c.kv_full else 0.0)
            )

        return _argmin(_sample(candidates, c, rng), score, rng)


# -- prefix-aware policies -------------------------------------------------------------


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


def _pool_and_matches(
    candidates: Sequence[Target],
    hashes: Sequence[int],
    index: PrefixIndex,
    config: PolicyConfig,
    rng: random.Random,
    urls: _UrlMap,
) -> tuple[Sequence[Target], dict[str, int]]:
    """The candidates to score and how many prefix blocks each holds.

    Large fleets are sampled (power of d choices) but the engines holding the longest
    prefix always join the sample, so sampling never loses a cache hit. Cost stays
    O(pool x log(blocks)) however many engines share the prefix.
    """
    if len(candidates) <= config.sample_above:
        pool: Sequence[Target] = candidates
    else:
        sampled = rng.sample(candidates, config.sample_d)
        if hashes:
            _, holders = index.deepest_holders(hashes)
            if holders:
                seen = {t.url for t in sampled}
                by_url = urls.of(candidates)
                sampled.extend(by_url[u] for u in holders if u not in seen and u in by_url)
        pool = sampled
    if not hashes:
        return pool, {}
    return pool, index.match(hashes, [t.url for t in pool])


class PrefixAffinity:
    """The engine that most likely holds the prompt's prefix, gated by load.

    The gate is per request and relative to the least-loaded candidate, so a system
    prompt shared by every request cannot pull the fleet onto one engine: once the holder
    is ``balance_abs``/``balance_rel`` busier than the idlest engine, the idlest one gets
    the request (and from then on holds the prefix too).
    """

    name = "prefix_affinity"

    def __init__(self, config: PolicyConfig | None = None, index: PrefixIndex | None = None):
        self.config = config or PolicyConfig()
        self.index = index if index is not None else PrefixIndex()
        self._urls = _UrlMap()

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        c, now = self.config, request.now_mono_s
        hashes = request.prefix_hashes
        pool, matched = _pool_and_matches(candidates, hashes, self.index, c, rng, self._urls)
        loads = {t.url: load_estimate(t, now, c.stale_after_s) for t in pool}
        min_load = min(loads.values())
        limit = max(min_load * c.balance_rel, min_load + c.balance_abs)
        if matched:
            needed = c.cache_threshold * len(hashes)
            holders = [
                t
                for t in pool
                if matched.get(t.url, 0) >= max(1.0, needed) and loads[t.url] <= limit
            ]
            if holders:
                # Longest match first, then least loaded.
                return _argmin(
                    holders,
                    lambda t: -matched[t.url] * 1e6 + loads[t.url],
                    rng,
                )
        return _argmin(pool, lambda t: loads[t.url], rng)


class Cost:
    """The default: estimated work ahead of this request on each engine, argmin.

    ``prefill_weight * new_prefill_tokens / prefill_unit_tokens`` (prompt not already in
    the engine's prefix cache, per the prefix index) ``+ pending_prefill_weight *
    pending_prefill_tokens / prefill_unit_tokens`` (prompt tokens this router sent there
    that have not produced a first token yet) ``+ waiting_weight * queued
    + running_weight * running + kv_weight * kv_usage`` (+ a large penalty at a full KV
    cache). Like NVIDIA Dynamo's ``prefill_blocks_after_overlap + decode_blocks``, with the
    router's own sends since the last snapshot counted as queued.
    """

    name = "cost"

    def __init__(self, config: PolicyConfig | None = None, index: PrefixIndex | None = None):
        self.config = config or PolicyConfig()
        self.index = index if index is not None else PrefixIndex()
        self._urls = _UrlMap()

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        c, now = self.config, request.now_mono_s
        pool, matched = _pool_and_matches(
            candidates, request.prefix_hashes, self.index, c, rng, self._urls
        )
        block_tokens = c.block_chars / CHARS_PER_TOKEN
        prompt = request.prompt_tokens
        per_request_tokens = max(1, prompt + (request.max_tokens or 0))
        prefill_scale = c.prefill_weight / c.prefill_unit_tokens
        pending_scale = c.pending_prefill_weight / c.prefill_unit_tokens
        fresh_since = now - c.stale_after_s
        waiting_weight, running_weight, kv_weight = c.waiting_weight, c.running_weight, c.kv_weight
        kv_full, kv_full_penalty = c.kv_full, c.kv_full_penalty
        # Inlined scoring (this loop is the router's hot path at large fleets).
        best: list[Target] = []
        best_score = float("inf")
        for t in pool:
            last = t.last_snapshot_mono_s
            held = matched.get(t.url, 0) * block_tokens if matched else 0.0
            score = prefill_scale * max(0.0, prompt - held)
            if t.pending_prefill_tokens:
                score += pending_scale * t.pending_prefill_tokens
            if last is not None and last >= fresh_since:
                sent = t.sent_since_snapshot
                score += waiting_weight * (t.waiting + sent) + running_weight * t.running
                kv = t.kv_usage
                if kv is not None:
                    if t.kv_capacity_tokens:
                        kv += per_request_tokens * (sent + 1) / t.kv_capacity_tokens
                    score += kv_weight * kv
                    if kv >= kv_full:
                        score += kv_full_penalty
            else:
                score += waiting_weight * t.inflight
            if score < best_score - _TIE_EPSILON:
                best_score = score
                best = [t]
            elif score <= best_score + _TIE_EPSILON:
                best.append(t)
        if not best:
            return pool[rng.randrange(len(pool))]
        return best[0] if len(best) == 1 else best[rng.randrange(len(best))]


class Session:
    """Consistent hashing of the session key over the candidates: a conversation stays on
    one engine (its KV cache), and adding or removing an engine moves only ~1/N of the
    sessions. Requests without a key go to ``fallback``."""

    name = "session"

    def __init__(self, config: PolicyConfig | None = None, fallback: Policy | None = None):
        self.config = config or PolicyConfig()
        self.fallback: Policy = fallback if fallback is not None else Cost(self.config)
        self._ring_key: tuple[str, ...] = ()
        self._ring_source: Sequence[Target] | None = None
        self._ring_source_len = 0
        self._by_url: dict[str, Target] = {}
        self._ring_points: list[int] = []
        self._ring_urls: list[str] = []

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        _require(candidates)
        if request.session_key is None:
            return self.fallback.pick(request, candidates, rng)
        # The fleet view hands out the same list object until membership changes.
        if candidates is not self._ring_source or len(candidates) != self._ring_source_len:
            urls = tuple(sorted(t.url for t in candidates))
            if urls != self._ring_key:
                self._build(urls)
            self._ring_source, self._ring_source_len = candidates, len(candidates)
            self._by_url = {t.url: t for t in candidates}
        point = _stable_hash(request.session_key)
        i = bisect.bisect(self._ring_points, point) % len(self._ring_points)
        url = self._ring_urls[i]
        return self._by_url[url]

    def _build(self, urls: tuple[str, ...]) -> None:
        points = sorted(
            (_stable_hash(f"{url}#{v}"), url)
            for url in urls
            for v in range(self.config.session_vnodes)
        )
        self._ring_key = urls
        self._ring_points = [p for p, _ in points]
        self._ring_urls = [u for _, u in points]


def new_prefill_tokens(request: RequestFeatures, matched_blocks: int, block_chars: int) -> float:
    """Prompt tokens an engine holding ``matched_blocks`` leading blocks must still
    compute (what the gateway passes to ``FleetView.on_sent``)."""
    return max(0.0, request.prompt_tokens - matched_blocks * block_chars / CHARS_PER_TOKEN)


def _stable_hash(text: str) -> int:
    """Same on every router replica (Python's ``hash`` is randomised per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


POLICY_NAMES: Final = (
    "cost",
    "round_robin",
    "random",
    "least_request",
    "power_of_two",
    "least_waiting",
    "kv_aware",
    "prefix_affinity",
    "session",
)


def make_policies(
    config: PolicyConfig | None = None, index: PrefixIndex | None = None
) -> dict[str, Policy]:
    """One instance of every policy, sharing ``index``; ``"default"`` is ``cost``."""
    config = config or PolicyConfig()
    index = index if index is not None else PrefixIndex()
    cost = Cost(config, index)
    policies: dict[str, Policy] = {
        "cost": cost,
        "round_robin": RoundRobin(config),
        "random": Random(config),
        "least_request": LeastRequest(config),
        "power_of_two": PowerOfTwo(config),
        "least_waiting": LeastWaiting(config),
        "kv_aware": KvAware(config),
        "prefix_affinity": PrefixAffinity(config, index),
        "session": Session(config, fallback=cost),
    }
    policies["default"] = policies[DEFAULT_POLICY]
    return policies
