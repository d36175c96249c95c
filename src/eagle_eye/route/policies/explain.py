"""Why a policy chose the target it chose: the score terms of the candidates, for traces.

``explain_pick`` runs after ``Policy.pick`` and before the dispatch core's accounting, on
the same candidates, and recomputes each scorer's term (``weight x score``, the amount
it added to the sum the picker minimised) without drawing from the router's random
generator and without touching any state, so explaining a pick never changes the next
one. It costs microseconds per candidate, which is why the dispatch core calls it only
for requests a trace samples (``RequestContext.detail``).

What it cannot replay it says so: a ``sample`` filter (power of d choices in large
fleets) drew its subset at random, so the table then lists the chosen target and the
other candidates in fleet order, marked ``partial``; round-robin, uniform and
consistent-hash pickers have no scores (``picker`` names them, ``terms`` is empty).
"""

from __future__ import annotations

import math
import random
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from eagle_eye.fleet.target import Target
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.policies.base import PickContext, Policy, Scorer
from eagle_eye.route.policies.cost import Cost, cost_profile
from eagle_eye.route.policies.filters import Sample
from eagle_eye.route.policies.pickers import ArgMin, ConsistentHash, RoundRobin, Uniform
from eagle_eye.route.policies.profiles import Profile
from eagle_eye.route.policies.scorers import (
    Inflight,
    Kv,
    KvFull,
    Load,
    NewPrefill,
    PendingPrefill,
    PrefixDepth,
    Queue,
    Running,
)

DEFAULT_ROWS: Final = 8
"""Candidates listed per decision: enough to compare, small enough for a span event."""

TERM_NAMES: Final[dict[type, str]] = {
    Queue: "queue",
    Running: "running",
    Load: "load",
    Inflight: "inflight",
    Kv: "kv",
    KvFull: "kv_full",
    NewPrefill: "new_prefill",
    PendingPrefill: "pending_prefill",
    PrefixDepth: "prefix_depth",
}
"""Scorer class -> its name in profiles (``spec.py``) and in traces."""

PICKER_NAMES: Final[dict[type, str]] = {
    ArgMin: "argmin",
    RoundRobin: "round_robin",
    Uniform: "random",
    ConsistentHash: "consistent_hash",
}

_NO_RANDOMNESS: Final = random.Random(0)
"""Handed to filters that are replayed; the ``sample`` filter (the only one that draws)
is never replayed, so nothing ever draws from it."""

_COST_PROFILES: weakref.WeakKeyDictionary[Cost, Profile] = weakref.WeakKeyDictionary()
"""The fused ``cost`` policy explained through its pipeline twin (built once each)."""


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One candidate's score: the total the picker saw and the terms that made it."""

    url: str
    total: float
    terms: tuple[float, ...]
    """``weight x score`` per term, aligned with ``Decision.terms``."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One routing decision, as a trace records it."""

    policy: str
    picker: str
    """``argmin``, ``round_robin``, ``random``, ``consistent_hash``."""
    candidates: int
    """Targets the policy chose among (after the dispatcher's limits and retries)."""
    chosen: str
    terms: tuple[str, ...]
    """Names of the score terms (``queue``, ``new_prefill``, ...); empty: no scores."""
    rows: tuple[ScoreRow, ...]
    """Lowest total first (the chosen target first among equals), at most ``DEFAULT_ROWS``,
    the chosen target always among them."""
    partial: bool
    """The scores of some candidates are not listed (a large fleet, or sampling)."""

    def row(self, url: str) -> ScoreRow | None:
        return next((r for r in self.rows if r.url == url), None)


def explain_pick(
    policy: Policy,
    request: RequestFeatures,
    candidates: Sequence[Target],
    chosen: Target,
    *,
    max_rows: int = DEFAULT_ROWS,
) -> Decision:
    """Explain ``policy.pick(request, candidates, rng) -> chosen`` (see the module doc)."""
    profile, picker = _pipeline(policy, request)
    if profile is None or not profile.scorers:
        return Decision(policy.name, picker, len(candidates), chosen.url, (), (), False)
    ctx = PickContext(request, _NO_RANDOMNESS, profile.index)
    pool: Sequence[Target] = candidates
    sampled = False
    for f in profile.filters:
        if isinstance(f, Sample):
            sampled = sampled or len(pool) > f.config.above
            continue
        pool = f.filter(ctx, pool)
    if sampled:
        # The real pick scored a random subset; list the chosen and the first others.
        others = [t for t in pool if t is not chosen][: max_rows - 1]
        pool = [chosen, *others]
    ctx.pool = pool
    scorers = profile.scorers
    rows = [_row(ctx, t, scorers) for t in pool]
    if all(r.url != chosen.url for r in rows):  # a gate left it out: still show it
        rows.append(_row(ctx, chosen, scorers))
    rows.sort(key=lambda r: (_total(r), r.url != chosen.url, r.url))  # chosen first in ties
    listed = rows[:max_rows]
    if all(r.url != chosen.url for r in listed):
        listed[-1] = next(r for r in rows if r.url == chosen.url)
    return Decision(
        policy=policy.name,
        picker=picker,
        candidates=len(candidates),
        chosen=chosen.url,
        terms=tuple(TERM_NAMES.get(type(s), type(s).__name__.lower()) for _, s in scorers),
        rows=tuple(listed),
        partial=sampled or len(rows) > len(listed),
    )


def _pipeline(policy: Policy, request: RequestFeatures) -> tuple[Profile | None, str]:
    """The pipeline that made the pick and its picker's name."""
    if isinstance(policy, Cost):
        profile = _COST_PROFILES.get(policy)
        if profile is None:
            profile = _COST_PROFILES[policy] = cost_profile(policy.config, policy.index)
        return profile, "argmin"
    if not isinstance(policy, Profile):
        return None, "custom"
    picker = policy.picker
    if isinstance(picker, ConsistentHash):
        if request.session_key is None:  # no key: the fallback policy decided
            inner, name = _pipeline(picker.fallback, request)
            return inner, f"consistent_hash>{name}"
        return None, "consistent_hash"
    return policy, PICKER_NAMES.get(type(picker), type(picker).__name__.lower())


def _row(ctx: PickContext, t: Target, scorers: Sequence[tuple[float, Scorer]]) -> ScoreRow:
    terms = tuple(weight * scorer.score(ctx, t) for weight, scorer in scorers)
    return ScoreRow(t.url, sum(terms), terms)


def _total(row: ScoreRow) -> float:
    return math.inf if math.isnan(row.total) else row.total
