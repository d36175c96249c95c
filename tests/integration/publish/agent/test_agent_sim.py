"""The agent against the simulator's vLLM and SGLang flavours (real HTTP, real NATS).

The simulator serves the same ``/metrics`` names as the engines (and SGLang's
``/v1/loads``); nothing publishes but the agent. Each test checks the agent's snapshots
against the engine's own page, read with prometheus_client's parser.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from eagle_eye.publish.agent.config import EngineTarget
from eagle_eye.publish.agent.engines import EngineKind
from eagle_eye.publish.agent.runner import Agent
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from eagle_eye.snapshot import EngineState
from support import async_wait_for
from support.agent import Collector, start_agent, stop_agent
from support.pages import bucket_bounds, fetch_text, values

MODEL = "sim-llama"


async def _load(url: str, requests: int, max_tokens: int) -> list[int]:
    """Fire ``requests`` completions at once; return the completion token counts."""
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> int:
            body = {"model": MODEL, "prompt": f"request {i} " * 40, "max_tokens": max_tokens}
            async with session.post(f"{url}/v1/completions", json=body) as resp:
                resp.raise_for_status()
                data = await resp.json()
                return int(data["usage"]["completion_tokens"])

        return await asyncio.gather(*(one(i) for i in range(requests)))


@pytest.fixture
async def vllm_fleet() -> AsyncIterator[SimFleet]:
    async with SimFleet(SimFleetConfig(engines=2, flavor="vllm", model=MODEL, seed=7)) as fleet:
        yield fleet


@pytest.fixture
async def sglang_fleet() -> AsyncIterator[SimFleet]:
    async with SimFleet(SimFleetConfig(engines=1, flavor="sglang", model=MODEL, seed=7)) as f:
        yield f


async def test_one_agent_watches_two_vllm_engines_and_agrees_with_their_pages(
    nats_url: str, collector: Collector, vllm_fleet: SimFleet
) -> None:
    busy_url, idle_url = vllm_fleet.urls
    targets = [
        EngineTarget(url=u, instance_id=f"engine-{i}") for i, u in enumerate(vllm_fleet.urls)
    ]
    agent = start_agent(nats_url, targets)
    try:
        assert await async_wait_for(lambda: collector.instances() >= {"engine-0", "engine-1"}, 10)
        assert {w.kind for w in agent.watchers} == {EngineKind.VLLM}
        load = asyncio.create_task(_load(busy_url, requests=12, max_tokens=300))

        async def running_agrees() -> bool:
            snap = collector.latest("engine-0")
            page = values(await fetch_text(busy_url + "/metrics"), model_name=MODEL)
            running = page["vllm:num_requests_running"]
            return snap is not None and running > 0 and snap.running == running

        assert await async_wait_for(running_agrees, 20, interval_s=0.02)
        generated = await load

        text = await fetch_text(busy_url + "/metrics")
        page = values(text, model_name=MODEL)
        assert page["vllm:generation_tokens_total"] == sum(generated)

        async def idle_agrees() -> bool:
            snap = collector.latest("engine-0")
            return (
                snap is not None
                and snap.running == 0
                and snap.prefix_cache_queries_total == (page["vllm:prefix_cache_queries_total"])
            )

        assert await async_wait_for(idle_agrees, 10)
        snap = collector.latest("engine-0")
        assert snap is not None
        assert snap.engine == "vllm"
        assert snap.model == MODEL
        assert snap.endpoint == busy_url
        assert snap.state is EngineState.READY
        assert snap.waiting == page["vllm:num_requests_waiting"]
        assert snap.kv_usage == page["vllm:kv_cache_usage_perc"]
        assert snap.prefix_cache_hits_total == page["vllm:prefix_cache_hits_total"]
        assert snap.preemptions_total == page["vllm:num_preemptions_total"]
        # Per-message token deltas add up to the engine's own counter.
        engine0 = [s for s in collector.snapshots if s.instance_id == "engine-0"]
        assert sum(s.step_generation_tokens or 0 for s in engine0) == sum(generated)
        assert sum(s.step_prompt_tokens or 0 for s in engine0) == page["vllm:prompt_tokens_total"]
        # Recent TTFT lies within what the engine's histogram says was observed.
        lower, upper = bucket_bounds(text, "vllm:time_to_first_token_seconds", model_name=MODEL)
        assert snap.ttft_recent_s is not None
        assert lower <= snap.ttft_recent_s <= upper
        assert snap.itl_recent_s is not None
        info = next(
            line for line in text.splitlines() if line.startswith("vllm:cache_config_info{")
        )
        assert 'num_gpu_blocks="27000"' in info and 'block_size="16"' in info
        assert snap.kv_capacity_tokens == 27000 * 16

        idle = collector.latest("engine-1")
        assert idle is not None
        assert (idle.running, idle.waiting, idle.endpoint) == (0, 0, idle_url)
        assert (
            sum(
                s.step_generation_tokens or 0
                for s in collector.snapshots
                if s.instance_id == "engine-1"
            )
            == 0
        )
    finally:
        await stop_agent(agent)
    stopping = collector.latest("engine-1")
    assert stopping is not None and stopping.state is EngineState.STOPPING


async def test_sglang_flavour_with_loads_agrees_with_the_engine(
    nats_url: str, collector: Collector, sglang_fleet: SimFleet
) -> None:
    (url,) = sglang_fleet.urls
    agent: Agent = start_agent(nats_url, [EngineTarget(url=url, instance_id="sgl")])
    try:
        assert await async_wait_for(lambda: collector.latest("sgl") is not None, 10)
        assert agent.watchers[0].kind is EngineKind.SGLANG
        load = asyncio.create_task(_load(url, requests=10, max_tokens=300))

        async def running_agrees() -> bool:
            snap = collector.latest("sgl")
            loads = await fetch_text(url + "/v1/loads?include=core")
            running = json.loads(loads)["loads"][0]["num_running_reqs"]
            return snap is not None and running > 0 and snap.running == running

        assert await async_wait_for(running_agrees, 20, interval_s=0.02)
        generated = await load
        text = await fetch_text(url + "/metrics")
        page = values(text, model_name=MODEL, dp_rank="0")

        def generated_in_snapshots() -> int:
            sent = [s for s in collector.snapshots if s.instance_id == "sgl"]
            return sum(s.step_generation_tokens or 0 for s in sent)

        async def settled() -> bool:
            # The agent reads /metrics, then overlays /v1/loads: one scrape can pair the
            # idle queue of the newer page with the counters of the older one, so wait for
            # the scrape after that too (the deltas then add up to the engine's counter).
            snap = collector.latest("sgl")
            return (
                snap is not None
                and snap.running == 0
                and snap.kv_usage == (page["sglang:token_usage"])
                and generated_in_snapshots() == page["sglang:generation_tokens_total"]
            )

        assert await async_wait_for(settled, 10)
        snap = collector.latest("sgl")
        assert snap is not None
        assert snap.engine == "sglang"
        assert snap.engine_version == "eagle-eye-sim"  # from /v1/loads
        assert snap.kv_capacity_tokens == page["sglang:max_total_num_tokens"]
        assert snap.waiting == page["sglang:num_queue_reqs"]
        assert generated_in_snapshots() == sum(generated)
        assert page["sglang:generation_tokens_total"] == sum(generated)
        lower, upper = bucket_bounds(text, "sglang:time_to_first_token_seconds", dp_rank="0")
        assert snap.ttft_recent_s is not None and lower <= snap.ttft_recent_s <= upper
        # SGLang exposes no cumulative prefix-cache counts: absent, not invented.
        assert snap.prefix_cache_hits_total is None
        assert snap.preemptions_total is None
    finally:
        await stop_agent(agent)
