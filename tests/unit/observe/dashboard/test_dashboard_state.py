"""The dashboard's pure model: rows, totals, rates, percentiles and history."""

from __future__ import annotations

from eagle_eye.fleet.stats import RouterStatsRecorder
from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.dashboard.state import DashboardConfig, DashboardState, History
from eagle_eye.snapshot import EngineState, Snapshot

T0 = 1_800_000_000.0


def snap(instance: str, seq: int, **fields: object) -> Snapshot:
    base: dict[str, object] = {
        "instance_id": instance,
        "model": "m",
        "engine": "sim",
        "seq": seq,
        "timestamp_s": T0 + seq,
        "endpoint": f"http://127.0.0.1:{9000 + int(instance[-1])}",
    }
    base.update(fields)
    return Snapshot(**base)  # type: ignore[arg-type]


def make_state(**config: float) -> tuple[FleetView, RouterStatsRecorder, DashboardState]:
    fleet = FleetView()
    router = RouterStatsRecorder(policy="kv_aware")
    cfg = DashboardConfig(**config) if config else DashboardConfig()
    return fleet, router, DashboardState(fleet, router=router, config=cfg)


def test_a_row_per_rank_sorted_by_instance_with_snapshot_fields_and_age() -> None:
    fleet, _, state = make_state()
    fleet.apply(snap("e1", 1, running=3, waiting=2, kv_usage=0.5), now_mono_s=10.0)
    fleet.apply(snap("e0", 1, running=1, kv_usage=0.25, dp_rank=1), now_mono_s=10.5)
    frame = state.sample(11.0, T0)
    assert [r.key for r in frame.instances] == ["e0/dp1", "e1"]
    e1 = frame.instances[1]
    assert (e1.running, e1.waiting, e1.kv_usage, e1.state) == (3, 2, 0.5, "ready")
    assert e1.age_s == 1.0
    assert frame.fleet.running == 4 and frame.fleet.waiting == 2
    assert frame.fleet.kv_usage == 0.375
    assert frame.fleet.by_state["ready"] == 2


def test_a_silent_instance_is_marked_stale_after_the_configured_age() -> None:
    fleet, _, state = make_state(stale_after_s=2.0)
    fleet.apply(snap("e0", 1), now_mono_s=0.0)
    assert not state.sample(1.0, T0).instances[0].stale
    assert state.sample(2.5, T0 + 1.5).instances[0].stale


def test_decisions_per_second_come_from_the_fleet_views_own_counters() -> None:
    fleet, _, state = make_state(tick_s=0.25, rate_window_s=2.0)
    fleet.apply(snap("e0", 1), now_mono_s=0.0)
    fleet.apply(snap("e1", 1), now_mono_s=0.0)
    state.sample(0.0, T0)
    target = fleet.target("http://127.0.0.1:9000")
    assert target is not None
    for _ in range(10):  # 10 decisions to e0 over 2 s: 5 per second
        fleet.on_sent(target)
    frame = state.sample(2.0, T0 + 2)
    rows = {r.key: r for r in frame.instances}
    assert rows["e0"].decisions_per_s == 5.0
    assert rows["e0"].inflight == 10
    assert rows["e1"].decisions_per_s == 0.0
    assert frame.fleet.decisions_per_s == 5.0


def test_router_rates_and_windowed_percentiles() -> None:
    _, router, state = make_state(tick_s=1.0, rate_window_s=2.0, latency_window_s=10.0)
    for _ in range(50):  # an old slow period that falls out of the latency window
        router.observe_request()
        router.observe_ttft(5.0)
        router.observe_duration(20.0)
    state.sample(0.0, T0)
    for t in range(1, 12):
        state.sample(float(t), T0 + t)
    for _ in range(20):
        router.observe_request()
        router.observe_ttft(0.05)
        router.observe_duration(1.0)
    router.observe_error("upstream_connect")
    router.observe_retry()
    router.observe_retry()
    frame = state.sample(12.0, T0 + 12)
    r = frame.router
    assert r is not None
    assert r.policy == "kv_aware"
    assert r.requests_per_s == 10.0  # 20 requests over the 2 s rate window
    assert r.retries_per_s == 1.0 and r.retries_total == 2
    assert r.errors_total == 1 and r.errors_by_kind == {"upstream_connect": 1}
    assert r.window_requests == 20
    p99 = r.ttft_s["p99"]
    assert p99 is not None and p99 < 0.07  # the old 5 s requests are out of the window
    assert frame.point["fleet.requests_per_s"] == 10.0


def test_prefix_hit_rate_is_taken_over_the_rate_window() -> None:
    fleet, _, state = make_state(tick_s=1.0, rate_window_s=1.0)
    fleet.apply(snap("e0", 1, prefix_cache_queries_total=1000, prefix_cache_hits_total=900), 0.0)
    first = state.sample(0.0, T0)
    assert first.instances[0].prefix_hit_rate == 0.9  # cumulative until a window exists
    fleet.apply(snap("e0", 2, prefix_cache_queries_total=1100, prefix_cache_hits_total=910), 1.0)
    assert state.sample(1.0, T0 + 1).instances[0].prefix_hit_rate == 0.1


def test_standalone_state_has_no_router_row_and_no_router_series() -> None:
    fleet = FleetView()
    state = DashboardState(fleet)
    fleet.apply(snap("e0", 1, state=EngineState.LOADING), 0.0)
    frame = state.sample(0.0, T0)
    assert frame.router is None
    assert "fleet.ttft_p50_s" not in frame.point
    assert frame.fleet.by_state["loading"] == 1
    assert frame.to_json()["router"] is None


def test_history_columns_stay_aligned_as_instances_come_and_go() -> None:
    history = History(max_points=3)
    history.append(1.0, {"a": 1.0})
    history.append(2.0, {"a": 2.0, "b": 5.0})
    assert history.to_json() == {"t": [1.0, 2.0], "series": {"a": [1.0, 2.0], "b": [None, 5.0]}}
    history.append(3.0, {"b": 6.0})
    history.append(4.0, {"b": 7.0})
    history.append(5.0, {"b": 8.0})
    # "a" has rolled out of the window entirely and is dropped.
    assert history.to_json() == {"t": [3.0, 4.0, 5.0], "series": {"b": [6.0, 7.0, 8.0]}}


def test_history_keeps_the_configured_number_of_points() -> None:
    fleet, _, state = make_state(tick_s=0.5, history_s=5.0)
    fleet.apply(snap("e0", 1, running=2), 0.0)
    for i in range(40):
        state.sample(i * 0.5, T0 + i * 0.5)
    data = state.history.to_json()
    assert len(data["t"]) == 10
    assert data["series"]["running@e0"] == [2] * 10
    assert all(len(col) == 10 for col in data["series"].values())
