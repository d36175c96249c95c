"""The metrics agent against a real vLLM (CPU build) that runs *without* our plugin.

This is the "nobody may touch the image" deployment: the agent scrapes vLLM's own
``/metrics`` and publishes snapshots that must agree with vLLM's numbers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from vllm_client import burst
from vllm_harness import SERVED_MODEL_NAME, VllmServer

from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.publish.agent.engines import EngineKind
from eagle_eye.snapshot import EngineState
from support import async_wait_for
from support.agent import Collector, start_agent, stop_agent

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]

MAX_NUM_SEQS = 8
BURST_REQUESTS = 8 * MAX_NUM_SEQS
BURST_MAX_TOKENS = 160  # the prompts are ~16 tokens; 16 + 160 fits --max-model-len 256


@pytest.fixture
async def collector(nats_url: str) -> AsyncIterator[Collector]:
    """Every snapshot on the bus, decoded (the agent tests' collector)."""
    c = Collector()
    await c.start(nats_url)
    yield c
    assert c.client is not None
    await c.client.close()


@pytest.fixture(scope="module")
def plain_vllm(vllm_server_factory) -> Iterator[VllmServer]:  # type: ignore[no-untyped-def]
    server: VllmServer = vllm_server_factory(
        name="plain-agent", plugins=False, extra_args=["--max-num-seqs", str(MAX_NUM_SEQS)]
    )
    yield server
    server.stop()


def _page(server: VllmServer) -> tuple[str, dict[str, float]]:
    status, body = server.get("/metrics")
    assert status == 200
    text = body.decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("model_name") == SERVED_MODEL_NAME:
                out.setdefault(sample.name, float(sample.value))
    return text, out


async def test_agent_snapshots_agree_with_plain_vllm(
    nats_url: str, collector: Collector, plain_vllm: VllmServer
) -> None:
    _, before = await asyncio.to_thread(_page, plain_vllm)
    target = EngineTarget(url=plain_vllm.url, instance_id="plain-vllm")
    # A CPU engine at full load answers /metrics slowly; give each scrape time.
    agent = start_agent(nats_url, [target], AgentConfig(interval_s=0.1, timeout_s=10.0))
    try:
        assert await async_wait_for(lambda: collector.latest("plain-vllm") is not None, 20)
        assert agent.watchers[0].kind is EngineKind.VLLM
        load = asyncio.create_task(
            # Long enough that the batch stays full (running == MAX_NUM_SEQS) for many
            # agent intervals: the agreement check compares two moving readings.
            burst(plain_vllm.url, BURST_REQUESTS, max_tokens=BURST_MAX_TOKENS, tag="agent")
        )

        # Both readings move, so compare them at the same moment: at some sample, vLLM's
        # page and the agent's latest snapshot both report the full batch. (vLLM runs in
        # its own process group but our session: in a session of its own, the scheduler's
        # autogroups starved this test's sampler for whole bursts; see eagle_eye.children.)
        samples: list[tuple[float, int | None]] = []

        async def both_see_the_full_batch() -> bool:
            _, page = await asyncio.to_thread(_page, plain_vllm)
            snap = collector.latest("plain-vllm")
            samples.append((page["vllm:num_requests_running"], snap and snap.running))
            return samples[-1] == (MAX_NUM_SEQS, MAX_NUM_SEQS) or load.done()

        await async_wait_for(both_see_the_full_batch, 120, interval_s=0.2)
        seen = [(s.running, s.waiting, s.state.value) for s in collector.snapshots]
        assert (MAX_NUM_SEQS, MAX_NUM_SEQS) in samples, f"(page, agent) {samples}; {seen[-20:]}"
        assert all(status == 200 for status in await load)
        text, after = await asyncio.to_thread(_page, plain_vllm)

        def settled() -> bool:
            snap = collector.latest("plain-vllm")
            return (
                snap is not None
                and snap.running == 0
                and snap.prefix_cache_queries_total == after["vllm:prefix_cache_queries_total"]
            )

        assert await async_wait_for(settled, 20)
        snap = collector.latest("plain-vllm")
        assert snap is not None
        assert (snap.engine, snap.model, snap.endpoint) == (
            "vllm",
            SERVED_MODEL_NAME,
            plain_vllm.url,
        )
        assert snap.state is EngineState.READY
        assert snap.waiting == after["vllm:num_requests_waiting"] == 0
        assert snap.kv_usage == after["vllm:kv_cache_usage_perc"]
        assert snap.prefix_cache_hits_total == after["vllm:prefix_cache_hits_total"]
        assert snap.preemptions_total == after["vllm:num_preemptions_total"]
        mine = [s for s in collector.snapshots if s.instance_id == "plain-vllm"]
        generated = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
        assert generated == BURST_REQUESTS * BURST_MAX_TOKENS
        assert sum(s.step_generation_tokens or 0 for s in mine) == generated
        assert snap.ttft_recent_s is not None and snap.ttft_recent_s > 0
        assert snap.itl_recent_s is not None and snap.itl_recent_s > 0
        info = next(x for x in text.splitlines() if x.startswith("vllm:cache_config_info{"))
        assert f'kv_cache_size_tokens="{snap.kv_capacity_tokens}"' in info
        # Nothing but the agent publishes: this vLLM has no Eagle Eye plugin loaded.
        assert {s.instance_id for s in collector.snapshots} == {"plain-vllm"}
    finally:
        await stop_agent(agent)
