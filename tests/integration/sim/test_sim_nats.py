"""Simulated engines publish through the real vLLM plugin class to a real nats-server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import nats

from eagle_eye import subjects
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from eagle_eye.snapshot import decode
from support import async_wait_for


async def test_snapshots_arrive_per_engine_with_live_queue_state(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    seen: list[dict[str, Any]] = []

    async def on_msg(msg: Any) -> None:
        decode(msg.data)  # valid wire format, or this raises
        seen.append(json.loads(msg.data))

    await nc.subscribe(subjects.ROUTING_METRICS, cb=on_msg)
    try:
        async with SimFleet(SimFleetConfig(engines=3, nats_url=nats_url, speedup=5.0)) as fleet:
            ids = {e.instance_id: e.url for e in fleet.engines}
            assert await async_wait_for(
                lambda: {m["instance_id"] for m in seen if m["state"] == "ready"} == set(ids), 5.0
            )
            async with aiohttp.ClientSession() as s:

                async def one(i: int) -> None:
                    body = {
                        "prompt": "shared system prompt " * 30 + str(i),
                        "max_tokens": 200,
                        "ignore_eos": True,
                    }
                    async with s.post(fleet.urls[0] + "/v1/completions", json=body) as r:
                        assert r.status == 200

                await asyncio.gather(*(one(i) for i in range(6)))
            assert await async_wait_for(
                lambda: any(m["instance_id"] == "sim-0" and m["running"] >= 2 for m in seen), 5.0
            )
            busy = [m for m in seen if m["instance_id"] == "sim-0" and m["running"] > 0]
            assert all(0 < m["kv_usage"] <= 1 for m in busy)
            last = [m for m in seen if m["instance_id"] == "sim-0"][-1]
            assert last["endpoint"] == ids["sim-0"]
            assert last["engine"] == "vllm"
            assert last["kv_capacity_tokens"] == 27_000 * 16
            assert await async_wait_for(
                lambda: (
                    [m for m in seen if m["instance_id"] == "sim-0"][-1].get(
                        "prefix_cache_hits_total", 0
                    )
                    > 0
                ),
                5.0,
            )
            fleet.engines[2].set_draining(True)
            assert await async_wait_for(
                lambda: any(m["instance_id"] == "sim-2" and m["state"] == "draining" for m in seen),
                5.0,
            )
        assert await async_wait_for(
            lambda: {m["instance_id"] for m in seen if m["state"] == "stopping"} == set(ids), 5.0
        )
    finally:
        await nc.close()
