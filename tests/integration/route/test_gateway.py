"""The gateway end to end: real NATS, simulated engines on HTTP, the openai client."""

from __future__ import annotations

import json
import time

import aiohttp
import openai
from route_helpers import MODEL, running_router, wait_for_fleet

from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.sim.fleet import SimFleet, SimFleetConfig


async def test_openai_client_streams_chat_and_completions_through_the_router(
    nats_url: str,
) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=2, nats_url=nats_url)) as fleet,
        running_router(nats_url) as router,
    ):
        await wait_for_fleet(router, 2)
        client = openai.AsyncOpenAI(base_url=router.url + "/v1", api_key="none", max_retries=0)
        try:
            stream = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "Hello AI"}],
                max_tokens=8,
                stream=True,
                stream_options={"include_usage": True},
            )
            pieces, usage = [], None
            async for chunk in stream:
                if chunk.choices:
                    pieces.append(chunk.choices[0].delta.content or "")
                if chunk.usage is not None:
                    usage = chunk.usage
            assert "".join(pieces).strip()
            assert usage is not None and usage.completion_tokens == 8

            completion = await client.completions.create(model=MODEL, prompt="Hi", max_tokens=5)
            assert completion.choices[0].text
            assert completion.usage is not None and completion.usage.completion_tokens == 5

            text_stream = await client.completions.create(
                model=MODEL, prompt="Hi", max_tokens=6, stream=True
            )
            texts = [c.choices[0].text async for c in text_stream if c.choices]
            assert len([t for t in texts if t]) == 6

            models = await client.models.list()
            assert [m.id for m in models.data] == [MODEL]
        finally:
            await client.close()
        assert {t.url for t in router.fleet.targets()} == set(fleet.urls)


async def test_streaming_is_relayed_chunk_by_chunk_not_buffered(nats_url: str) -> None:
    """The first event reaches the client while the engine is still generating."""
    async with (
        SimFleet(SimFleetConfig(engines=1, nats_url=nats_url, profile="tiny-cpu")),
        running_router(nats_url) as router,
    ):
        await wait_for_fleet(router, 1)
        # 100 steps of >= 20 ms each (tiny-cpu): at least 2 s of generation.
        body = {
            "model": MODEL,
            "prompt": "Hi",
            "max_tokens": 100,
            "stream": True,
            "ignore_eos": True,
        }
        events = 0
        inflight_at_first_event = None
        async with (
            aiohttp.ClientSession() as session,
            session.post(router.url + "/v1/completions", json=body) as resp,
        ):
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            async for line in resp.content:
                if line.startswith(b"data:"):
                    events += 1
                    if inflight_at_first_event is None:
                        inflight_at_first_event = router.dispatcher.inflight_total
        assert events == 101  # 100 tokens + [DONE]
        # A buffering proxy would only answer after the upstream finished (0 in flight).
        assert inflight_at_first_event == 1


async def test_seed_generate_endpoint_answers_like_vllm_legacy_server(nats_url: str) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=1, nats_url=nats_url)),
        running_router(nats_url) as router,
    ):
        await wait_for_fleet(router, 1)
        async with aiohttp.ClientSession() as session:
            # Exactly the seed's verification request: no model, no content type.
            async with session.post(
                router.url + "/generate", data=b'{"prompt": "Hello AI"}'
            ) as resp:
                assert resp.status == 200
                body = await resp.json()
            [text] = body["text"]
            assert text.startswith("Hello AI") and len(text) > len("Hello AI")
            async with session.post(
                router.url + "/generate",
                json={"prompt": "Hello AI", "stream": True, "max_tokens": 3},
            ) as resp:
                raw = await resp.read()
        parts = [json.loads(p) for p in raw.split(b"\0") if p]
        assert len(parts) == 3
        assert all(p["text"][0].startswith("Hello AI") for p in parts)
        assert len(parts[-1]["text"][0]) > len(parts[0]["text"][0])


async def test_health_ready_fleet_and_metrics_endpoints(nats_url: str) -> None:
    async with running_router(nats_url) as router, aiohttp.ClientSession() as session:
        async with session.get(router.url + "/health") as resp:
            assert resp.status == 200
        async with session.get(router.url + "/ready") as resp:
            assert resp.status == 503  # no engine yet
        body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}
        async with session.post(router.url + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 503  # nothing discovered yet: retry, not "no such model"
            assert resp.headers["Retry-After"] == "1"
        async with SimFleet(SimFleetConfig(engines=2, nats_url=nats_url)) as fleet:
            await wait_for_fleet(router, 2)
            async with session.get(router.url + "/ready") as resp:
                assert resp.status == 200
            for _ in range(4):
                async with session.post(
                    router.url + "/v1/chat/completions",
                    json={
                        "model": MODEL,
                        "messages": [{"role": "user", "content": "x"}],
                        "max_tokens": 2,
                        "stream": True,
                    },
                ) as resp:
                    assert resp.status == 200
                    await resp.read()
            async with session.get(router.url + "/fleet") as resp:
                doc = await resp.json()
            assert doc["nats_connected"] is True
            assert {t["endpoint"] for t in doc["targets"]} == set(fleet.urls)
            assert sum(t["decisions_total"] for t in doc["targets"]) == 4
            assert all(t["ranks"][0]["instance_id"].startswith("sim-") for t in doc["targets"])
            async with session.get(router.url + "/metrics") as resp:
                text = await resp.text()
        for name in (
            "gen_ai_server_request_duration_seconds_count",
            "gen_ai_server_time_to_first_token_seconds_count",
            "gen_ai_server_time_per_output_token_seconds_count",
            "eagle_eye_router_decisions_total",
            "eagle_eye_router_requests_total",
            "eagle_eye_router_snapshot_age_seconds",
            "eagle_eye_router_fleet_instances",
        ):
            assert name in text, name
        assert 'code="200"' in text


async def test_a_router_started_after_the_engines_holds_the_fleet_within_a_second(
    nats_server: EmbeddedNats,
) -> None:
    # Heartbeats every 60 s: only the router's sync request can bring the snapshots.
    config = SimFleetConfig(engines=3, nats_url=nats_server.url, heartbeat_s=60.0)
    async with SimFleet(config) as fleet:
        assert fleet.publisher is not None
        assert fleet.publisher.wait_connected(5.0)
        started = time.monotonic()
        async with running_router(nats_server.url) as router:
            await wait_for_fleet(router, 3, timeout_s=1.0)
            assert time.monotonic() - started < 1.0 + 2.0  # start (NATS connect) + 1 s
            assert router.subscriber is not None and router.subscriber.syncs_sent >= 1


async def test_metrics_on_a_separate_port(nats_url: str) -> None:
    async with running_router(nats_url, metrics_port=0) as router:
        assert router.metrics_port is not None and router.metrics_port != router.port
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{router.metrics_port}/metrics") as resp,
        ):
            assert resp.status == 200
            assert "eagle_eye_router_fleet_instances" in await resp.text()
