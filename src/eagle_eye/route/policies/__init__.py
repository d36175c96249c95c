"""Routing policies: pure functions of a request and the candidate targets.

A policy is anything with ``name`` and ``pick(request, candidates, rng) -> Target``;
``candidates`` is non-empty and already filtered (model, state, health, limits). Most
are ``Profile``s, pipelines of filters, weighted scorers and a picker (``base.py`` says
how the parts fit); the default, ``cost``, is the same kind of weighted sum fused into
one loop for speed (``cost.py``). Nothing here does I/O or reads a clock.

=================  =====================================================================
round_robin        next candidate in turn
random             uniform
least_request      fewest requests in flight through this router
power_of_two       least_request over two random candidates
least_waiting      fewest queued (snapshot waiting + sent since), then fewest running
kv_aware           queue + running + KV-cache pressure; a near-full KV cache is avoided
prefix_affinity    engine holding the longest prompt prefix, unless it is overloaded
session            consistent hash of the session key (falls back to ``cost``)
cost (default)     Dynamo-like: new prefill tokens after prefix overlap + pending prefill
                   + queue + decode load + KV pressure, argmin with random tie-break
=================  =====================================================================

Profiles defined in configuration (``spec.py``) join these under their own names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from eagle_eye.route.policies.base import (
    Policy,
    kv_pressure,
    load_estimate,
    new_prefill_tokens,
    queued_estimate,
)
from eagle_eye.route.policies.config import DEFAULT_POLICY, PolicyConfig
from eagle_eye.route.policies.cost import Cost, cost_profile
from eagle_eye.route.policies.profiles import (
    KvAware,
    LeastRequest,
    LeastWaiting,
    PowerOfTwo,
    PrefixAffinity,
    Profile,
    Random,
    RoundRobin,
    Session,
)
from eagle_eye.route.policies.spec import (
    PLUGINS,
    ProfileError,
    parse_profiles,
    profile_from_spec,
)
from eagle_eye.route.prefix import PrefixIndex

__all__ = [
    "DEFAULT_POLICY",
    "PLUGINS",
    "POLICY_NAMES",
    "Cost",
    "KvAware",
    "LeastRequest",
    "LeastWaiting",
    "Policy",
    "PolicyConfig",
    "PowerOfTwo",
    "PrefixAffinity",
    "Profile",
    "ProfileError",
    "Random",
    "RoundRobin",
    "Session",
    "cost_profile",
    "kv_pressure",
    "load_estimate",
    "make_policies",
    "new_prefill_tokens",
    "parse_profiles",
    "queued_estimate",
]

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
"""The built-in policies."""


def make_policies(
    config: PolicyConfig | None = None,
    index: PrefixIndex | None = None,
    profiles: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Policy]:
    """One instance of every built-in policy and of every profile in ``profiles``, all
    sharing ``index``; ``"default"`` is ``cost``. A profile may not reuse a built-in name
    (``ProfileError``)."""
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
    for name, spec in (profiles or {}).items():
        if name in policies or name == "default":
            raise ProfileError(f"profile {name!r}: the name of a built-in policy; rename it")
        policies[name] = profile_from_spec(name, spec, defaults=config, index=index, fallback=cost)
    policies["default"] = policies[DEFAULT_POLICY]
    return policies
