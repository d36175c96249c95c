"""The engine loop: steps one ``EngineCore`` in scaled real time and publishes every step.

``EngineLoop`` is the only place a real-time engine steps. It admits queued arrivals in
order, plans a step, sleeps on the ``SimClock`` until the step ends, completes it, then
fans the step out: wake the streams whose requests got tokens, fold the step into
``/metrics``, and hand the step's vLLM-shaped stats to the real
``EngineStatLogger.record()`` (the plugin that runs inside vLLM), which publishes the
snapshot. One loop lives as long as one engine process: a restart builds a new one.

HTTP handlers talk to it through ``submit`` (queue a request), ``tokens`` (text as the
engine produces it) and ``abort``; each request's ``tag`` is its ``TokenSignal``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator

from eagle_eye.publish.vllm_plugin import EngineStatLogger
from eagle_eye.sim.clock import SimClock
from eagle_eye.sim.engine import EngineCore
from eagle_eye.sim.metrics import EngineMetrics
from eagle_eye.sim.request import FinishReason, RequestStatus, SimRequest
from eagle_eye.sim.step import StepResult
from eagle_eye.sim.tokens import generated_text


class TokenSignal:
    """Wakes the HTTP handler of one request when the engine has news for it."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = asyncio.Event()


class EngineLoop:
    """Drives ``core`` on ``clock``; ``start`` it on the running asyncio loop."""

    def __init__(
        self, core: EngineCore, metrics: EngineMetrics, clock: SimClock, *, name: str
    ) -> None:
        self.core = core
        self.metrics = metrics
        self.clock = clock
        self.name = name
        """The instance id: names the task and errors."""
        self.stat_logger: EngineStatLogger | None = None
        """The plugin each step is recorded to; None: no publishing."""
        self._pending: deque[SimRequest] = deque()
        """Admitted requests not yet handed to the core, in arrival order."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"sim-{self.name}")

    async def stop(self) -> None:
        """Cancel the step loop and wait for it; requests stay where they are."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def submit(self, req: SimRequest) -> None:
        """Queue ``req`` (its ``arrival_s`` set, its ``tag`` a ``TokenSignal``)."""
        self._pending.append(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        """Drop ``req`` wherever it is (queued or in the core) and wake its stream."""
        if req in self._pending:
            self._pending.remove(req)
            req.status = RequestStatus.FINISHED
            req.finish_reason = FinishReason.ABORT
        else:
            self.core.abort(req.request_id, self.core.now_s)
        self._notify(req)

    def abort_all(self) -> None:
        """Abort every request the engine holds (the process is going away)."""
        for req in [*self.core.running, *self.core.waiting, *self._pending]:
            self.abort(req)

    async def tokens(self, req: SimRequest) -> AsyncGenerator[str, None]:
        """Text as the engine produces it; aborts the request if the client goes away."""
        stream = req.tag
        assert isinstance(stream, TokenSignal)
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
                self.abort(req)

    async def _run(self) -> None:
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
                raise RuntimeError(f"{self.name}: work that cannot be scheduled")
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
        if isinstance(stream, TokenSignal):
            stream.event.set()
