"""Real pieces for router tests: nats-server, simulated engines on HTTP, the router."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from eagle_eye.route.config import BACKEND_HEADER, RouterConfig
from eagle_eye.route.dispatch import Attempt
from eagle_eye.route.gateway import Router
from eagle_eye.route.observers import DispatchObserver
from eagle_eye.settings import nats_from_env
from eagle_eye.sim.fleet import SimFleet
from support import async_wait_for

MODEL = "sim-llama"


@contextlib.asynccontextmanager
async def running_router(nats_url: str | None = None, **overrides: Any) -> AsyncIterator[Router]:
    """A router on 127.0.0.1, kernel-chosen port, deterministic tie-breaks."""
    fields: dict[str, Any] = {"port": 0, "rng_seed": 0}
    if nats_url is not None:
        fields["nats"] = nats_from_env({}, url=nats_url)
    fields.update(overrides)
    router = Router(RouterConfig(**fields))
    await router.start()
    try:
        yield router
    finally:
        await router.close()


async def wait_for_fleet(
    router: Router, n: int, model: str = MODEL, timeout_s: float = 5.0
) -> None:
    """Until ``n`` instances of ``model`` are routable on fresh snapshots."""

    def ready() -> bool:
        now = time.monotonic()
        c = router.fleet.candidates(model, now)
        return len(c) == n and all(t.fresh(now, router.fleet.stale_after_s) for t in c)

    assert await async_wait_for(ready, timeout_s), router.fleet_json()


def engine_index(fleet: SimFleet) -> dict[str, int]:
    return {e.url: i for i, e in enumerate(fleet.engines)}


async def chat(
    session: aiohttp.ClientSession,
    router: Router,
    content: str = "Hello AI",
    *,
    max_tokens: int = 4,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> tuple[int, str, dict[str, Any]]:
    """One non-streaming chat request; (status, serving backend URL, body)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}]}
    body.update(max_tokens=max_tokens, **extra)
    async with session.post(
        router.url + "/v1/chat/completions", json=body, headers=headers or {}
    ) as resp:
        data = await resp.json(content_type=None)
        return resp.status, resp.headers.get(BACKEND_HEADER, ""), data


def by_engine(fleet: SimFleet, backends: list[str]) -> Counter[int]:
    index = engine_index(fleet)
    return Counter(index[b] for b in backends)


class DecisionLog(DispatchObserver):
    """The router's routing decisions in the order it made them (append it to
    ``router.dispatcher.observers``)."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def on_dispatched(self, attempt: Attempt) -> None:
        self.urls.append(attempt.target.url)
