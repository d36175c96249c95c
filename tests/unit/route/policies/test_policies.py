"""Policies are pure: fake-free tests over real Target objects built by a FleetView."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from eagle_eye.fleet.target import Target
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.features import RequestFeatures, request_features
from eagle_eye.route.policies import (
    POLICY_NAMES,
    Cost,
    KvAware,
    LeastRequest,
    LeastWaiting,
    PolicyConfig,
    PrefixAffinity,
    RoundRobin,
    Session,
    make_policies,
)
from eagle_eye.route.prefix import PrefixIndex, block_hashes
from eagle_eye.snapshot import Snapshot, encode

NOW = 100.0


def fleet_of(*loads: dict[str, float]) -> tuple[FleetView, list[Target]]:
    fleet = FleetView()
    for i, load in enumerate(loads):
        fleet.ingest(
            encode(
                Snapshot(
                    instance_id=f"e{i}",
                    model="m",
                    engine="sim",
                    seq=1,
                    timestamp_s=1.0,
                    endpoint=f"http://e{i}",
                    running=int(load.get("running", 0)),
                    waiting=int(load.get("waiting", 0)),
                    kv_usage=load.get("kv"),
                    kv_capacity_tokens=100_000,
                )
            ),
            NOW,
        )
    return fleet, fleet.candidates("m", NOW)


def req(**kw: object) -> RequestFeatures:
    return RequestFeatures(model="m", now_mono_s=NOW, **kw)  # type: ignore[arg-type]


def test_round_robin_cycles() -> None:
    _, c = fleet_of({}, {}, {})
    p = RoundRobin()
    rng = random.Random(0)
    assert [p.pick(req(), c, rng).url for _ in range(4)] == [
        "http://e0",
        "http://e1",
        "http://e2",
        "http://e0",
    ]


def test_least_request_uses_router_inflight_with_random_ties() -> None:
    fleet, c = fleet_of({}, {}, {})
    fleet.on_sent(c[0])
    picks = Counter(LeastRequest().pick(req(), c, random.Random(s)).url for s in range(50))
    assert "http://e0" not in picks and set(picks) == {"http://e1", "http://e2"}


def test_least_waiting_counts_requests_sent_since_the_snapshot() -> None:
    fleet, c = fleet_of({"waiting": 2}, {"waiting": 0})
    p = LeastWaiting()
    assert p.pick(req(), c, random.Random(0)).url == "http://e1"
    for _ in range(3):
        fleet.on_sent(c[1])
    assert p.pick(req(), c, random.Random(0)).url == "http://e0"


def test_stale_snapshots_fall_back_to_local_accounting() -> None:
    fleet, c = fleet_of({"waiting": 50}, {"waiting": 0})
    fleet.on_sent(c[1])
    later = RequestFeatures(model="m", now_mono_s=NOW + 10)
    # Stale: e0's 50 waiting no longer counts, e1 has one request in flight.
    assert LeastWaiting().pick(later, c, random.Random(0)).url == "http://e0"


def test_kv_aware_avoids_a_full_kv_cache_and_a_long_queue() -> None:
    _, c = fleet_of({"kv": 0.99}, {"waiting": 30, "kv": 0.1}, {"running": 4, "kv": 0.5})
    picks = {KvAware().pick(req(prompt_tokens=100), c, random.Random(s)).url for s in range(30)}
    assert picks == {"http://e2"}


def test_cost_prefers_the_prefix_holder_until_its_queue_outweighs_the_prefill() -> None:
    fleet, c = fleet_of({}, {})
    index = PrefixIndex()
    text = "system prompt " * 2000  # ~7k tokens
    hashes = block_hashes(text)
    index.insert(hashes, "http://e1")
    p = Cost(PolicyConfig(), index)
    r = req(prompt_tokens=len(text) // 4, prefix_hashes=hashes)
    assert p.pick(r, c, random.Random(0)).url == "http://e1"
    for _ in range(10):
        fleet.on_sent(c[1])
    assert p.pick(r, c, random.Random(0)).url == "http://e0"


def test_cost_avoids_an_engine_with_a_long_prompt_still_in_prefill() -> None:
    # Snapshots count requests, not tokens: both engines look alike, but the router sent
    # e0 a 60k-token prompt that has not produced a first token yet.
    fleet, c = fleet_of({"running": 1}, {"running": 1})
    p = Cost(PolicyConfig(), PrefixIndex())
    fleet.on_sent(c[0], prefill_tokens=60_000)
    fleet.on_sent(c[1], prefill_tokens=200)
    r = req(prompt_tokens=500)
    assert {p.pick(r, c, random.Random(s)).url for s in range(20)} == {"http://e1"}
    fleet.on_first_token(c[0], 60_000)  # e0's prefill is done: it is no longer avoided
    assert c[0].pending_prefill_tokens == 0.0
    assert "http://e0" in {p.pick(r, c, random.Random(s)).url for s in range(40)}


def test_first_token_never_releases_more_prefill_than_was_sent() -> None:
    fleet, c = fleet_of({})
    fleet.on_sent(c[0], prefill_tokens=100)
    fleet.on_first_token(c[0], 250)
    assert c[0].pending_prefill_tokens == 0.0


def test_prefix_affinity_is_gated_by_load_imbalance() -> None:
    fleet, c = fleet_of({}, {}, {})
    index = PrefixIndex()
    p = PrefixAffinity(PolicyConfig(balance_abs=2, balance_rel=1.5), index)
    hashes = block_hashes("shared system prompt. " * 100)
    r = req(prompt_tokens=500, prefix_hashes=hashes)
    first = p.pick(r, c, random.Random(0))
    index.insert(hashes, first.url)
    fleet.on_sent(first)
    fleet.on_sent(first)
    assert p.pick(r, c, random.Random(1)) is first  # load 2 <= 0 + 2
    fleet.on_sent(first)
    assert p.pick(r, c, random.Random(1)) is not first  # overloaded: idlest instead


def test_session_is_sticky_and_moves_few_keys_when_an_engine_leaves() -> None:
    _, c = fleet_of({}, {}, {}, {})
    p = Session()
    rng = random.Random(0)
    keys = [f"user-{i}" for i in range(400)]
    before = {k: p.pick(req(session_key=k), c, rng).url for k in keys}
    assert before == {k: p.pick(req(session_key=k), c, rng).url for k in keys}
    assert len(set(before.values())) == 4
    after = {k: p.pick(req(session_key=k), c[:3], rng).url for k in keys}
    moved = sum(1 for k in keys if before[k] != after[k])
    assert moved == sum(1 for k in keys if before[k] == "http://e3")


def test_every_named_policy_picks_a_candidate_and_large_fleets_are_sampled() -> None:
    loads = [{"running": i % 7, "waiting": i % 3} for i in range(1000)]
    _, c = fleet_of(*loads)
    policies = make_policies()
    assert set(POLICY_NAMES) <= set(policies)
    rng = random.Random(0)
    for name in POLICY_NAMES:
        assert policies[name].pick(req(prompt_tokens=10), c, rng) in c, name


def test_pick_refuses_an_empty_candidate_list() -> None:
    with pytest.raises(ValueError):
        LeastRequest().pick(req(), [], random.Random(0))


def test_request_features_from_chat_and_completion_bodies() -> None:
    chat = {
        "messages": [{"role": "system", "content": "x" * 300}, {"role": "user", "content": "hi"}],
        "max_tokens": 5,
        "user": "alice",
    }
    f = request_features(chat, model="m", session_key=None, now_mono_s=1.0)
    assert f.max_tokens == 5 and f.session_key == "alice"
    assert f.prompt_tokens > 70 and len(f.prefix_hashes) == 2
    g = request_features({"prompt": "x" * 300}, model="m", session_key="s", now_mono_s=1.0)
    assert g.session_key == "s" and len(g.prefix_hashes) == 2
    assert g.prefix_hashes != f.prefix_hashes  # roles are part of the hashed text
