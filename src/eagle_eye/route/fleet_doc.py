"""The router's ``/fleet`` document: every target and rank with its state, age and load.

Pure: built from the fleet view and a few router counters, so tests and tools read the
same structure the endpoint serves.
"""

from __future__ import annotations

from typing import Any

from eagle_eye.fleet.target import Target
from eagle_eye.fleet.view import FleetView
from eagle_eye.snapshot import to_dict


def target_row(t: Target, now_mono_s: float, stale_after_s: float) -> dict[str, Any]:
    """One target: what routing sees of it (snapshot load plus the router's accounting)."""
    return {
        "endpoint": t.url,
        "model": t.model,
        "lora_adapters": sorted(t.lora_adapters),
        "engine": t.engine,
        "state": t.state.value,
        "health": t.health.value,
        "static": t.static,
        "fresh": t.fresh(now_mono_s, stale_after_s),
        "snapshot_age_s": t.snapshot_age_s(now_mono_s),
        "running": t.running,
        "waiting": t.waiting,
        "kv_usage": t.kv_usage,
        "inflight": t.inflight,
        "sent_since_snapshot": t.sent_since_snapshot,
        "decisions_total": t.decisions_total,
        "consecutive_failures": t.consecutive_failures,
        "ranks": [dict(to_dict(r.snapshot), age_s=r.age_s(now_mono_s)) for r in t.ranks.values()],
    }


def fleet_document(
    fleet: FleetView,
    *,
    now_mono_s: float,
    policy: str,
    stale_after_s: float,
    nats_connected: bool | None,
    inflight_total: int,
) -> dict[str, Any]:
    """The whole ``/fleet`` answer."""
    return {
        "policy": policy,
        "stale_after_s": stale_after_s,
        "nats_connected": nats_connected,
        "snapshots": {
            "accepted": fleet.ingested,
            "malformed": fleet.malformed,
            "out_of_order": fleet.out_of_order,
        },
        "inflight_total": inflight_total,
        "instances": len(fleet),
        "targets": [target_row(t, now_mono_s, stale_after_s) for t in fleet.targets()],
    }
