"""Every client mistake gets a 4xx with an OpenAI-style error body, never a 500."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from route_helpers import MODEL, chat, running_router, wait_for_fleet

from eagle_eye.sim.fleet import SimFleet, SimFleetConfig
from support import async_wait_for

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MSG = [{"role": "user", "content": "hi"}]


def chat_body(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": MSG, **fields}


POLICY = {"x-eagle-eye-policy": "best"}
HUGE = [{"role": "user", "content": "x" * 20_000}]

CASES: list[tuple[str, str, Any, dict[str, str], int, str | None]] = [
    # (case, path, body (bytes or JSON), headers, status, param)
    ("malformed json", CHAT, b'{"model": ', {}, 400, None),
    ("not utf-8", CHAT, b"\xff\xfe\x00", {}, 400, None),
    ("empty body", CHAT, b"", {}, 400, None),
    ("array body", CHAT, [1, 2], {}, 400, None),
    ("model not a string", CHAT, chat_body(model=5), {}, 400, "model"),
    ("stream not a bool", CHAT, chat_body(stream="yes"), {}, 400, "stream"),
    ("messages not a list", CHAT, chat_body(messages="hi"), {}, 400, "messages"),
    ("message without role", CHAT, chat_body(messages=[{"content": "x"}]), {}, 400, "messages"),
    ("negative max_tokens", CHAT, chat_body(max_tokens=-1), {}, 400, "max_tokens"),
    ("max_tokens a string", CHAT, chat_body(max_tokens="9"), {}, 400, "max_tokens"),
    ("temperature a string", CHAT, chat_body(temperature="hot"), {}, 400, "temperature"),
    ("prompt missing", COMPLETIONS, {"model": MODEL}, {}, 400, "prompt"),
    ("prompt an object", COMPLETIONS, {"model": MODEL, "prompt": {"a": 1}}, {}, 400, "prompt"),
    ("generate prompt missing", "/generate", {"stream": False}, {}, 400, "prompt"),
    ("unknown policy header", CHAT, chat_body(), POLICY, 400, "x-eagle-eye-policy"),
    ("unknown model", CHAT, chat_body(model="gpt-9"), {}, 404, "model"),
    ("oversize body", CHAT, chat_body(messages=HUGE), {}, 413, None),
]


@pytest.fixture
async def router_1(nats_url: str):  # type: ignore[no-untyped-def]
    async with (
        SimFleet(SimFleetConfig(engines=1, nats_url=nats_url)) as fleet,
        running_router(nats_url, max_body_bytes=10_000) as router,
    ):
        await wait_for_fleet(router, 1)
        yield router, fleet


async def test_every_bad_input_case(router_1: Any) -> None:
    router, _ = router_1
    async with aiohttp.ClientSession() as session:
        for case, path, body, headers, status, param in CASES:
            data = body if isinstance(body, bytes) else None
            kwargs: dict[str, Any] = {"data": data} if data is not None else {"json": body}
            async with session.post(router.url + path, headers=headers, **kwargs) as resp:
                payload = await resp.json(content_type=None)
                assert resp.status == status, (case, payload)
                assert resp.headers["Content-Type"].startswith("application/json"), case
            error = payload["error"]
            assert error["message"] and error["type"], case
            assert error["param"] == param, (case, error)
        # Unknown path and wrong method are JSON errors too.
        async with session.get(router.url + "/v2/nothing") as resp:
            assert resp.status == 404
            assert (await resp.json())["error"]["type"] == "not_found_error"
        async with session.get(router.url + CHAT) as resp:
            assert resp.status == 405
            assert "error" in await resp.json()
        # And a good request still works afterwards.
        status, _, _ = await chat(session, router)
        assert status == 200


async def test_no_ready_instance_for_a_known_model_is_503_with_retry_after(
    router_1: Any,
) -> None:
    router, fleet = router_1
    fleet.engines[0].set_draining(True)
    async with aiohttp.ClientSession() as session:
        assert await async_wait_for(lambda: not router.fleet.candidates(MODEL, 0.0), 5.0)
        body = {"model": MODEL, "messages": MSG}
        async with session.post(router.url + CHAT, json=body) as resp:
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "1"
            assert (await resp.json())["error"]["code"] == "no_instance_available"


async def test_admission_limit_answers_429_with_retry_after(nats_url: str) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=1, nats_url=nats_url)),
        running_router(nats_url, max_inflight_total=0) as router,
        aiohttp.ClientSession() as session,
    ):
        await wait_for_fleet(router, 1)
        async with session.post(router.url + CHAT, json={"model": MODEL, "messages": MSG}) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "1"
            assert (await resp.json())["error"]["type"] == "rate_limit_error"


async def test_per_instance_admission_limit(nats_url: str) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=1, nats_url=nats_url, profile="tiny-cpu")),
        running_router(nats_url, max_inflight_per_instance=1) as router,
        aiohttp.ClientSession() as session,
    ):
        await wait_for_fleet(router, 1)
        slow = {"model": MODEL, "messages": MSG, "max_tokens": 30, "stream": True}
        async with session.post(router.url + CHAT, json=slow) as first:
            assert first.status == 200  # headers are back; the stream is still running
            # While the first one is in flight the only instance is full.
            async with session.post(router.url + CHAT, json={"model": MODEL, "messages": MSG}) as r:
                assert r.status == 429
                assert (await r.json())["error"]["code"] == "rate_limit_exceeded"
            await first.read()
        status, _, _ = await chat(session, router)
        assert status == 200


async def test_api_keys_are_required_when_configured(nats_url: str) -> None:
    async with (
        SimFleet(SimFleetConfig(engines=1, nats_url=nats_url)),
        running_router(nats_url, api_keys=frozenset({"k1"})) as router,
        aiohttp.ClientSession() as session,
    ):
        await wait_for_fleet(router, 1)
        body = {"model": MODEL, "messages": MSG, "max_tokens": 1}
        async with session.post(router.url + CHAT, json=body) as resp:
            assert resp.status == 401
            assert (await resp.json())["error"]["type"] == "authentication_error"
        async with session.post(
            router.url + CHAT, json=body, headers={"Authorization": "Bearer wrong"}
        ) as resp:
            assert resp.status == 401
        async with session.post(
            router.url + CHAT, json=body, headers={"Authorization": "Bearer k1"}
        ) as resp:
            assert resp.status == 200
        async with session.get(router.url + "/health") as resp:
            assert resp.status == 200  # probes need no key
