"""One simulated engine on HTTP: the engine loop, the OpenAI/vLLM API and ``/metrics``.

``SimEngineServer`` owns an ``EngineCore`` and drives it in real (scaled) time on the
running asyncio loop: plan a step, sleep until it ends on the ``SimClock``, complete it,
wake the streams whose requests got tokens, fold the step into ``/metrics`` and hand the
step's vLLM-shaped stats to the real ``EagleEyeStatLogger.record()``.

Routes: ``/v1/completions``, ``/v1/chat/completions`` (SSE or not), ``/v1/models``,
``/health``, ``/generate`` (vLLM's legacy API server; SGLang's native shape for flavor
``sglang``), ``/metrics``, and for flavor ``sglang`` ``/v1/loads`` (and ``/get_load``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from eagle_eye.publish.publisher import InstanceIdentity, Publisher
from eagle_eye.publish.vllm_plugin import EagleEyeStatLogger
from eagle_eye.settings import PublisherSettings
from eagle_eye.sim import protocol
from eagle_eye.sim.clock import SimClock
from eagle_eye.sim.cost_model import CostProfile
from eagle_eye.sim.engine import EngineCore, RequestRejectedError, StepResult
from eagle_eye.sim.metrics import EngineMetrics
from eagle_eye.sim.request import FinishReason, RequestStatus, SimRequest
from eagle_eye.sim.tokens import eos_position, generated_text
from eagle_eye.snapshot import EngineState

log = logging.getLogger(__name__)

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSpec:
    """Everything that defines one simulated engine (fixed across restarts)."""

    index: int
    instance_id: str
    host: str
    port: int
    """0: a kernel-chosen port (kept across ``restart()``)."""
    flavor: str
    model: str
    profile: CostProfile
    speed_factor: float
    seed: int


class _Stream:
    """Wakes the HTTP handler of one request when the engine has news for it."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = asyncio.Event()


