"""`bench freshness` pieces run end to end on a real nats-server (no timing asserted)."""

from __future__ import annotations

import pytest

from eagle_eye.bench.freshness import measure_freshness, measure_ingest, measure_pick
from eagle_eye.bus.embedded import EmbeddedNats

pytestmark = pytest.mark.timeout(120)


async def test_every_publisher_becomes_visible_with_a_measured_latency(
    nats_server: EmbeddedNats,
) -> None:
    level = await measure_freshness(nats_server.url, 4, step_hz=20.0, duration_s=0.5, warmup_s=0.2)
    assert level["instances_seen"] == 4
    assert level["samples"] > 0
    assert 0 <= level["p50_ms"] <= level["p99_ms"] <= level["max_ms"]
    assert level["publisher"]["offered"] > 0 and level["publisher"]["sent"] > 0


def test_fleet_view_ingest_accepts_every_snapshot() -> None:
    result = measure_ingest(instances=50, per_instance=4)
    assert result["snapshots"] == result["accepted"] == 200
    assert result["snapshots_per_s"] > 0


def test_pick_is_measured_for_the_default_policy() -> None:
    result = measure_pick(instances=20, picks=50)
    assert result["instances"] == 20
    assert result["default"]["picks"] == 50
    assert 0 < result["default"]["pick_us_p50"] <= result["default"]["pick_us_p99"]
