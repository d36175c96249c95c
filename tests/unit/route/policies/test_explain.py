"""Explaining a pick: the terms the picker summed, without disturbing the next pick."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle_eye.fleet.target import Target
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.policies import Cost, PolicyConfig, make_policies
from eagle_eye.route.policies.explain import explain_pick
from eagle_eye.route.prefix import PrefixIndex, block_hashes
from eagle_eye.snapshot import Snapshot

NOW = 100.0
COST_TERMS = ("new_prefill", "pending_prefill", "queue", "running", "kv", "kv_full")


def fleet_of(waiting: list[int], running: list[int] | None = None) -> list[Target]:
    fleet = FleetView()
    for i, w in enumerate(waiting):
        fleet.apply(
            Snapshot(
                instance_id=f"e{i}",
                model="m",
                engine="sim",
                seq=1,
                timestamp_s=1.0,
                endpoint=f"http://e{i}",
                waiting=w,
                running=(running or [0] * len(waiting))[i],
                kv_usage=0.1,
                kv_capacity_tokens=10_000,
            ),
            NOW,
        )
    return fleet.candidates("m", NOW)


def request(prompt: str = "hello " * 50, session: str | None = None) -> RequestFeatures:
    return RequestFeatures(
        model="m",
        prompt_tokens=len(prompt) // 4,
        prefix_hashes=block_hashes(prompt),
        session_key=session,
        now_mono_s=NOW,
    )


def test_the_default_policy_is_explained_term_by_term() -> None:
    targets = fleet_of([3, 0, 1], running=[2, 5, 0])
    policy = Cost(PolicyConfig(), PrefixIndex())
    req = request()
    chosen = policy.pick(req, targets, random.Random(0))
    fused: list[tuple[Target, float]] = []
    policy.pick_scored(req, targets, random.Random(0), fused)
    decision = explain_pick(policy, req, targets, chosen)
    assert decision.policy == "cost" and decision.picker == "argmin"
    assert decision.terms == COST_TERMS
    assert decision.candidates == 3 and not decision.partial
    assert decision.rows[0].url == chosen.url  # lowest first
    for target, score in fused:
        row = decision.row(target.url)
        assert row is not None
        assert row.total == pytest.approx(score)
        assert row.total == pytest.approx(sum(row.terms))
    totals = [r.total for r in decision.rows]
    assert totals == sorted(totals)
    queue = decision.terms.index("queue")
    assert [r.terms[queue] for r in sorted(decision.rows, key=lambda r: r.url)] == [3.0, 0.0, 1.0]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=12), st.integers(0, 2**32))
def test_explaining_never_changes_what_the_router_picks_next(waiting: list[int], seed: int) -> None:
    targets = fleet_of(waiting)
    policies = make_policies(PolicyConfig(sample_above=4, sample_d=2), PrefixIndex())
    for name in ("cost", "round_robin", "random", "least_waiting", "power_of_two", "kv_aware"):
        plain, explained = random.Random(seed), random.Random(seed)
        a = [policies[name].pick(request(), targets, plain).url for _ in range(3)]
        policies_b = make_policies(PolicyConfig(sample_above=4, sample_d=2), PrefixIndex())
        b = []
        for _ in range(3):
            chosen = policies_b[name].pick(request(), targets, explained)
            explain_pick(policies_b[name], request(), targets, chosen)
            b.append(chosen.url)
        assert a == b, name
        assert plain.random() == explained.random()


def test_a_sampled_large_fleet_is_marked_partial_and_keeps_the_chosen() -> None:
    targets = fleet_of(list(range(20)))
    policy = Cost(PolicyConfig(sample_above=8, sample_d=3), PrefixIndex())
    chosen = policy.pick(request(), targets, random.Random(1))
    decision = explain_pick(policy, request(), targets, chosen, max_rows=4)
    assert decision.partial and decision.candidates == 20
    assert len(decision.rows) <= 4 and decision.row(chosen.url) is not None


def test_a_long_candidate_list_is_cut_but_keeps_the_chosen() -> None:
    targets = fleet_of([0] * 3 + [9] * 10)
    policy = make_policies(PolicyConfig(), PrefixIndex())["least_waiting"]
    chosen = targets[-1]  # pretend the picker took an expensive one
    decision = explain_pick(policy, request(), targets, chosen, max_rows=4)
    assert len(decision.rows) == 4 and decision.partial
    assert decision.row(chosen.url) is not None


def test_pickers_without_scores_say_which_picker_decided() -> None:
    targets = fleet_of([0, 0])
    policies = make_policies(PolicyConfig(), PrefixIndex())
    rr = explain_pick(policies["round_robin"], request(), targets, targets[0])
    assert (rr.picker, rr.terms, rr.rows) == ("round_robin", (), ())
    hashed = explain_pick(policies["session"], request(session="u1"), targets, targets[1])
    assert hashed.picker == "consistent_hash" and hashed.terms == ()
    fallback = explain_pick(policies["session"], request(), targets, targets[1])
    assert fallback.picker == "consistent_hash>argmin" and fallback.terms == COST_TERMS


def test_prefix_affinity_shows_the_prefix_depth_it_followed() -> None:
    targets = fleet_of([0, 0, 0])
    index = PrefixIndex()
    policies = make_policies(PolicyConfig(), index)
    req = request("a long shared system prompt " * 30)
    index.insert(req.prefix_hashes, targets[2].url)
    chosen = policies["prefix_affinity"].pick(req, targets, random.Random(0))
    assert chosen is targets[2]
    decision = explain_pick(policies["prefix_affinity"], req, targets, chosen)
    assert decision.terms == ("prefix_depth", "load")
    row = decision.row(chosen.url)
    assert row is not None and row.terms[0] < 0  # minus the blocks held, weighted
