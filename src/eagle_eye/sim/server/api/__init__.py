"""The HTTP APIs of a simulated engine, one module per flavour, and the route table.

* ``openai``: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models`` (both flavours)
* ``vllm_legacy``: ``/generate`` of vLLM's legacy API server (flavour ``vllm``)
* ``sglang``: SGLang's native ``/generate``, ``/v1/loads`` and ``/get_load`` (flavour
  ``sglang``)
* ``common``: ``/health``, ``/metrics``, the ``ServedEngine`` seam, JSON bodies, errors
"""

from __future__ import annotations

from aiohttp import web

from eagle_eye.sim.server.api.common import OpsRoutes, ServedEngine
from eagle_eye.sim.server.api.openai import OpenAIRoutes
from eagle_eye.sim.server.api.sglang import SGLangRoutes
from eagle_eye.sim.server.api.vllm_legacy import LegacyGenerateRoute


def add_routes(router: web.UrlDispatcher, engine: ServedEngine) -> None:
    """Every route ``engine`` serves, for its flavour."""
    openai_routes, ops = OpenAIRoutes(engine), OpsRoutes(engine)
    router.add_post("/v1/completions", openai_routes.completions)
    router.add_post("/v1/chat/completions", openai_routes.chat)
    router.add_get("/v1/models", openai_routes.models)
    router.add_get("/health", ops.health)
    if engine.spec.flavor == "sglang":
        sglang = SGLangRoutes(engine)
        router.add_post("/generate", sglang.generate)
        router.add_get("/metrics", ops.metrics)
        router.add_get("/v1/loads", sglang.loads)
        router.add_get("/get_load", sglang.loads)
    else:
        router.add_post("/generate", LegacyGenerateRoute(engine).generate)
        router.add_get("/metrics", ops.metrics)
