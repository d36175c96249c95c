"""Side by side: the simulator and real vLLM (CPU build, tiny model) under the same mix.

Both get the same burst (more requests than ``--max-num-seqs``, sharing a prompt prefix)
and their own ``/metrics`` is sampled while it runs. The simulator is faithful when the
same metric families move the same way: the batch fills to ``max_num_seqs``, a queue
forms, KV usage rises then returns to 0, the shared prefix produces cache hits, and the
token and request counters add up to what was asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from eagle_eye.sim.fleet import SimFleet, SimFleetConfig

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

MAX_NUM_SEQS = 4
REQUESTS = 40  # a burst long enough that samples land inside it on a busy machine
MAX_TOKENS = 90  # the prompt is 163 tokens; 163 + 90 fits --max-model-len 256
SHARED_PREFIX = (
    "You are the Eagle Eye test assistant. Answer briefly and precisely about KV caches, "
    "schedulers and routing. Keep the answer short. "
) * 2


@dataclass
class Observed:
    before: dict[str, float]
    after: dict[str, float] = field(default_factory=dict)
    max_running: float = 0.0
    max_waiting: float = 0.0
    max_kv: float = 0.0

    def delta(self, name: str) -> float:
        return self.after.get(name, 0.0) - self.before.get(name, 0.0)


async def scrape(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(url + "/metrics") as r:
        text = await r.text()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            values[s.name] = values.get(s.name, 0.0) + s.value
    return values


async def run_mix(url: str, model: str) -> Observed:
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        observed = Observed(before=await scrape(session, url))

        async def one(i: int) -> int:
            body = {
                "model": model,
                "prompt": SHARED_PREFIX + f"Question {i}?",
                "max_tokens": MAX_TOKENS,
                "ignore_eos": True,
                "temperature": 0.0,
            }
            async with session.post(url + "/v1/completions", json=body) as r:
                await r.read()
                return r.status

        tasks = [asyncio.create_task(one(i)) for i in range(REQUESTS)]
        while not all(t.done() for t in tasks):
            m = await scrape(session, url)
            observed.max_running = max(observed.max_running, m["vllm:num_requests_running"])
            observed.max_waiting = max(observed.max_waiting, m["vllm:num_requests_waiting"])
            observed.max_kv = max(observed.max_kv, m["vllm:kv_cache_usage_perc"])
            await asyncio.wait(tasks, timeout=0.02)  # sampling interval, not synchronisation
        assert [t.result() for t in tasks] == [200] * REQUESTS
        observed.after = await scrape(session, url)
    return observed


def check_shape(o: Observed, who: str) -> None:
    def same(cond: Callable[[], bool], what: str) -> None:
        assert cond(), f"{who}: {what} ({o})"

    same(lambda: o.max_running == MAX_NUM_SEQS, "the batch fills to max_num_seqs")
    same(lambda: o.max_waiting > 0, "a queue forms behind it")
    same(lambda: 0 < o.max_kv < 1, "KV usage rises")
    same(lambda: o.after["vllm:num_requests_running"] == 0, "running returns to 0")
    same(lambda: o.after["vllm:num_requests_waiting"] == 0, "waiting returns to 0")
    same(lambda: o.after["vllm:kv_cache_usage_perc"] == 0, "KV usage returns to 0")
    same(lambda: o.delta("vllm:prefix_cache_hits_total") > 0, "the shared prefix hits")
    same(
        lambda: o.delta("vllm:generation_tokens_total") == REQUESTS * MAX_TOKENS,
        "generation tokens add up",
    )
    same(lambda: o.delta("vllm:request_success_total") == REQUESTS, "requests add up")
    same(
        lambda: o.delta("vllm:time_to_first_token_seconds_count") == REQUESTS,
        "one TTFT sample per request",
    )


async def test_simulator_moves_the_same_metrics_as_vllm(vllm_server_factory) -> None:  # type: ignore[no-untyped-def]
    real = await asyncio.to_thread(
        vllm_server_factory,
        name="side-by-side",
        plugins=False,
        extra_args=["--max-num-seqs", str(MAX_NUM_SEQS)],
    )
    try:
        vllm_observed = await run_mix(real.url, "tiny-llama")
    finally:
        await asyncio.to_thread(real.stop)
    config = SimFleetConfig(
        engines=1, profile="tiny-cpu", max_num_seqs=MAX_NUM_SEQS, max_model_len=256
    )
    async with SimFleet(config) as fleet:
        sim_observed = await run_mix(fleet.urls[0], config.model)
    check_shape(vllm_observed, "vLLM")
    check_shape(sim_observed, "simulator")
