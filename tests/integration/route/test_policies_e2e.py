"""Each policy's behaviour on a real simulated fleet, over real HTTP and NATS."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from route_helpers import (
    MODEL,
    DecisionLog,
    by_engine,
    chat,
    running_router,
    wait_for_fleet,
)

from eagle_eye.route.policies import PolicyConfig
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from support import async_wait_for


@pytest.mark.parametrize("policy", ["cost", "least_request", "kv_aware", "least_waiting"])
async def test_a_slow_engine_gets_less_traffic(nats_url: str, policy: str) -> None:
    config = SimFleetConfig(
        engines=3, nats_url=nats_url, speed_factors=[1.0, 1.0, 0.2], profile="tiny-cpu",
        speedup=2.0,
    )  # fmt: skip
    async with SimFleet(config) as fleet, running_router(nats_url, policy=policy) as router:
        await wait_for_fleet(router, 3)
        backends: list[str] = []
        async with aiohttp.ClientSession() as session:

            async def client(i: int) -> None:
                for j in range(8):
                    status, backend, _ = await chat(
                        session, router, f"client {i} turn {j}", max_tokens=12, ignore_eos=True
                    )
                    assert status == 200
                    backends.append(backend)

            await asyncio.gather(*(client(i) for i in range(10)))
        counts = by_engine(fleet, backends)
        assert counts[2] < min(counts[0], counts[1]), counts


@pytest.mark.parametrize("policy", ["kv_aware", "cost", "least_waiting"])
async def test_an_engine_with_a_full_kv_cache_and_a_queue_gets_no_new_requests(
    nats_url: str, policy: str
) -> None:
    config = SimFleetConfig(engines=3, nats_url=nats_url, profile="tiny-cpu", speedup=4.0)
    async with SimFleet(config) as fleet, running_router(nats_url, policy=policy) as router:
        await wait_for_fleet(router, 3)
        busy = fleet.engines[0]
        async with aiohttp.ClientSession() as session:
            # Fill engine 0 directly (not through the router): 40 x 2,000 tokens > its
            # 65,536-token KV cache, so it runs out of KV and queues the rest. Distinct
            # prompts: no prefix-cache sharing.
            load = [
                asyncio.create_task(
                    session.post(
                        busy.url + "/v1/completions",
                        json={"model": MODEL, "prompt": [1000 + i] * 1800, "max_tokens": 200,
                              "ignore_eos": True},
                    )
                )
                for i in range(40)
            ]  # fmt: skip
            target = router.fleet.target(busy.url)
            assert target is not None
            assert await async_wait_for(
                lambda: target.waiting > 0 and (target.kv_usage or 0) > 0.8, 10.0
            ), router.fleet_json()["targets"]
            results = await asyncio.gather(
                *(chat(session, router, f"q{i}", max_tokens=2) for i in range(12))
            )
            for task in load:
                task.cancel()
            await asyncio.gather(*load, return_exceptions=True)
        assert all(status == 200 for status, _, _ in results)
        counts = by_engine(fleet, [backend for _, backend, _ in results])
        assert counts[0] == 0, counts


async def test_prefix_affinity_sticks_to_the_warm_engine_until_it_is_overloaded(
    nats_url: str,
) -> None:
    balance_abs = 3
    async with (
        SimFleet(SimFleetConfig(engines=3, nats_url=nats_url, profile="tiny-cpu")) as fleet,
        running_router(
            nats_url,
            policy="prefix_affinity",
            policy_config=PolicyConfig(balance_abs=balance_abs, balance_rel=1.5),
        ) as router,
    ):
        await wait_for_fleet(router, 3)
        system = "You are a careful assistant for the Eagle Eye fleet. " * 40
        async with aiohttp.ClientSession() as session:
            sequential = [
                (await chat(session, router, system + f"question {i}", max_tokens=2))[1]
                for i in range(6)
            ]
            assert len(set(sequential)) == 1  # every request found the warm engine
            warm = sequential[0]
            # The burst starts on an idle fleet, as the router sees it: the snapshots after
            # the last sequential request have arrived (a lagging one still counts it).
            targets = router.fleet.targets()
            assert await async_wait_for(
                lambda: all(t.running == t.waiting == t.inflight == 0 for t in targets), 10.0
            ), router.fleet_json()["targets"]
            decisions = DecisionLog()
            router.dispatcher.observers.append(decisions)
            burst = await asyncio.gather(
                *(
                    chat(session, router, system + f"burst {i}", max_tokens=40, ignore_eos=True)
                    for i in range(24)
                )
            )
        # The warm engine is followed until it is balance_abs requests busier than the
        # idlest engine (a snapshot during the burst can only show fewer of the burst's
        # requests than the router sent, so the gate never trips early)...
        first = decisions.urls[: balance_abs + 1]
        assert first == [warm] * (balance_abs + 1), decisions.urls
        # ...then the gate spreads the burst. Every engine that took a burst request holds
        # the same system prompt from then on, so the rest balance by load (the warm
        # engine's head start is not kept: equally warm engines are equally good).
        counts = by_engine(fleet, [b for _, b, _ in burst])
        assert len(counts) == 3, counts
        assert max(counts.values()) < 24, counts
        assert sorted(decisions.urls) == sorted(b for _, b, _ in burst)


async def test_round_robin_session_and_the_policy_header(nats_url: str) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=3, nats_url=nats_url)) as fleet,
        running_router(nats_url, policy="round_robin") as router,
        aiohttp.ClientSession() as session,
    ):
        await wait_for_fleet(router, 3)
        rr = [(await chat(session, router, f"r{i}", max_tokens=1))[1] for i in range(9)]
        assert sorted(by_engine(fleet, rr).values()) == [3, 3, 3]
        sticky = [
            (
                await chat(
                    session,
                    router,
                    f"turn {i}",
                    max_tokens=1,
                    headers={"x-eagle-eye-policy": "session", "x-session-id": "alice"},
                )
            )[1]
            for i in range(6)
        ]
        assert len(set(sticky)) == 1
        users = {
            (await chat(session, router, "hi", max_tokens=1, user=f"user-{i}",
                        headers={"x-eagle-eye-policy": "session"}))[1]
            for i in range(30)
        }  # fmt: skip
        assert len(users) == 3  # different sessions spread over the fleet


async def test_draining_and_stopping_engines_get_no_new_work(nats_url: str) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=3, nats_url=nats_url)) as fleet,
        running_router(nats_url, policy="round_robin") as router,
        aiohttp.ClientSession() as session,
    ):
        await wait_for_fleet(router, 3)
        fleet.engines[0].set_draining(True)
        await fleet.engines[1].stop()
        assert await async_wait_for(
            lambda: len(router.fleet.candidates(MODEL, time.monotonic())) == 1, 5.0
        )
        results = [await chat(session, router, f"d{i}", max_tokens=1) for i in range(6)]
        assert {b for _, b, _ in results} == {fleet.engines[2].url}
        fleet.engines[0].set_draining(False)
        assert await async_wait_for(
            lambda: len(router.fleet.candidates(MODEL, time.monotonic())) == 2, 5.0
        )


async def test_a_profile_from_configuration_routes_through_the_policy_header(
    nats_url: str,
) -> None:
    # Least in flight through this router, sampled down to two candidates: a
    # power-of-two-choices variant nobody wrote code for.
    profiles = {
        "two-choices": {
            "filters": [{"type": "sample", "above": 2, "d": 2, "prefix_holders": False}],
            "scorers": [{"type": "inflight", "weight": 1.0}],
            "picker": {"type": "argmin"},
        }
    }
    config = SimFleetConfig(engines=3, nats_url=nats_url, profile="tiny-cpu", speedup=4.0)
    async with (
        SimFleet(config) as fleet,
        running_router(nats_url, profiles=profiles) as router,
        aiohttp.ClientSession() as session,
    ):
        await wait_for_fleet(router, 3)
        headers = {"x-eagle-eye-policy": "two-choices"}
        results = await asyncio.gather(
            *(
                chat(session, router, f"q{i}", max_tokens=8, ignore_eos=True, headers=headers)
                for i in range(24)
            )
        )
        assert all(status == 200 for status, _, _ in results)
        counts = by_engine(fleet, [backend for _, backend, _ in results])
        # Concurrent requests spread by in-flight count: every engine takes a share.
        assert len(counts) == 3 and min(counts.values()) >= 4, counts
        async with session.get(router.url + "/metrics") as resp:
            text = await resp.text()
        assert "eagle_eye_router_decisions_total{instance=" in text
        assert 'policy="two-choices"' in text
