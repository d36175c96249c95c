"""The exporter's pure core: a FleetView in, eagle_eye_* families out."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.exporter.families import (
    ExporterMemory,
    FleetCollector,
    IngestCounts,
    fleet_families,
    new_registry,
)
from eagle_eye.snapshot import EngineState, Snapshot, encode


def _snap(instance: str, seq: int, **kw: object) -> Snapshot:
    base: dict[str, object] = {
        "instance_id": instance,
        "model": "llama",
        "engine": "vllm",
        "seq": seq,
        "timestamp_s": 1_700_000_000.0 + seq,
        "endpoint": f"http://{instance}:8000",
    }
    base.update(kw)
    return Snapshot(**base)  # type: ignore[arg-type]


def _samples(registry_text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(registry_text.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def test_each_instance_becomes_labelled_series_with_its_snapshot_age() -> None:
    fleet = FleetView()
    memory = ExporterMemory()
    snap = _snap("a", 1, running=3, waiting=2, kv_usage=0.5, preemptions_total=7)
    assert fleet.ingest(encode(snap), now_mono_s=100.0) is not None
    memory.observe(snap, 100.0)
    registry = new_registry([FleetCollector(fleet, memory, clock=lambda: 102.5)])
    samples = _samples(generate_latest(registry))
    labels = {"instance_id": "a", "dp_rank": "0", "model_name": "llama", "engine_kind": "vllm"}
    assert samples[_key("eagle_eye_requests_running", **labels)] == 3
    assert samples[_key("eagle_eye_requests_waiting", **labels)] == 2
    assert samples[_key("eagle_eye_kv_cache_usage_ratio", **labels)] == 0.5
    assert samples[_key("eagle_eye_preemptions_total", **labels)] == 7
    assert samples[_key("eagle_eye_snapshot_age_seconds", **labels)] == 2.5
    assert samples[_key("eagle_eye_instance_state", **labels, state="ready")] == 1
    assert samples[_key("eagle_eye_instance_state", **labels, state="loading")] == 0
    assert samples[_key("eagle_eye_model_ready_instances", model_name="llama")] == 1
    # Unknown optional fields are left out, not exported as 0.
    assert _key("eagle_eye_ttft_recent_seconds", **labels) not in samples


def test_a_model_whose_last_instance_went_stale_reads_zero_ready() -> None:
    fleet = FleetView()
    memory = ExporterMemory()
    snap = _snap("a", 1)
    fleet.ingest(encode(snap), now_mono_s=0.0)
    memory.observe(snap, 0.0)
    counts = IngestCounts(1, 0, 0, nats_connected=True)
    fams = fleet_families(
        fleet.instances(60.0), memory=memory, now_mono_s=60.0, counts=counts, stale_after_s=5.0
    )
    ready = next(f for f in fams if f.name == "eagle_eye_model_ready_instances")
    assert [(s.labels, s.value) for s in ready.samples] == [({"model_name": "llama"}, 0.0)]
    # Even once the fleet view forgets the instance, the model stays known at 0.
    fams = fleet_families([], memory=memory, now_mono_s=600.0, counts=counts)
    ready = next(f for f in fams if f.name == "eagle_eye_model_ready_instances")
    assert [s.value for s in ready.samples] == [0.0]


def test_loading_time_counts_from_the_first_loading_snapshot() -> None:
    fleet = FleetView()
    memory = ExporterMemory()
    for seq, now in ((1, 10.0), (2, 20.0)):
        snap = _snap("b", seq, state=EngineState.LOADING)
        fleet.ingest(encode(snap), now_mono_s=now)
        memory.observe(snap, now)
    counts = IngestCounts(2, 0, 0, nats_connected=False)
    fams = fleet_families(fleet.instances(70.0), memory=memory, now_mono_s=70.0, counts=counts)
    loading = next(f for f in fams if f.name == "eagle_eye_instance_loading_seconds")
    assert [s.value for s in loading.samples] == [60.0]
    connected = next(f for f in fams if f.name == "eagle_eye_exporter_nats_connected")
    assert connected.samples[0].value == 0.0
    ready = _snap("b", 3)
    fleet.ingest(encode(ready), now_mono_s=80.0)
    memory.observe(ready, 80.0)
    fams = fleet_families(fleet.instances(81.0), memory=memory, now_mono_s=81.0, counts=counts)
    loading = next(f for f in fams if f.name == "eagle_eye_instance_loading_seconds")
    assert loading.samples == []


def test_ingest_outcomes_are_counted() -> None:
    fleet = FleetView()
    fleet.ingest(b"not json", now_mono_s=0.0)
    fleet.ingest(encode(_snap("a", 2)), now_mono_s=0.0)
    fleet.ingest(encode(_snap("a", 2)), now_mono_s=0.0)
    registry = new_registry([FleetCollector(fleet, ExporterMemory(), clock=lambda: 1.0)])
    samples = _samples(generate_latest(registry))
    assert samples[_key("eagle_eye_exporter_snapshots_total", outcome="accepted")] == 1
    assert samples[_key("eagle_eye_exporter_snapshots_total", outcome="malformed")] == 1
    assert samples[_key("eagle_eye_exporter_snapshots_total", outcome="out_of_order")] == 1