class SimEngineServer:
    """A simulated vLLM (or SGLang) server. ``start``/``stop``/``kill``/``restart``."""

    def __init__(
        self,
        spec: EngineSpec,
        clock: SimClock,
        *,
        publisher: Publisher | None = None,
        publisher_settings: PublisherSettings | None = None,
    ) -> None:
        self.spec = spec
        self.clock = clock
        self._publisher = publisher
        self._publisher_settings = publisher_settings
        self.port = spec.port
        self.core = self._new_core()
        self.metrics = EngineMetrics(
            flavor=spec.flavor,
            model=spec.model,
            engine_index=0,
            core=self.core,
            gpu_uuid=f"GPU-sim-{spec.instance_id}",
        )
        self.stat_logger: EagleEyeStatLogger | None = None
        self.draining = False
        self.running = False
        self._runner: web.AppRunner | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._pending: deque[SimRequest] = deque()
        self._transports: set[asyncio.Transport] = set()
        self._seq = 0
        self._gen_rate = 0.0
        self._last_gen = (0.0, 0)

    # -- identity --------------------------------------------------------------------------

    @property
    def instance_id(self) -> str:
        return self.spec.instance_id

    @property
    def url(self) -> str:
        return f"http://{self.spec.host}:{self.port}"

    @property
    def engine_kind(self) -> str:
        return "sglang" if self.spec.flavor == "sglang" else "vllm"

    def _new_core(self) -> EngineCore:
        return EngineCore(self.spec.profile, speed_factor=self.spec.speed_factor)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, announce the engine over NATS (if any) and start stepping."""
        if self.running:
            return
        app = web.Application(middlewares=[self._track_transport], client_max_size=64 * 2**20)
        self._routes(app)
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.spec.host, self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = int(runner.addresses[0][1])
        self._runner = runner
        self.running = True
        self._attach_logger()
        self._loop_task = asyncio.create_task(self._engine_loop(), name=f"sim-{self.instance_id}")

    def _attach_logger(self) -> None:
        if self._publisher is None:
            return
        identity = InstanceIdentity(
            instance_id=self.instance_id,
            model=self.spec.model,
            engine=self.engine_kind,
            endpoint=self.url,
            engine_version="eagle-eye-sim",
            kv_capacity_tokens=self.spec.profile.kv_capacity_tokens,
        )
        settings = self._publisher_settings or PublisherSettings(nats=None)
        self.stat_logger = EagleEyeStatLogger(
            None, 0, settings=settings, identity=identity, publisher=self._publisher
        )
        self.stat_logger.log_engine_initialized()
        if self.draining:
            self.stat_logger.record_sleep_state(1, 1)

    def _detach_logger(self, final_state: EngineState) -> None:
        logger, self.stat_logger = self.stat_logger, None
        if logger is not None and logger.channel is not None and self._publisher is not None:
            self._publisher.remove(logger.channel, final_state=final_state)

    async def stop(self) -> None:
        """Graceful stop: publish ``stopping``, close the listener, end open requests."""
        await self._shutdown(EngineState.STOPPING, abort_connections=False)

    async def kill(self) -> None:
        """Abrupt stop: drop every open connection mid-stream and stop listening.

        Requests in flight are lost (clients see a reset connection), the cache is gone,
        and the engine's snapshot stream ends with ``unreachable``.
        """
        await self._shutdown(EngineState.UNREACHABLE, abort_connections=True)

    async def restart(self) -> None:
        """Come back on the same port as a fresh process: empty cache, counters at 0."""
        if self.running:
            await self.kill()
        self.core = self._new_core()
        self.metrics = EngineMetrics(
            flavor=self.spec.flavor,
            model=self.spec.model,
            engine_index=0,
            core=self.core,
            gpu_uuid=f"GPU-sim-{self.spec.instance_id}",
        )
        await self.start()

    def set_draining(self, draining: bool = True) -> None:
        """``draining``: finish what runs, refuse new work (503), publish ``draining``."""
        self.draining = draining
        if self.stat_logger is not None:
            # vLLM passes 1 when going to sleep, 0 on waking (the plugin reads it so).
            self.stat_logger.record_sleep_state(1 if draining else 0, 1)

    async def _shutdown(self, final_state: EngineState, *, abort_connections: bool) -> None:
        if not self.running:
            return
        self.running = False
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.to_thread(self._detach_logger, final_state)
        for req in [*self.core.running, *self.core.waiting, *self._pending]:
            self._abort(req)
        if abort_connections:
            for transport in list(self._transports):
                transport.abort()
        self._transports.clear()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # -- the engine loop -------------------------------------------------------------------

    async def _engine_loop(self) -> None:
        """Step back to back on the engine's own timeline, admitting arrivals in order.

        The engine's time only jumps forward to the clock when it is idle; if the CPU
        cannot keep up with ``speedup`` the engine lags the wall clock but every time it
        reports stays consistent with the cost model (an arrival never joins a step that
        started before it).
        """
        core = self.core
        pending = self._pending
        while True:
            while pending and pending[0].arrival_s <= core.now_s:
                core.add_request(pending.popleft())
            if not core.has_work:
                if pending:
                    core.now_s = pending[0].arrival_s
                    continue
                self._wake.clear()
                await self._wake.wait()
                continue
            plan = core.plan_step(core.now_s)
            if plan is None:  # cannot happen: requests are checked against capacity
                raise RuntimeError(f"{self.instance_id}: work that cannot be scheduled")
            await self.clock.sleep_until(plan.end_s)
            result = core.complete(plan)
            self._after_step(result)

    def _after_step(self, result: StepResult) -> None:
        for req, _ in result.emitted:
            self._notify(req)
        self.metrics.observe_step(result)
        logger = self.stat_logger
        if logger is not None:
            logger.record(result.scheduler_stats, result.iteration_stats)

    @staticmethod
    def _notify(req: SimRequest) -> None:
        stream = req.tag
        if isinstance(stream, _Stream):
            stream.event.set()

    # -- HTTP ------------------------------------------------------------------------------

    @web.middleware
    async def _track_transport(self, request: web.Request, handler: Any) -> web.StreamResponse:
        transport = request.transport
        if transport is not None:
            self._transports.add(transport)
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except protocol.BadRequest as exc:
            return web.json_response(exc.body(), status=exc.status)
        finally:
            if transport is not None:
                self._transports.discard(transport)

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_post("/generate", self._generate)
        app.router.add_get("/metrics", self._metrics)
        if self.spec.flavor == "sglang":
            app.router.add_get("/v1/loads", self._loads)
            app.router.add_get("/get_load", self._loads)

    async def _json_body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
            raise protocol.BadRequest(f"invalid JSON body: {exc}") from exc
        if not isinstance(body, dict):
            raise protocol.BadRequest("the body must be a JSON object")
        return body

    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model is not None and model != self.spec.model:
            raise protocol.BadRequest(
                f"The model `{model}` does not exist.",
                status=404,
                param="model",
                type_="NotFoundError",
            )

    def _admit(self, order: protocol.WorkOrder) -> SimRequest:
        if self.draining or not self.running:
            raise protocol.BadRequest(
                "the engine is draining", status=503, type_="ServiceUnavailableError"
            )
        core = self.core
        prompt_tokens = order.prompt_tokens
        if prompt_tokens >= core.max_model_len:
            raise protocol.BadRequest(
                f"This model's maximum context length is {core.max_model_len} tokens. "
                f"However, your request has {prompt_tokens} input tokens. Please reduce the "
                "length of the input messages.",
                param="prompt",
            )
        # vLLM (0.10+) caps max_tokens to the room left in the context instead of failing.
        room = core.max_model_len - prompt_tokens
        max_tokens = room if order.max_tokens is None else min(order.max_tokens, room)
        eos = None
        if not order.ignore_eos:
            eos = eos_position(order.key, core.profile.mean_output_tokens)
        self._seq += 1
        req = SimRequest(
            request_id=f"{self.instance_id}-{self._seq}",
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            block_hashes=order.block_hashes,
            arrival_s=self.clock.now_s(),
            eos_after=eos,
            text_key=order.key,
            tag=_Stream(),
        )
        try:
            core.check(req.prompt_tokens, req.max_tokens)
        except RequestRejectedError as exc:
            raise protocol.BadRequest(str(exc), param="max_tokens") from exc
        self._pending.append(req)
        self._wake.set()
        return req

    def submit_local(
        self,
        prompt_tokens: int,
        max_tokens: int,
        *,
        block_hashes: list[int] | None = None,
        ignore_eos: bool = True,
    ) -> SimRequest:
        """Queue a request without HTTP (benchmarks, tests); poll the returned request."""
        order = protocol.WorkOrder(
            prompt_text=None,
            prompt_tokens=prompt_tokens,
            block_hashes=block_hashes or [],
            key=prompt_tokens,
            max_tokens=max_tokens,
            ignore_eos=ignore_eos,
            stream=False,
            include_usage=False,
        )
        return self._admit(order)

    async def _tokens(self, req: SimRequest) -> AsyncIterator[str]:
        """Text as the engine produces it; aborts the request if the client goes away."""
        stream = req.tag
        assert isinstance(stream, _Stream)
        sent = 0
        try:
            while True:
                await stream.event.wait()
                stream.event.clear()
                have = req.output_tokens
                if have > sent:
                    yield generated_text(req.text_key, sent, have - sent)
                    sent = have
                if req.status is RequestStatus.FINISHED:
                    return
        finally:
            if req.status is not RequestStatus.FINISHED:
                self._abort(req)

    def _abort(self, req: SimRequest) -> None:
        if req in self._pending:
            self._pending.remove(req)
            req.status = RequestStatus.FINISHED
            req.finish_reason = FinishReason.ABORT
        else:
            self.core.abort(req.request_id, self.core.now_s)
        self._notify(req)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json_body(request)
        self._check_model(body)
        order = protocol.parse_completion(
            body, block_size=self.spec.profile.block_size, seed=self.spec.seed
        )
        return await self._serve_openai(request, order, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._json_body(request)
        self._check_model(body)
        order = protocol.parse_chat(
            body, block_size=self.spec.profile.block_size, seed=self.spec.seed
        )
        return await self._serve_openai(request, order, chat=True)

    async def _serve_openai(
        self, request: web.Request, order: protocol.WorkOrder, *, chat: bool
    ) -> web.StreamResponse:
        req = self._admit(order)
        model = self.spec.model
        created = int(time.time())
        rid = protocol.new_id("chatcmpl" if chat else "cmpl")
        if not order.stream:
            text = "".join([t async for t in self._tokens(req)])
            if req.finish_reason is None or req.finish_reason.value == "abort":
                raise protocol.BadRequest(
                    "the engine stopped", status=503, type_="ServiceUnavailableError"
                )
            return web.json_response(
                protocol.completion_body(
                    rid,
                    model,
                    created,
                    text,
                    req.finish_reason.value,
                    self._usage(req),
                    chat=chat,
                )
            )
        response = web.StreamResponse(headers=_SSE_HEADERS)
        await response.prepare(request)
        usage_null = {"usage": None} if order.include_usage else {}

        async def send(obj: dict[str, Any]) -> None:
            await response.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        if chat:
            await send(
                {
                    **protocol.completion_chunk(
                        rid, model, created, "", None, chat=True, first=True
                    ),
                    **usage_null,
                }
            )
        async for text in self._tokens(req):
            finish = None
            if req.status is RequestStatus.FINISHED and req.finish_reason is not None:
                finish = req.finish_reason.value
            await send(
                {
                    **protocol.completion_chunk(rid, model, created, text, finish, chat=chat),
                    **usage_null,
                }
            )
        if req.finish_reason is not None and req.finish_reason.value == "abort":
            raise ConnectionResetError("engine stopped")  # drop the stream without [DONE]
        if order.include_usage:
            await send(protocol.usage_chunk(rid, model, created, self._usage(req), chat=chat))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    @staticmethod
    def _usage(req: SimRequest) -> dict[str, Any]:
        return protocol.usage(req.prompt_tokens, req.output_tokens, max(0, req.num_cached_tokens))

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._json_body(request)
        if self.spec.flavor == "sglang":
            return await self._generate_sglang(body)
        params = {k: v for k, v in body.items() if k not in ("stream",)}
        params.setdefault("max_tokens", 16)  # vLLM SamplingParams default
        order = protocol.parse_completion(
            {**params, "stream": False},
            block_size=self.spec.profile.block_size,
            seed=self.spec.seed,
        )
        req = self._admit(order)
        prompt = order.prompt_text or ""
        if not body.get("stream"):
            text = "".join([t async for t in self._tokens(req)])
            return web.json_response({"text": [prompt + text]})
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        so_far = prompt
        async for text in self._tokens(req):
            so_far += text
            await response.write((json.dumps({"text": [so_far]}) + "\n").encode())
        await response.write_eof()
        return response

    async def _generate_sglang(self, body: dict[str, Any]) -> web.StreamResponse:
        sampling = body.get("sampling_params") or {}
        if not isinstance(sampling, dict):
            raise protocol.BadRequest("sampling_params must be an object", param="sampling_params")
        merged = {
            "prompt": body.get("text"),
            "max_tokens": sampling.get("max_new_tokens", 128),
            "ignore_eos": sampling.get("ignore_eos", False),
        }
        for key in ("eagle_eye_hash_ids", "eagle_eye_prompt_tokens"):
            if key in body:
                merged[key] = body[key]
        order = protocol.parse_completion(
            merged, block_size=self.spec.profile.block_size, seed=self.spec.seed
        )
        req = self._admit(order)
        text = "".join([t async for t in self._tokens(req)])
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

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(protocol.models_body(self.spec.model, self.core.max_model_len))

    async def _health(self, request: web.Request) -> web.StreamResponse:
        if self.draining:
            return web.Response(status=503, text="draining")
        return web.Response(status=200)

    def _generation_rate(self) -> float:
        """Tokens per simulated second since the previous call (SGLang's gen_throughput)."""
        now, tokens = self.core.now_s, self.core.counters.generation_tokens
        last_t, last_tokens = self._last_gen
        if now > last_t:
            self._gen_rate = (tokens - last_tokens) / (now - last_t)
            self._last_gen = (now, tokens)
        return self._gen_rate

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        body = self.metrics.render(gen_throughput=self._generation_rate())
        return web.Response(body=body, headers={"Content-Type": _METRICS_CONTENT_TYPE})

    async def _loads(self, request: web.Request) -> web.StreamResponse:
        core = self.core
        c = core.counters
        used = core.kv.used_blocks * core.block_size
        total = core.profile.kv_capacity_tokens
        load = {
            "dp_rank": 0,
            "num_running_reqs": len(core.running),
            "num_waiting_reqs": len(core.waiting),
            "num_used_tokens": used,
            "num_total_tokens": total,
            "max_total_num_tokens": total,
            "token_usage": core.kv.usage,
            "gen_throughput": self._generation_rate(),
            "cache_hit_rate": c.prefix_hits / c.prefix_queries if c.prefix_queries else 0.0,
            "utilization": 1.0 if core.has_work else 0.0,
        }
        return web.json_response(
            {"timestamp": time.time(), "version": "eagle-eye-sim", "loads": [load]}
        )
