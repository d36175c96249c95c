"""Active probing: what the router checks on its own, between client requests.

Passive health (``FleetView.on_failure``) ejects a target that keeps failing; nothing
would bring it back without client traffic, so ejected targets whose ejection ran out are
probed with ``GET /v1/models``. Static backends (``--backend URL``, engines that publish
no snapshots) are probed the same way until their model is known, so a request can name
it. Success heals, failure re-ejects: the same rules as for client requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

import aiohttp

from eagle_eye.fleet.target import Health, Target
from eagle_eye.fleet.view import FleetView

PROBE_PATH = "/v1/models"
PROBE_TIMEOUT_S = 2.0


class Prober:
    """Probes due targets every ``interval_s`` over the router's own connection pool."""

    def __init__(
        self,
        fleet: FleetView,
        session: Callable[[], aiohttp.ClientSession | None],
        *,
        interval_s: float,
    ) -> None:
        self.fleet = fleet
        self._session = session
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Learn static backends' models now (so the first request can name one), then
        keep probing in the background."""
        static = [t for t in self.fleet.targets() if t.static and t.model is None]
        if static:
            await asyncio.gather(*(self.probe(t) for t in static))
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            now = time.monotonic()
            due = [
                t
                for t in self.fleet.targets()
                if (t.health is Health.EJECTED and now >= t.eject_until_mono_s)
                or (t.static and t.model is None)
            ]
            if due:
                await asyncio.gather(*(self.probe(t) for t in due))

    async def probe(self, target: Target) -> None:
        session = self._session()
        if session is None:
            return
        try:
            async with session.get(
                target.url + PROBE_PATH, timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
            ) as resp:
                ok = resp.status < 500
                body = await resp.read() if resp.status == 200 else b""
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            ok, body = False, b""
        if not ok:
            self.fleet.on_failure(target, time.monotonic())
            return
        self.fleet.on_success(target)
        if target.static and target.model is None and body:
            self.fleet.learn_static_models(target, models_of(body))


def models_of(body: bytes) -> list[tuple[str, str | None]]:
    """(id, parent) pairs from an OpenAI ``/v1/models`` answer (vLLM lists LoRA adapters
    with their base model as ``parent``)."""
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return []
    out = []
    for item in data if isinstance(data, list) else ():
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            parent = item.get("parent")
            out.append((item["id"], parent if isinstance(parent, str) else None))
    return out
