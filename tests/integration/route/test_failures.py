"""Failures: NATS outage, an engine dying mid-stream, unreachable backends."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from route_helpers import MODEL, chat, running_router, wait_for_fleet

from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.fleet.target import Health
from eagle_eye.route.policies import PolicyConfig
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from support import async_wait_for, free_tcp_port


async def test_nats_outage_keeps_routing_on_local_accounting_and_recovers(
    nats_server: EmbeddedNats,
) -> None:
    url = nats_server.url
    config = SimFleetConfig(engines=2, nats_url=url, heartbeat_s=0.2)
    async with (
        SimFleet(config),
        running_router(url, policy_config=PolicyConfig(stale_after_s=0.5)) as router,
        aiohttp.ClientSession() as session,
    ):
        await wait_for_fleet(router, 2)
        subscriber = router.subscriber
        assert subscriber is not None
        nats_server.stop()
        assert await async_wait_for(lambda: not subscriber.connected, 5.0)
        # Snapshots go stale: routing falls back to the router's own in-flight counts.
        assert await async_wait_for(
            lambda: not any(t.fresh(time.monotonic(), 0.5) for t in router.fleet.targets()),
            5.0,
        )
        results = await asyncio.gather(*(chat(session, router, f"o{i}") for i in range(10)))
        assert [s for s, _, _ in results] == [200] * 10
        assert len({b for _, b, _ in results}) == 2  # local accounting still spreads load
        nats_server.start()  # same port
        assert await async_wait_for(lambda: subscriber.connected, 10.0)
        await wait_for_fleet(router, 2, timeout_s=5.0)
        async with session.get(router.url + "/fleet") as resp:
            doc = await resp.json()
        assert doc["nats_connected"] is True and all(t["fresh"] for t in doc["targets"])


async def test_engine_killed_mid_stream_ends_the_stream_with_an_error_not_a_hang(
    nats_url: str,
) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=2, nats_url=nats_url, profile="tiny-cpu")) as fleet,
        running_router(nats_url) as router,
    ):
        await wait_for_fleet(router, 2)
        client = openai.AsyncOpenAI(base_url=router.url + "/v1", api_key="none", max_retries=0)
        try:
            stream = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "tell me a long story"}],
                max_tokens=500,
                stream=True,
                extra_body={"ignore_eos": True},
            )
            received = 0
            with pytest.raises(openai.APIError) as info:
                async with asyncio.timeout(10):
                    async for _chunk in stream:
                        received += 1
                        if received == 3:
                            serving = next(t for t in router.fleet.targets() if t.inflight)
                            victim = next(e for e in fleet.engines if e.url == serving.url)
                            await victim.kill()
            assert "mid-stream" in str(info.value)
            assert received >= 3
            # The next requests go to the survivor.
            for _ in range(3):
                reply = await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2
                )
                assert reply.choices[0].message.content
        finally:
            await client.close()
        async with aiohttp.ClientSession() as session, session.get(router.url + "/metrics") as r:
            assert 'kind="midstream"' in await r.text()


async def test_connect_errors_are_retried_on_another_instance_and_the_dead_one_ejected(
    nats_url: str,
) -> None:
    dead = f"http://127.0.0.1:{free_tcp_port()}"
    async with (
        SimFleet(SimFleetConfig(engines=1, nats_url=nats_url)),
        running_router(nats_url, backends=(dead,), policy="round_robin", eject_s=60.0) as router,
        aiohttp.ClientSession() as session,
    ):
        assert await async_wait_for(
            lambda: len(router.fleet.candidates(MODEL, time.monotonic())) == 2, 5.0
        )
        results = [await chat(session, router, f"r{i}") for i in range(8)]
        assert [s for s, _, _ in results] == [200] * 8
        dead_target = router.fleet.target(dead)
        assert dead_target is not None and dead_target.health is Health.EJECTED
        async with session.get(router.url + "/metrics") as resp:
            text = await resp.text()
        samples = {
            (s.name, s.labels.get("kind")): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        retries = samples[("eagle_eye_router_retries_total", None)]
        # Every request that hit the dead backend was retried, until it was ejected after
        # 3 consecutive failures (the start-up probe of its /v1/models may be one).
        assert 2 <= retries <= 3
        assert samples[("eagle_eye_router_upstream_errors_total", "connect")] == retries


async def test_no_reachable_instance_answers_502_with_an_openai_error() -> None:
    dead = f"http://127.0.0.1:{free_tcp_port()}"
    async with (
        running_router(None, backends=(dead,)) as router,
        aiohttp.ClientSession() as session,
    ):
        status, _, body = await chat(session, router)
        assert status == 502
        assert body["error"]["code"] == "upstream_unreachable"
