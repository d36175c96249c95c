"""The policy pipeline: the fused default equals its pipeline, and profiles from config."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle_eye.fleet.target import Target
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.policies import (
    PLUGINS,
    Cost,
    PolicyConfig,
    ProfileError,
    cost_profile,
    make_policies,
)
from eagle_eye.route.policies.base import PickContext
from eagle_eye.route.prefix import PrefixIndex, block_hashes
from eagle_eye.snapshot import Snapshot

NOW = 100.0
PROMPT = "You are a helpful assistant. " * 40


def _fleet(loads: list[tuple[int, int, float | None, int, int, bool]]) -> list[Target]:
    """Targets from (running, waiting, kv, inflight, sent_since, fresh) tuples."""
    fleet = FleetView()
    for i, (running, waiting, kv, _, _, fresh) in enumerate(loads):
        snap = Snapshot(
            instance_id=f"e{i}",
            model="m",
            engine="sim",
            seq=1,
            timestamp_s=1.0,
            endpoint=f"http://e{i}",
            running=running,
            waiting=waiting,
            kv_usage=kv,
            kv_capacity_tokens=50_000,
        )
        fleet.apply(snap, NOW if fresh else NOW - 60.0)
    targets = fleet.candidates("m", NOW)
    for t, (_, _, _, inflight, sent, _) in zip(targets, loads, strict=True):
        for _ in range(inflight):
            fleet.on_sent(t, prefill_tokens=137.0)
        t.sent_since_snapshot = sent
    return targets


_loads = st.lists(
    st.tuples(
        st.integers(0, 64),
        st.integers(0, 64),
        st.one_of(st.none(), st.floats(0.0, 1.0)),
        st.integers(0, 8),
        st.integers(0, 8),
        st.booleans(),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(
    loads=_loads,
    prompt_chars=st.integers(0, 3000),
    held_blocks=st.integers(0, 20),
    prompt_tokens=st.integers(0, 20_000),
    max_tokens=st.one_of(st.none(), st.integers(1, 4096)),
    seed=st.integers(0, 2**16),
    weights=st.tuples(*[st.floats(0.0, 10.0)] * 4),
)
def test_the_fused_default_equals_its_pipelines_weighted_sum(
    loads: list[tuple[int, int, float | None, int, int, bool]],
    prompt_chars: int,
    held_blocks: int,
    prompt_tokens: int,
    max_tokens: int | None,
    seed: int,
    weights: tuple[float, float, float, float],
) -> None:
    config = PolicyConfig(
        prefill_weight=weights[0],
        waiting_weight=weights[1],
        running_weight=weights[2],
        pending_prefill_weight=weights[3],
    )
    targets = _fleet(loads)
    index = PrefixIndex()
    hashes = block_hashes(PROMPT[:prompt_chars])
    for t in targets[: len(targets) // 2]:
        index.insert(hashes[:held_blocks], t.url)
    request = RequestFeatures(
        model="m",
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        prefix_hashes=hashes,
        now_mono_s=NOW,
    )
    fused: list[tuple[Target, float]] = []
    picked = Cost(config, index).pick_scored(request, targets, random.Random(seed), fused)
    profile = cost_profile(config, index)
    ctx = PickContext(request, random.Random(seed), index)
    pool = targets
    for f in profile.filters:
        pool = f.filter(ctx, pool)
    ctx.pool = pool
    assert [t for t, _ in fused] == list(pool)  # the same sample of a large fleet
    for t, score in fused:
        expected = sum(w * scorer.score(ctx, t) for w, scorer in profile.scorers)
        assert math.isclose(score, expected, rel_tol=1e-12, abs_tol=1e-12), (t, score, expected)
    # Same scores, same choice: where the best is clear of the rest, both pick it.
    ranked = sorted(fused, key=lambda ts: ts[1])
    if len(ranked) == 1 or ranked[1][1] - ranked[0][1] > 1e-6:
        assert profile.pick(request, targets, random.Random(seed)) is picked is ranked[0][0]


def test_a_profile_defined_in_configuration_routes_by_its_own_scorers() -> None:
    targets = _fleet([(0, 5, 0.1, 0, 0, True), (9, 0, 0.9, 0, 0, True)])
    profiles = {
        "least-kv": {
            "filters": [{"type": "sample", "above": 16, "d": 2}],
            "scorers": [{"type": "kv", "weight": 1.0}],
            "picker": {"type": "argmin"},
        },
        "least-queue": {"scorers": [{"type": "queue"}]},
    }
    policies = make_policies(PolicyConfig(), PrefixIndex(), profiles)
    request = RequestFeatures(model="m", prompt_tokens=10, now_mono_s=NOW)
    assert policies["least-kv"].pick(request, targets, random.Random(0)).url == "http://e0"
    assert policies["least-queue"].pick(request, targets, random.Random(0)).url == "http://e1"
    assert policies["least-kv"].name == "least-kv"


def test_a_consistent_hash_profile_falls_back_to_the_default_without_a_session_key() -> None:
    targets = _fleet([(0, 0, None, 0, 0, True)] * 4)
    profiles = {"sticky": {"picker": {"type": "consistent_hash", "vnodes": 8}}}
    policies = make_policies(PolicyConfig(), PrefixIndex(), profiles)
    keyed = RequestFeatures(model="m", session_key="alice", now_mono_s=NOW)
    chosen = {policies["sticky"].pick(keyed, targets, random.Random(s)).url for s in range(20)}
    assert len(chosen) == 1
    anonymous = RequestFeatures(model="m", now_mono_s=NOW)
    spread = {policies["sticky"].pick(anonymous, targets, random.Random(s)).url for s in range(40)}
    assert len(spread) > 1  # the default's random tie-break over equal engines


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"scorers": [{"type": "queu"}]}, "scorer 0: unknown type 'queu'; choose from"),
        ({"scorers": [{"type": "kv", "weight": "2"}]}, "'weight' must be a number"),
        ({"filters": [{"type": "sample", "d": 0}]}, "d must be at least 1"),
        ({"filters": [{"type": "sample", "k": 3}]}, "unknown parameter(s) k (allowed:"),
        ({"filters": [{"type": "sample", "above": -1}]}, "'above' must be int"),
        ({"picker": {"type": "fastest"}}, "picker: unknown type 'fastest'"),
        ({"picker": {"type": "argmin", "x": 1}}, "unknown parameter(s) x (allowed: none)"),
        ({"scorer": []}, "unknown parameter(s) scorer"),
        ({"scorers": {"type": "kv"}}, "'scorers' must be a list"),
        ({"scorers": ["kv"]}, "expected a mapping like {type: ..., ...}"),
        ([], "expected a mapping with filters, scorers and picker"),
    ],
)
def test_a_bad_profile_is_one_precise_error(spec: object, message: str) -> None:
    with pytest.raises(ProfileError) as err:
        make_policies(PolicyConfig(), PrefixIndex(), {"mine": spec})  # type: ignore[dict-item]
    assert str(err.value).startswith("profile 'mine'")
    assert message in str(err.value)


def test_a_profile_may_not_shadow_a_built_in_policy() -> None:
    with pytest.raises(ProfileError, match="the name of a built-in policy"):
        make_policies(PolicyConfig(), PrefixIndex(), {"cost": {"scorers": []}})


def test_every_plugin_named_in_the_registry_builds() -> None:
    profiles = {f"only-{kind}": {"scorers": [{"type": kind}]} for kind in PLUGINS["scorers"]} | {
        f"filter-{kind}": {"filters": [{"type": kind}]} for kind in PLUGINS["filters"]
    }
    profiles |= {f"picker-{kind}": {"picker": {"type": kind}} for kind in PLUGINS["pickers"]}
    policies = make_policies(PolicyConfig(), PrefixIndex(), profiles)
    targets = _fleet([(1, 2, 0.5, 1, 0, True), (0, 0, None, 0, 0, False)])
    request = RequestFeatures(model="m", prompt_tokens=50, now_mono_s=NOW)
    for name in profiles:
        assert policies[name].pick(request, targets, random.Random(1)) in targets, name
