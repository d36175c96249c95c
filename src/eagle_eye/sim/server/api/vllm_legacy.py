"""vLLM's legacy API server ``/generate`` (flavour ``vllm``): the oldest client shape.

``{"prompt": ..., "stream"?, sampling params...}`` answers ``{"text": [prompt + output]}``;
with ``stream`` it sends one such JSON object per line as the text grows. Without
``max_tokens`` it generates 16 tokens, vLLM's ``SamplingParams`` default.
"""

from __future__ import annotations

import json

from aiohttp import web

from eagle_eye.sim import protocol
from eagle_eye.sim.server.api.common import ServedEngine, read_json_object


class LegacyGenerateRoute:
    """``/generate`` as ``vllm.entrypoints.api_server`` serves it."""

    def __init__(self, engine: ServedEngine) -> None:
        self.engine = engine

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        params = {k: v for k, v in body.items() if k not in ("stream",)}
        params.setdefault("max_tokens", 16)  # vLLM SamplingParams default
        spec = self.engine.spec
        order = protocol.parse_completion(
            {**params, "stream": False},
            block_size=spec.profile.block_size,
            seed=spec.seed,
        )
        req = self.engine.admit(order)
        prompt = order.prompt_text or ""
        if not body.get("stream"):
            text = "".join([t async for t in self.engine.tokens(req)])
            return web.json_response({"text": [prompt + text]})
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        so_far = prompt
        async for text in self.engine.tokens(req):
            so_far += text
            await response.write((json.dumps({"text": [so_far]}) + "\n").encode())
        await response.write_eof()
        return response
