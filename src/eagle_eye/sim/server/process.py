"""One simulated engine process on HTTP: start, stop, and the faults tests inject.

``SimEngineServer`` is what a fleet holds per engine. It listens (``api`` routes for its
flavour), announces itself through the real vLLM plugin class over a shared
``Publisher``, and runs an ``EngineLoop`` that steps its ``EngineCore``. Its lifecycle
is the one a real engine has, including the ways it goes wrong:

* ``stop()``: graceful; the snapshot stream ends with ``stopping``.
* ``kill()``: a crash; open connections are reset mid-stream (``ConnectionTracker``),
  requests in flight are lost, the stream ends with ``unreachable``.
* ``restart()``: back on the same port as a fresh process (empty cache, counters at 0).
* ``set_draining()``: finish what runs, refuse new work with 503, publish ``draining``.

Requests reach the engine through ``admit`` (HTTP handlers) or ``submit_local``
(benchmarks and tests, no HTTP). Given an OpenTelemetry ``tracer``, the server records
vLLM-shaped engine spans for the requests it serves over HTTP, joined to the trace in
their ``traceparent`` (``tracing.py``); without one it never imports OpenTelemetry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from eagle_eye.publish.channel import InstanceIdentity
from eagle_eye.publish.publisher import Publisher
from eagle_eye.publish.vllm_plugin import EngineStatLogger
from eagle_eye.settings import PublisherSettings
from eagle_eye.sim import protocol
from eagle_eye.sim.clock import SimClock
from eagle_eye.sim.engine import EngineCore, RequestRejectedError
from eagle_eye.sim.metrics import EngineMetrics
from eagle_eye.sim.request import SimRequest
from eagle_eye.sim.server.api import add_routes
from eagle_eye.sim.server.api.common import GenThroughputMeter, openai_errors
from eagle_eye.sim.server.connections import ConnectionTracker
from eagle_eye.sim.server.loop import EngineLoop, TokenSignal
from eagle_eye.sim.server.spec import EngineSpec
from eagle_eye.sim.tokens import eos_position
from eagle_eye.snapshot import EngineState

if TYPE_CHECKING:
    from eagle_eye.sim.server.tracing import EngineTracer

_MAX_BODY_BYTES = 64 * 2**20


class SimEngineServer:
    """A simulated vLLM (or SGLang) server. ``start``/``stop``/``kill``/``restart``."""

    def __init__(
        self,
        spec: EngineSpec,
        clock: SimClock,
        *,
        publisher: Publisher | None = None,
        publisher_settings: PublisherSettings | None = None,
        tracer: Any = None,
    ) -> None:
        """``tracer``: an OpenTelemetry ``Tracer`` for engine spans; None: no tracing."""
        self.spec = spec
        self.clock = clock
        self._publisher = publisher
        self._publisher_settings = publisher_settings
        self.port = spec.port
        self.loop = self._new_loop()
        """The engine process's step loop (a restart replaces it, with its core)."""
        self.draining = False
        self.running = False
        self.gen_throughput = GenThroughputMeter()
        self._runner: web.AppRunner | None = None
        self._connections = ConnectionTracker()
        self._seq = 0
        """Requests admitted so far (request ids keep counting across restarts)."""
        self.tracer: EngineTracer | None = None
        if tracer is not None:
            from eagle_eye.sim.server.tracing import EngineTracer

            self.tracer = EngineTracer(
                tracer, clock, model=spec.model, instance_id=spec.instance_id
            )

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

    @property
    def core(self) -> EngineCore:
        """The engine model of the current process."""
        return self.loop.core

    @property
    def metrics(self) -> EngineMetrics:
        return self.loop.metrics

    @property
    def stat_logger(self) -> EngineStatLogger | None:
        """The plugin instance this process publishes through (None when not publishing)."""
        return self.loop.stat_logger

    def _new_loop(self) -> EngineLoop:
        spec = self.spec
        core = EngineCore(spec.profile, speed_factor=spec.speed_factor)
        metrics = EngineMetrics(
            flavor=spec.flavor,
            model=spec.model,
            engine_index=0,
            core=core,
            gpu_uuid=f"GPU-sim-{spec.instance_id}",
        )
        return EngineLoop(core, metrics, self.clock, name=spec.instance_id)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, announce the engine over NATS (if any) and start stepping."""
        if self.running:
            return
        app = web.Application(
            middlewares=[self._connections.middleware, openai_errors],
            client_max_size=_MAX_BODY_BYTES,
        )
        add_routes(app.router, self)
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.spec.host, self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = int(runner.addresses[0][1])
        self._runner = runner
        self.running = True
        self._attach_logger()
        self.loop.start()

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
        logger = EngineStatLogger(
            None, 0, settings=settings, identity=identity, publisher=self._publisher
        )
        self.loop.stat_logger = logger
        logger.log_engine_initialized()
        if self.draining:
            logger.record_sleep_state(1, 1)

    def _detach_logger(self, final_state: EngineState) -> None:
        logger, self.loop.stat_logger = self.loop.stat_logger, None
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
        self.loop = self._new_loop()
        await self.start()

    def set_draining(self, draining: bool = True) -> None:
        """``draining``: finish what runs, refuse new work (503), publish ``draining``."""
        self.draining = draining
        logger = self.loop.stat_logger
        if logger is not None:
            # vLLM passes 1 when going to sleep, 0 on waking (the plugin reads it so).
            logger.record_sleep_state(1 if draining else 0, 1)

    async def _shutdown(self, final_state: EngineState, *, abort_connections: bool) -> None:
        if not self.running:
            return
        self.running = False
        await self.loop.stop()
        await asyncio.to_thread(self._detach_logger, final_state)
        self.loop.abort_all()
        self._connections.close(abort=abort_connections)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # -- requests --------------------------------------------------------------------------

    def admit(
        self, order: protocol.WorkOrder, trace_headers: Mapping[str, str] | None = None
    ) -> SimRequest:
        """Queue a parsed request as vLLM's front end would.

        503 while draining or stopped; 400 when the prompt fills the context. A
        ``max_tokens`` beyond the context left is capped to it (vLLM 0.10+), and without
        ``ignore_eos`` the simulated model stops at a drawn EOS position.
        ``trace_headers``: the HTTP request's headers, read for ``traceparent`` when the
        server traces.
        """
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
            tag=TokenSignal(),
            trace=self.tracer.parent_of(trace_headers) if self.tracer is not None else None,
        )
        try:
            core.check(req.prompt_tokens, req.max_tokens)
        except RequestRejectedError as exc:
            raise protocol.BadRequest(str(exc), param="max_tokens") from exc
        self.loop.submit(req)
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
        return self.admit(order)

    def tokens(self, req: SimRequest) -> AsyncIterator[str]:
        """Text as the engine produces it; aborts ``req`` if the consumer goes away."""
        if self.tracer is None or req.trace is None:
            return self.loop.tokens(req)
        return self._traced_tokens(req, self.tracer)

    async def _traced_tokens(self, req: SimRequest, tracer: EngineTracer) -> AsyncIterator[str]:
        """``loop.tokens``, then the request's spans once it is over (however it ended)."""
        try:
            async with contextlib.aclosing(self.loop.tokens(req)) as stream:
                async for text in stream:
                    yield text
        finally:
            tracer.record(req)
