"""The simulated engines over real HTTP: OpenAI client, /generate, /metrics, lifecycle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from eagle_eye.sim.metrics import ITL_BUCKETS_S, TTFT_BUCKETS_S
from support import async_wait_for

MODEL = "sim-llama"


@pytest.fixture
async def fleet() -> AsyncIterator[SimFleet]:
    async with SimFleet(SimFleetConfig(engines=2, speedup=50.0, seed=1)) as f:
        yield f


@pytest.fixture
async def client(fleet: SimFleet) -> AsyncIterator[openai.AsyncOpenAI]:
    c = openai.AsyncOpenAI(base_url=fleet.urls[0] + "/v1", api_key="unused", max_retries=0)
    yield c
    await c.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(
    metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return sum(
        v
        for (n, ls), v in metrics.items()
        if n == name and all((k, v2) in ls for k, v2 in labels.items())
    )


async def get_text(url: str) -> str:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 200
        return await r.text()


async def test_openai_client_completions_and_chat_non_streaming(client: openai.AsyncOpenAI) -> None:
    c = await client.completions.create(model=MODEL, prompt="Hello AI", max_tokens=7)
    assert c.choices[0].finish_reason == "length"
    assert c.usage is not None and c.usage.completion_tokens == 7 and c.usage.prompt_tokens == 2
    assert len(c.choices[0].text.split()) == 7
    chat = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert chat.choices[0].message.role == "assistant"
    assert chat.usage is not None and chat.usage.completion_tokens == 4
    models = await client.models.list()
    assert [m.id for m in models.data] == [MODEL]


async def test_generated_text_is_deterministic(client: openai.AsyncOpenAI) -> None:
    a = await client.completions.create(model=MODEL, prompt="same prompt", max_tokens=10)
    b = await client.completions.create(model=MODEL, prompt="same prompt", max_tokens=10)
    assert a.choices[0].text == b.choices[0].text


async def test_openai_client_streams_with_usage(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "tell me"}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage, reasons = "", None, []
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reasons.append(choice.finish_reason)
    assert usage is not None and usage.completion_tokens == 12
    assert len(text.split()) == 12
    assert reasons[-1] == "length"
    comp = await client.completions.create(model=MODEL, prompt="x" * 40, max_tokens=5, stream=True)
    pieces = [chunk.choices[0].text async for chunk in comp]
    assert len("".join(pieces).split()) == 5


async def test_bad_requests_get_openai_errors(client: openai.AsyncOpenAI, fleet: SimFleet) -> None:
    with pytest.raises(openai.NotFoundError):
        await client.completions.create(model="other", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError) as info:
        await client.completions.create(model=MODEL, prompt="x" * 600_000, max_tokens=1)
    assert "maximum context length" in str(info.value)
    with pytest.raises(openai.BadRequestError):
        await client.completions.create(model=MODEL, prompt="x", max_tokens=0)
    async with (
        aiohttp.ClientSession() as s,
        s.post(fleet.urls[0] + "/v1/completions", data=b"{not json") as r,
    ):
        assert r.status == 400
        body = await r.json()
        assert body["error"]["type"] == "BadRequestError"


async def test_seed_generate_endpoint_answers_like_vllm(fleet: SimFleet) -> None:
    async with (
        aiohttp.ClientSession() as s,
        s.post(fleet.urls[1] + "/generate", json={"prompt": "Hello AI"}) as r,
    ):
        assert r.status == 200
        body = await r.json()
    assert body["text"][0].startswith("Hello AI")
    assert len(body["text"][0][len("Hello AI") :].split()) == 16  # SamplingParams default


async def test_metrics_agree_with_the_requests_served(
    client: openai.AsyncOpenAI, fleet: SimFleet
) -> None:
    prompt_total = completion_total = 0
    results = await asyncio.gather(
        *(
            client.completions.create(model=MODEL, prompt=f"request {i} " * 20, max_tokens=5 + i)
            for i in range(8)
        )
    )
    for c in results:
        assert c.usage is not None
        prompt_total += c.usage.prompt_tokens
        completion_total += c.usage.completion_tokens
    m = samples(await get_text(fleet.urls[0] + "/metrics"))
    labels = {"model_name": MODEL, "engine": "0"}
    assert value(m, "vllm:request_success_total", **labels) == 8
    assert value(m, "vllm:request_success_total", finished_reason="length") == 8
    assert value(m, "vllm:generation_tokens_total", **labels) == completion_total
    assert value(m, "vllm:prompt_tokens_total", **labels) == prompt_total
    assert value(m, "vllm:time_to_first_token_seconds_count", **labels) == 8
    assert value(m, "vllm:e2e_request_latency_seconds_count", **labels) == 8
    assert value(m, "vllm:inter_token_latency_seconds_count", **labels) == completion_total - 8
    assert value(m, "vllm:prefix_cache_queries_total", **labels) == prompt_total
    assert value(m, "vllm:num_requests_running", **labels) == 0
    assert value(m, "vllm:kv_cache_usage_perc", **labels) == 0
    ttft_les = sorted(
        float(dict(ls)["le"])
        for (n, ls), _ in m.items()
        if n == "vllm:time_to_first_token_seconds_bucket"
    )
    assert ttft_les[:-1] == list(TTFT_BUCKETS_S)
    itl_les = sorted(
        float(dict(ls)["le"])
        for (n, ls), _ in m.items()
        if n == "vllm:inter_token_latency_seconds_bucket"
    )
    assert itl_les[:-1] == list(ITL_BUCKETS_S)
    gpu = [ls for (n, ls), _ in m.items() if n == "DCGM_FI_DEV_GPU_UTIL"]
    assert gpu and ("simulated", "true") in gpu[0]


async def test_kill_drops_streams_and_restart_serves_again(fleet: SimFleet) -> None:
    engine = fleet.engines[0]
    url = engine.url
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    stream = await client.completions.create(
        model=MODEL, prompt="long one", max_tokens=100_000, stream=True
    )
    got = 0
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        async for _ in stream:
            got += 1
            if got == 3:
                await engine.kill()
    assert got >= 3
    with pytest.raises(openai.APIConnectionError):
        await client.completions.create(model=MODEL, prompt="x", max_tokens=1)
    await engine.restart()
    assert engine.url == url
    c = await client.completions.create(model=MODEL, prompt="x", max_tokens=2)
    assert c.usage is not None and c.usage.completion_tokens == 2
    await client.close()


async def test_draining_engine_refuses_new_work(fleet: SimFleet) -> None:
    engine = fleet.engines[1]
    engine.set_draining(True)
    async with aiohttp.ClientSession() as s:
        async with s.get(engine.url + "/health") as r:
            assert r.status == 503
        async with s.post(
            engine.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}
        ) as r:
            assert r.status == 503
        engine.set_draining(False)
        async with s.get(engine.url + "/health") as r:
            assert r.status == 200


async def test_speedup_reports_simulated_seconds() -> None:
    async with SimFleet(SimFleetConfig(engines=1, speedup=100.0)) as f:
        async with (
            aiohttp.ClientSession() as s,
            s.post(
                f.urls[0] + "/v1/completions",
                json={"prompt": "hi", "max_tokens": 300, "ignore_eos": True},
            ) as r,
        ):
            assert r.status == 200
        m = samples(await get_text(f.urls[0] + "/metrics"))
    e2e = value(m, "vllm:e2e_request_latency_seconds_sum")
    # 300 decode steps of ~6.5 ms each in simulated time, whatever the wall clock did.
    assert 300 * 0.0064 < e2e < 300 * 0.0075


async def test_sglang_flavor_serves_sglang_names_and_loads() -> None:
    async with SimFleet(SimFleetConfig(engines=1, flavor="sglang", speedup=50.0)) as f:
        url = f.urls[0]
        async with aiohttp.ClientSession() as s:
            async with s.post(
                url + "/generate", json={"text": "Hello", "sampling_params": {"max_new_tokens": 6}}
            ) as r:
                body = await r.json()
            assert body["meta_info"]["completion_tokens"] == 6
            async with s.get(url + "/v1/loads?include=core") as r:
                loads = await r.json()
        load = loads["loads"][0]
        for key in (
            "dp_rank",
            "num_running_reqs",
            "num_waiting_reqs",
            "num_used_tokens",
            "max_total_num_tokens",
            "token_usage",
            "gen_throughput",
            "cache_hit_rate",
        ):
            assert key in load
        m = samples(await get_text(url + "/metrics"))
    names = {n for n, _ in m}
    assert {
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:generation_tokens_total",
        "sglang:time_to_first_token_seconds_count",
    } <= names
    assert value(m, "sglang:generation_tokens_total") == 6
    assert not any(n.startswith("vllm:") for n in names)


async def test_fleet_starts_fast_on_distinct_ports() -> None:
    import time

    t0 = time.monotonic()
    async with SimFleet(SimFleetConfig(engines=8)) as f:
        assert time.monotonic() - t0 < 1.0
        assert len(set(f.urls)) == 8
        assert await async_wait_for(lambda: all(e.running for e in f.engines), 1.0)


async def test_trace_hash_ids_extension_produces_prefix_hits(client: openai.AsyncOpenAI) -> None:
    extra = {"eagle_eye_hash_ids": [0, 14, 15, 16], "eagle_eye_prompt_tokens": 1900}
    first = await client.completions.create(model=MODEL, prompt="", max_tokens=2, extra_body=extra)
    again = await client.completions.create(
        model=MODEL,
        prompt="",
        max_tokens=2,
        extra_body={**extra, "eagle_eye_hash_ids": [0, 14, 15, 99]},
    )
    assert first.usage is not None and first.usage.prompt_tokens == 1900
    assert again.usage is not None and again.usage.prompt_tokens_details is not None
    assert again.usage.prompt_tokens_details.cached_tokens == 3 * 512
