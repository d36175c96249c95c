"""The engines' side of ``bench freshness``: simulated engines publishing, own process.

``publisher_main`` runs in a spawned child, as engines would run apart from the router:
``engines`` simulated engines, one ``Publisher`` (one NATS connection, one sender
thread) per ``CHANNELS_PER_CONNECTION`` of them, each engine offering a sample at
``step_hz`` with its own phase (engine i at i/engines of the period), so steps are spread
evenly in time as independent engines' would be. ``Channel.offer`` is what the vLLM
plugin calls from ``record()``. When the loop falls behind, it reports how late steps
were rather than bunching them up.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from eagle_eye.bench.routing.metrics import quantile
from eagle_eye.settings import NatsSettings

if TYPE_CHECKING:
    from eagle_eye.publish.channel import Channel
    from eagle_eye.publish.publisher import Publisher

CHANNELS_PER_CONNECTION: Final = 64
LATENESS_SAMPLES_MAX: Final = 100_000
"""Step lateness values kept for the p99 (memory stays bounded on long runs)."""
KV_CAPACITY_TOKENS: Final = 430_000
"""The KV cache size every simulated engine advertises, tokens."""


def _connect(nats_url: str, engines: int) -> list[Publisher]:
    """One connected ``Publisher`` per ``CHANNELS_PER_CONNECTION`` engines."""
    from eagle_eye.publish.publisher import Publisher

    settings = NatsSettings(servers=(nats_url,))
    n_conn = max(1, -(-engines // CHANNELS_PER_CONNECTION))
    publishers = [
        Publisher(settings, heartbeat_s=1.0, client_name=f"bench-pub-{i}") for i in range(n_conn)
    ]
    for p in publishers:
        p.wait_connected(10.0)
    return publishers


def _channels(publishers: Sequence[Publisher], engines: int) -> list[Channel]:
    """One channel per simulated engine, spread round-robin over the connections."""
    from eagle_eye.publish.channel import InstanceIdentity

    return [
        publishers[i % len(publishers)].channel(
            InstanceIdentity(
                instance_id=f"sim-{i}",
                model="bench",
                engine="sim",
                endpoint=f"http://127.0.0.1:{10000 + i}",
                kv_capacity_tokens=KV_CAPACITY_TOKENS,
            )
        )
        for i in range(engines)
    ]


def _offer_steps(
    channels: Sequence[Channel], step_hz: float, duration_s: float
) -> tuple[int, list[float]]:
    """Each channel offers a random sample once per step for ``duration_s``; returns the
    samples offered and how late each step was (seconds, at most
    ``LATENESS_SAMPLES_MAX``)."""
    from eagle_eye.publish.channel import Sample

    engines = len(channels)
    period = 1.0 / step_hz
    # Engine i steps at phase i/engines of the period: independent engines, even spread.
    next_due = [time.monotonic() + period * i / engines for i in range(engines)]
    steps = [0] * engines
    offered = 0
    lateness: list[float] = []
    end = time.monotonic() + duration_s
    rng = random.Random(0)
    while True:
        now = time.monotonic()
        if now >= end:
            break
        soonest = min(next_due)
        if soonest > now:
            time.sleep(min(soonest - now, 0.001))
            continue
        for i in range(engines):
            due = next_due[i]
            if due <= now:
                steps[i] += 1
                channels[i].offer(
                    Sample(
                        running=rng.randrange(64),
                        waiting=rng.randrange(8),
                        kv_usage=rng.random(),
                        step=steps[i],
                        monotonic_s=time.monotonic(),
                    )
                )
                offered += 1
                if len(lateness) < LATENESS_SAMPLES_MAX:
                    lateness.append(now - due)
                next_due[i] = due + period if now - due < period else now + period
    return offered, lateness


def publisher_main(
    nats_url: str, engines: int, step_hz: float, duration_s: float, out: Any
) -> None:
    """Child process: ``engines`` simulated engines offering a sample per step; puts the
    publishers' totals on ``out`` (a multiprocessing queue) when done."""
    publishers = _connect(nats_url, engines)
    offered, lateness = _offer_steps(_channels(publishers, engines), step_hz, duration_s)
    stats = [
        {"sent": p.stats.sent, "coalesced": p.stats.coalesced, "dropped": p.stats.dropped}
        for p in publishers
    ]
    for p in publishers:
        p.close(timeout_s=2.0)
    out.put(
        {
            "offered": offered,
            "sent": sum(s["sent"] for s in stats),
            "coalesced": sum(s["coalesced"] for s in stats),
            "dropped": sum(s["dropped"] for s in stats),
            "step_lateness_ms_p99": round(1000 * (quantile(lateness, 0.99) or 0.0), 3),
        }
    )
