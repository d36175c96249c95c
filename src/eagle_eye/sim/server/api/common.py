"""What every API flavour shares: the engine seam, JSON bodies, errors, /health, /metrics.

Handlers see the engine only through ``ServedEngine`` (``SimEngineServer`` implements
it), so each flavour's module is HTTP in, ``admit``/``tokens`` calls, HTTP out.
``protocol.BadRequest`` raised anywhere in a handler becomes an OpenAI-shaped error
response (``openai_errors``), as vLLM answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from aiohttp import web
from aiohttp.typedefs import Handler

from eagle_eye.sim import protocol
from eagle_eye.sim.engine import EngineCore
from eagle_eye.sim.metrics import EngineMetrics
from eagle_eye.sim.request import SimRequest
from eagle_eye.sim.server.spec import EngineSpec

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class GenThroughputMeter:
    """SGLang's ``gen_throughput``: generated tokens per simulated second between samples.

    ``/metrics`` and ``/v1/loads`` both sample it, so the window is the time since the
    last scrape of either. It outlives restarts: a restarted engine's clock starts again
    at 0, and the previous rate is reported until it passes the last sample.
    """

    def __init__(self) -> None:
        self._rate_tps = 0.0
        self._last: tuple[float, int] = (0.0, 0)
        """(simulated seconds, generation tokens) at the last sample that moved."""

    def sample(self, core: EngineCore) -> float:
        now, tokens = core.now_s, core.counters.generation_tokens
        last_t, last_tokens = self._last
        if now > last_t:
            self._rate_tps = (tokens - last_tokens) / (now - last_t)
            self._last = (now, tokens)
        return self._rate_tps


class ServedEngine(Protocol):
    """The engine as its HTTP handlers see it."""

    spec: EngineSpec
    draining: bool
    """Finish what runs, refuse new work: ``/health`` answers 503."""
    gen_throughput: GenThroughputMeter

    @property
    def core(self) -> EngineCore: ...

    @property
    def metrics(self) -> EngineMetrics: ...

    def admit(
        self, order: protocol.WorkOrder, trace_headers: Mapping[str, str] | None = None
    ) -> SimRequest:
        """Queue a request; raises ``protocol.BadRequest`` (503 while draining).
        ``trace_headers`` carry the caller's ``traceparent`` (engine spans join it)."""
        ...

    def tokens(self, req: SimRequest) -> AsyncIterator[str]:
        """Text as the engine produces it, until ``req`` finishes."""
        ...


@web.middleware
async def openai_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer ``protocol.BadRequest`` with its status and OpenAI error object."""
    try:
        return await handler(request)
    except protocol.BadRequest as exc:
        return web.json_response(exc.body(), status=exc.status)


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise protocol.BadRequest(f"invalid JSON body: {exc}") from exc
    if not isinstance(body, dict):
        raise protocol.BadRequest("the body must be a JSON object")
    return body


def check_model(body: dict[str, Any], served_model: str) -> None:
    """404 when the body names a model other than the one served (absent is fine)."""
    model = body.get("model")
    if model is not None and model != served_model:
        raise protocol.BadRequest(
            f"The model `{model}` does not exist.",
            status=404,
            param="model",
            type_="NotFoundError",
        )


class OpsRoutes:
    """``/health`` and ``/metrics``, which both flavours serve."""

    def __init__(self, engine: ServedEngine) -> None:
        self.engine = engine

    async def health(self, request: web.Request) -> web.StreamResponse:
        if self.engine.draining:
            return web.Response(status=503, text="draining")
        return web.Response(status=200)

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        engine = self.engine
        body = engine.metrics.render(gen_throughput=engine.gen_throughput.sample(engine.core))
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})
