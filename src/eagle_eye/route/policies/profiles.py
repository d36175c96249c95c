"""Profiles: named pipelines of filters, weighted scorers and a picker.

Every built-in policy except the fused default is a ``Profile`` subclass here; a user can
define more in configuration, without code (``profile_from_spec``)::

    profiles:
      queue-and-cache:
        filters: [{type: sample, above: 32, d: 4}]
        scorers:
          - {type: queue, weight: 1.0}
          - {type: new_prefill, weight: 0.002}
          - {type: kv, weight: 2.0}
        picker: {type: argmin}

Each plugin takes its own parameters (see ``PLUGINS``); unknown types or parameters are
one precise ``ProfileError``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from eagle_eye.fleet.target import Target
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.policies.base import (
    Filter,
    PickContext,
    Picker,
    Policy,
    Weighted,
    require,
)
from eagle_eye.route.policies.config import PolicyConfig
from eagle_eye.route.policies.filters import PrefixGate, PrefixGateConfig, Sample, SampleConfig
from eagle_eye.route.policies.pickers import (
    ArgMin,
    ConsistentHash,
    ConsistentHashConfig,
    Uniform,
)
from eagle_eye.route.policies.pickers import (
    RoundRobin as RoundRobinPicker,
)
from eagle_eye.route.policies.scorers import (
    Freshness,
    Inflight,
    Kv,
    KvFull,
    KvFullConfig,
    Load,
    PrefixDepth,
    Queue,
    Running,
)
from eagle_eye.route.prefix import PrefixIndex


class Profile:
    """``filters`` in order, then ``picker`` over the weighted ``scorers``."""

    def __init__(
        self,
        name: str,
        *,
        filters: Sequence[Filter] = (),
        scorers: Weighted = (),
        picker: Picker | None = None,
        index: PrefixIndex | None = None,
    ) -> None:
        self.name = name
        self.filters = tuple(filters)
        self.scorers = tuple(scorers)
        self.picker: Picker = picker if picker is not None else ArgMin()
        self.index = index
        """The prefix index prefix-aware plugins read (shared with the dispatch core)."""

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        require(candidates)
        ctx = PickContext(request, rng, self.index)
        pool = candidates
        for f in self.filters:
            pool = f.filter(ctx, pool)
        return self.picker.pick(ctx, pool, self.scorers)

    def __repr__(self) -> str:
        return f"Profile({self.name!r})"


def _sample(config: PolicyConfig, *, prefix_holders: bool = False) -> Sample:
    return Sample(
        SampleConfig(above=config.sample_above, d=config.sample_d, prefix_holders=prefix_holders)
    )


class RoundRobin(Profile):
    """Next candidate in turn."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__("round_robin", picker=RoundRobinPicker())


class Random(Profile):
    """Uniform."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__("random", picker=Uniform())


class LeastRequest(Profile):
    """Fewest requests in flight through this router."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        config = config or PolicyConfig()
        super().__init__("least_request", filters=[_sample(config)], scorers=[(1.0, Inflight())])


class PowerOfTwo(Profile):
    """``least_request`` over two random candidates."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(
            "power_of_two",
            filters=[Sample(SampleConfig(above=2, d=2, prefix_holders=False))],
            scorers=[(1.0, Inflight())],
        )


class LeastWaiting(Profile):
    """Fewest queued (snapshot waiting + sent since), then fewest running."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        config = config or PolicyConfig()
        fresh = Freshness(stale_after_s=config.stale_after_s)
        # Running breaks ties between equal queues (1e-3 per running request).
        super().__init__(
            "least_waiting",
            filters=[_sample(config)],
            scorers=[(1.0, Queue(fresh)), (1e-3, Running(fresh))],
        )


class KvAware(Profile):
    """Queue, decode load and KV pressure: an engine whose KV cache is (about to be) full
    gets nothing while any other engine has room."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        c = config or PolicyConfig()
        fresh = Freshness(stale_after_s=c.stale_after_s)
        full = KvFullConfig(stale_after_s=c.stale_after_s, full=c.kv_full)
        super().__init__(
            "kv_aware",
            filters=[_sample(c)],
            scorers=[
                (c.waiting_weight, Queue(fresh)),
                (c.running_weight, Running(fresh)),
                (c.kv_weight, Kv(fresh)),
                (c.kv_full_penalty, KvFull(full)),
            ],
        )


class PrefixAffinity(Profile):
    """The engine that most likely holds the prompt's prefix, gated by load: longest
    match first, then least loaded; the least loaded engine when no holder passes."""

    def __init__(self, config: PolicyConfig | None = None, index: PrefixIndex | None = None):
        c = config or PolicyConfig()
        gate = PrefixGateConfig(
            stale_after_s=c.stale_after_s,
            cache_threshold=c.cache_threshold,
            balance_abs=c.balance_abs,
            balance_rel=c.balance_rel,
        )
        super().__init__(
            "prefix_affinity",
            filters=[_sample(c, prefix_holders=True), PrefixGate(gate)],
            scorers=[
                (1e6, PrefixDepth()),
                (1.0, Load(Freshness(stale_after_s=c.stale_after_s))),
            ],
            index=index if index is not None else PrefixIndex(),
        )


class Session(Profile):
    """Consistent hashing of the session key (header ``x-session-id`` or the body's
    ``user``); requests without one go to ``fallback`` (the default policy)."""

    def __init__(self, config: PolicyConfig | None = None, fallback: Policy | None = None):
        c = config or PolicyConfig()
        if fallback is None:
            from eagle_eye.route.policies.cost import Cost

            fallback = Cost(c)
        self.fallback = fallback
        ring = ConsistentHash(ConsistentHashConfig(vnodes=c.session_vnodes), fallback)
        super().__init__("session", picker=ring)
