"""FleetView: newest snapshot per rank, aggregation per endpoint, accounting, health."""

from __future__ import annotations

from eagle_eye.fleet.target import Health
from eagle_eye.fleet.view import FleetView
from eagle_eye.snapshot import EngineState, Snapshot, encode


def snap(
    seq: int,
    *,
    instance: str = "a",
    endpoint: str | None = "http://a",
    ts: float = 1000.0,
    rank: int = 0,
    **kw: object,
) -> bytes:
    return encode(
        Snapshot(
            instance_id=instance,
            model=str(kw.pop("model", "m")),
            engine="sim",
            seq=seq,
            timestamp_s=ts + seq,
            endpoint=endpoint,
            dp_rank=rank,
            **kw,  # type: ignore[arg-type]
        )
    )


def test_malformed_messages_are_counted_and_never_raise() -> None:
    fleet = FleetView()
    for data in (b"", b"{", b"[]", b'{"v":"9.0"}', b"\xff\xfe", b'{"v":"1.0","seq":-1}'):
        assert fleet.ingest(data, 0.0) is None
    assert fleet.malformed == 6
    assert fleet.instances() == []


def test_keeps_newest_snapshot_by_seq_and_counts_out_of_order() -> None:
    fleet = FleetView()
    assert fleet.ingest(snap(2, running=2), 1.0) is not None
    assert fleet.ingest(snap(1, running=1, ts=900.0), 2.0) is None
    assert fleet.out_of_order == 1
    [info] = fleet.instances(3.0)
    assert info.snapshot.seq == 2
    assert info.received_mono_s == 1.0
    assert info.age_s == 2.0


def test_publisher_restart_seq_backwards_with_newer_timestamp_is_accepted() -> None:
    fleet = FleetView()
    restarted: list[str] = []
    fleet.on_restart = restarted.append
    fleet.ingest(snap(50, running=5), 1.0)
    assert fleet.ingest(snap(1, running=0, ts=2000.0), 2.0) is not None
    [target] = fleet.targets()
    assert target.running == 0
    assert fleet.restarts == 1 and restarted == ["http://a"]


def test_dp_ranks_sharing_an_endpoint_aggregate_into_one_target() -> None:
    fleet = FleetView()
    fleet.ingest(snap(1, rank=0, running=2, waiting=1, kv_usage=0.2), 1.0)
    fleet.ingest(snap(1, rank=1, running=3, waiting=4, kv_usage=0.4), 1.0)
    [target] = fleet.targets()
    assert (target.running, target.waiting) == (5, 5)
    assert target.kv_usage is not None and abs(target.kv_usage - 0.3) < 1e-9
    fleet.ingest(snap(2, rank=1, running=1, waiting=0, kv_usage=0.4), 2.0)
    assert (target.running, target.waiting) == (3, 1)
    assert len(fleet.instances()) == 2


def test_sent_since_snapshot_resets_on_each_snapshot_inflight_does_not() -> None:
    fleet = FleetView()
    fleet.ingest(snap(1), 1.0)
    [target] = fleet.candidates("m", 1.0)
    fleet.on_sent(target)
    fleet.on_sent(target)
    assert (target.inflight, target.sent_since_snapshot) == (2, 2)
    fleet.ingest(snap(2), 1.1)
    assert (target.inflight, target.sent_since_snapshot) == (2, 0)
    fleet.on_finished(target)
    assert target.inflight == 1


def test_candidates_filter_model_lora_and_lifecycle_state() -> None:
    fleet = FleetView()
    fleet.ingest(snap(1, instance="a", endpoint="http://a", lora_adapters=("sql",)), 1.0)
    fleet.ingest(snap(1, instance="b", endpoint="http://b", model="other"), 1.0)
    fleet.ingest(snap(1, instance="c", endpoint="http://c", state=EngineState.DRAINING), 1.0)
    fleet.ingest(snap(1, instance="d", endpoint="http://d", state=EngineState.LOADING), 1.0)
    assert [t.url for t in fleet.candidates("m", 1.0)] == ["http://a"]
    assert [t.url for t in fleet.candidates("sql", 1.0)] == ["http://a"]
    assert [t.url for t in fleet.candidates("other", 1.0)] == ["http://b"]
    assert fleet.candidates("nope", 1.0) == []
    assert fleet.knows_model("m") and not fleet.knows_model("nope")
    # A state change is seen by the cached candidate list.
    fleet.ingest(snap(2, instance="a", endpoint="http://a", state=EngineState.STOPPING), 2.0)
    assert fleet.candidates("m", 2.0) == []


def test_static_backend_serves_any_model_until_ejected_then_probes() -> None:
    fleet = FleetView(static_urls=["http://s/"], failures_to_eject=2, eject_s=5.0)
    [target] = fleet.candidates("anything", 0.0)
    assert target.url == "http://s" and target.static
    fleet.on_failure(target, 1.0)
    assert fleet.candidates("anything", 1.0) == [target]
    fleet.on_failure(target, 1.0)
    assert target.health is Health.EJECTED
    assert fleet.candidates("anything", 2.0) == []
    # Ejection expires: one probe goes through; a failure re-ejects at once.
    assert fleet.candidates("anything", 6.5) == [target]
    assert target.health is Health.PROBING
    fleet.on_failure(target, 6.5)
    assert fleet.candidates("anything", 7.0) == []
    assert fleet.candidates("anything", 12.0) == [target]
    fleet.on_success(target)
    assert target.health is Health.HEALTHY


def test_staleness_and_forgetting_silent_ranks() -> None:
    fleet = FleetView(stale_after_s=2.0)
    fleet.ingest(snap(1), 10.0)
    [target] = fleet.targets()
    assert target.fresh(11.0, 2.0) and not target.fresh(12.5, 2.0)
    assert fleet.forget_older_than(100.0, 60.0) == 1
    assert fleet.targets() == [] and len(fleet) == 0


def test_endpoint_change_moves_the_rank_to_the_new_target() -> None:
    fleet = FleetView()
    fleet.ingest(snap(1, endpoint="http://old", running=3), 1.0)
    fleet.ingest(snap(2, endpoint="http://new", running=1), 2.0)
    assert [t.url for t in fleet.targets()] == ["http://new"]
    assert fleet.targets()[0].running == 1


def test_snapshot_without_endpoint_is_listed_but_not_routable() -> None:
    fleet = FleetView()
    fleet.ingest(snap(1, endpoint=None), 1.0)
    assert len(fleet.instances()) == 1
    assert fleet.instances()[0].endpoint is None
    assert fleet.candidates("m", 1.0) == []
