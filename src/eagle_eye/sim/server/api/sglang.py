"""SGLang's native API: ``/generate`` and ``/v1/loads`` (``/get_load``), flavour ``sglang``.

``/generate`` takes ``{"text", "sampling_params": {"max_new_tokens", "ignore_eos"}}`` (plus
the simulator's ``eagle_eye_*`` fields at top level) and answers once with
``{"text", "meta_info"}``. ``/v1/loads`` reports what SGLang's router polls: running and
waiting requests, KV tokens used, ``gen_throughput``, cache hit rate.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from eagle_eye.sim import protocol
from eagle_eye.sim.server.api.common import ServedEngine, read_json_object

_PASSED_THROUGH = ("eagle_eye_hash_ids", "eagle_eye_prompt_tokens")


class SGLangRoutes:
    """``/generate`` in SGLang's shape, and the load report."""

    def __init__(self, engine: ServedEngine) -> None:
        self.engine = engine

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        sampling = body.get("sampling_params") or {}
        if not isinstance(sampling, dict):
            raise protocol.BadRequest("sampling_params must be an object", param="sampling_params")
        merged = {
            "prompt": body.get("text"),
            "max_tokens": sampling.get("max_new_tokens", 128),
            "ignore_eos": sampling.get("ignore_eos", False),
        }
        for key in _PASSED_THROUGH:
            if key in body:
                merged[key] = body[key]
        spec = self.engine.spec
        order = protocol.parse_completion(
            merged, block_size=spec.profile.block_size, seed=spec.seed
        )
        req = self.engine.admit(order)
        text = "".join([t async for t in self.engine.tokens(req)])
        reason = req.finish_reason.value if req.finish_reason else "abort"
        return web.json_response(
            {
                "text": text,
                "meta_info": {
                    "id": req.request_id,
                    "prompt_tokens": req.prompt_tokens,
                    "completion_tokens": req.output_tokens,
                    "cached_tokens": max(0, req.num_cached_tokens),
                    "finish_reason": {"type": reason},
                    "e2e_latency": req.e2e_s,
                },
            }
        )

    async def loads(self, request: web.Request) -> web.StreamResponse:
        core = self.engine.core
        c = core.counters
        used = core.kv.used_blocks * core.block_size
        total = core.profile.kv_capacity_tokens
        load: dict[str, Any] = {
            "dp_rank": 0,
            "num_running_reqs": len(core.running),
            "num_waiting_reqs": len(core.waiting),
            "num_used_tokens": used,
            "num_total_tokens": total,
            "max_total_num_tokens": total,
            "token_usage": core.kv.usage,
            "gen_throughput": self.engine.gen_throughput.sample(core),
            "cache_hit_rate": c.prefix_hits / c.prefix_queries if c.prefix_queries else 0.0,
            "utilization": 1.0 if core.has_work else 0.0,
        }
        return web.json_response(
            {"timestamp": time.time(), "version": "eagle-eye-sim", "loads": [load]}
        )
