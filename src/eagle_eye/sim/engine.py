"""The simulated engine core: vLLM V1's scheduler over a block KV cache (pure, no I/O).

One ``EngineCore`` is one vLLM engine. Time is whatever the caller says it is: the
real-time server passes its simulated clock, the offline fleet its virtual time. A step
is two calls, because the batch is fixed when the step starts and its tokens appear when
it ends::

    plan = core.plan_step(now_s)        # schedule: admit, allocate KV, preempt
    ... the step runs for plan.duration_s ...
    result = core.complete(plan)        # tokens appear, requests finish, stats out

Scheduling follows ``vllm/v1/core/sched/scheduler.py``:

1. Running requests first, in order: each gets ``num_tokens - num_computed_tokens`` new
   tokens (1 when decoding, a prefill chunk otherwise) within the step's token budget
   (``max_num_batched_tokens``). If its KV blocks cannot be allocated, the *last* running
   request is preempted (recompute: blocks freed, progress reset, back to the front of
   the queue) until they can, or the request itself is the victim.
2. If nothing was preempted, waiting requests are admitted FCFS while fewer than
   ``max_num_seqs`` run and budget is left: look up the longest cached prefix (at most
   ``num_tokens - 1`` tokens, so one token is always computed), then schedule the rest,
   chunked to the remaining budget. A head request that does not fit blocks the queue.
3. When a request has computed all its tokens at the end of a step, it samples one token;
   it finishes at ``max_tokens`` (``length``) or at its EOS position (``stop``).

The step's data and cost are in ``step``; offline runs skip decode steps with ``fast_forward``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from eagle_eye.errors import EagleEyeError
from eagle_eye.sim.cost_model import CostProfile
from eagle_eye.sim.kv_cache import KVCache, PrefixHit
from eagle_eye.sim.request import FinishReason, RequestStatus, SimRequest
from eagle_eye.sim.stats import (
    IterationStats,
    PrefixCacheStats,
    SchedulerStats,
    finished_request_stats,
)
from eagle_eye.sim.step import StepPlan, StepResult, StepTally, price_step

__all__ = ["EngineCore", "EngineCounters", "RequestRejectedError", "StepPlan", "StepResult"]


class RequestRejectedError(EagleEyeError, ValueError):
    """A request the engine refuses outright (too long for ``max_model_len``)."""


@dataclass(slots=True)
class EngineCounters:
    """Cumulative counters since the engine started (what ``/metrics`` exports)."""

    steps: int = 0
    prompt_tokens: int = 0
    """Prompt tokens of requests that produced a first token (``vllm:prompt_tokens``)."""
    computed_prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0
    finished: int = 0
    busy_s: float = 0.0


class EngineCore:
    """One simulated engine: waiting queue, running batch, KV cache, cost model."""

    def __init__(
        self,
        profile: CostProfile,
        *,
        speed_factor: float = 1.0,
        enable_prefix_caching: bool = True,
        enable_chunked_prefill: bool = True,
        collect_stats: bool = True,
    ) -> None:
        if speed_factor <= 0:
            raise ValueError("speed_factor must be positive")
        self.profile = profile
        self.speed_factor = speed_factor
        self.block_size = profile.block_size
        self.max_num_seqs = profile.max_num_seqs
        self.max_num_batched_tokens = profile.max_num_batched_tokens
        self.max_model_len = profile.max_model_len
        self.enable_chunked_prefill = enable_chunked_prefill
        self.collect_stats = collect_stats
        self.kv = KVCache(
            profile.num_gpu_blocks, profile.block_size, enable_prefix_caching=enable_prefix_caching
        )
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.now_s = 0.0
        """End of the last completed step (or the last idle time the caller set)."""
        self.counters = EngineCounters()
        self._prefix_stats = PrefixCacheStats()
        self._by_id: dict[str, SimRequest] = {}

    # -- requests ------------------------------------------------------------------------

    def check(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raise ``RequestRejectedError`` as vLLM's front end would (HTTP 400)."""
        if prompt_tokens <= 0:
            raise RequestRejectedError("the prompt is empty")
        if max_tokens <= 0:
            raise RequestRejectedError("max_tokens must be at least 1")
        if prompt_tokens + max_tokens > self.max_model_len:
            raise RequestRejectedError(
                f"This model's maximum context length is {self.max_model_len} tokens. "
                f"However, you requested {prompt_tokens + max_tokens} tokens "
                f"({prompt_tokens} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion."
            )

    def add_request(self, request: SimRequest) -> None:
        """Queue a request (its ``arrival_s`` must be set by the caller)."""
        self.check(request.prompt_tokens, request.max_tokens)
        if request.request_id in self._by_id:
            raise RequestRejectedError(f"duplicate request id {request.request_id!r}")
        request.status = RequestStatus.WAITING
        self._by_id[request.request_id] = request
        self.waiting.append(request)

    def abort(self, request_id: str, now_s: float) -> SimRequest | None:
        """Drop a request (client went away); frees its KV blocks."""
        request = self._by_id.pop(request_id, None)
        if request is None:
            return None
        if request.status is RequestStatus.RUNNING:
            self.running.remove(request)
            self._free(request)
        elif request.status is RequestStatus.WAITING:
            self.waiting.remove(request)
        request.status = RequestStatus.FINISHED
        request.finish_reason = FinishReason.ABORT
        request.finish_s = now_s
        return request

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def num_requests(self) -> int:
        return len(self.running) + len(self.waiting)

    def cached_prefix_tokens(self, block_hashes: list[int]) -> int:
        """Tokens of a prompt this engine holds cached now (an oracle for benchmarks)."""
        return self.kv.lookup(block_hashes, len(block_hashes)).blocks * self.block_size

    # -- scheduling ----------------------------------------------------------------------

    def plan_step(self, start_s: float) -> StepPlan | None:
        """Schedule one step starting at ``start_s``; None when there is nothing to do."""
        scheduled: list[tuple[SimRequest, int]] = []
        preempted: list[SimRequest] = []
        budget = self._schedule_running(self.max_num_batched_tokens, scheduled, preempted)
        admitted = 0
        if not preempted:
            admitted = self._admit_waiting(start_s, budget, scheduled)
        if not scheduled:
            return None
        return price_step(self.profile, self.speed_factor, start_s, scheduled, preempted, admitted)

    def _schedule_running(
        self,
        budget: int,
        scheduled: list[tuple[SimRequest, int]],
        preempted: list[SimRequest],
    ) -> int:
        """Give running requests their next tokens in order; return the budget left.

        A request whose blocks cannot be allocated preempts the last running request
        until they can; if it is itself the victim, scheduling of running requests stops.
        """
        running = self.running
        bs = self.block_size
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            if n <= 0:
                i += 1
                continue
            need = -(-(req.num_computed_tokens + n) // bs) - req.held_blocks
            while need > self.kv.free_blocks:
                victim = running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is req:
                    break
            if req.status is not RequestStatus.RUNNING:
                break
            self.kv.allocate(need)
            req.anon_blocks += max(0, need)
            scheduled.append((req, n))
            budget -= n
            i += 1
        return budget

    def _admit_waiting(
        self, start_s: float, budget: int, scheduled: list[tuple[SimRequest, int]]
    ) -> int:
        """Admit waiting requests FCFS while seats, budget and blocks last; return how many.

        A request that has computed nothing yet starts from its longest cached prefix
        (at most ``num_tokens - 1`` tokens). A head request that does not fit blocks the
        queue, as in vLLM.
        """
        waiting = self.waiting
        bs = self.block_size
        admitted = 0
        while waiting and len(self.running) < self.max_num_seqs and budget > 0:
            req = waiting[0]
            hit_blocks = 0
            hit = None
            if req.num_computed_tokens == 0:
                hit = self.kv.lookup(req.block_hashes, (req.num_tokens - 1) // bs)
                hit_blocks = hit.blocks
            computed = hit_blocks * bs if hit is not None else req.num_computed_tokens
            n = req.num_tokens - computed
            if n > budget:
                if not self.enable_chunked_prefill:
                    break
                n = budget
            need = -(-(computed + n) // bs) - hit_blocks - req.held_blocks
            if not self.kv.can_allocate(need, hit):
                break
            waiting.popleft()
            self._start_running(req, start_s, hit, computed, need)
            scheduled.append((req, n))
            budget -= n
            admitted += 1
        return admitted

    def _start_running(
        self, req: SimRequest, start_s: float, hit: PrefixHit | None, computed: int, need: int
    ) -> None:
        """Move the head of the queue into the batch: take its cached prefix and new blocks."""
        if hit is not None:
            self._record_prefix(req, hit.blocks * self.block_size)
            if hit.blocks:
                hashes = req.block_hashes[: hit.blocks]
                self.kv.acquire(hashes)
                req.hashed_blocks = list(hashes)
            req.num_computed_tokens = computed
            if req.num_cached_tokens < 0:
                req.num_cached_tokens = computed
        self.kv.allocate(need)
        req.anon_blocks += need
        req.status = RequestStatus.RUNNING
        if req.first_scheduled_s is None:
            req.first_scheduled_s = start_s
        self.running.append(req)

    # -- completing a step ---------------------------------------------------------------

    def complete(self, plan: StepPlan) -> StepResult:
        """Apply a step's effects at ``plan.end_s``: tokens, finishes, stats."""
        end = plan.end_s
        k = plan.steps
        it = IterationStats(iteration_timestamp=end) if self.collect_stats else None
        tally = StepTally()
        step_itl = (plan.end_s - plan.start_s) / k
        for req, n in plan.scheduled:
            if req.status is not RequestStatus.RUNNING:
                continue  # aborted while the step ran
            self._compute(req, n, k)
            if req.num_computed_tokens < req.num_tokens:
                continue  # a prefill chunk; no token yet
            self._emit(req, end, k, step_itl, tally, it)
        counters = self.counters
        counters.steps += k
        counters.prompt_tokens += tally.prompt_first
        counters.generation_tokens += tally.generation_tokens
        counters.preemptions += len(plan.preempted)
        counters.finished += len(tally.finished)
        counters.busy_s += plan.end_s - plan.start_s
        self.now_s = end
        sched = None
        if it is not None:
            tally.fill_iteration_stats(it, plan)
            sched = self.scheduler_stats()
        return StepResult(
            end_s=end,
            emitted=tally.emitted,
            finished=tally.finished,
            scheduler_stats=sched,
            iteration_stats=it,
        )

    def _compute(self, req: SimRequest, n: int, k: int) -> None:
        """Count the tokens the step computed for ``req`` and cache its newly full blocks."""
        was_prefill = req.num_tokens - req.num_computed_tokens > 1 or req.output_tokens == 0
        if was_prefill:
            self.counters.computed_prompt_tokens += min(
                n, max(0, req.prompt_tokens - req.num_computed_tokens)
            )
        req.num_computed_tokens += n if k == 1 else k
        self._cache_full_blocks(req)

    def _cache_full_blocks(self, req: SimRequest) -> None:
        """Give the prompt blocks ``req`` has now filled their hashes (prefix caching).

        Only prompt blocks have hashes (``block_hashes``); generated tokens stay in
        anonymous blocks.
        """
        if not (self.kv.enable_prefix_caching and req.block_hashes):
            return
        full = min(req.num_computed_tokens // self.block_size, len(req.block_hashes))
        have = len(req.hashed_blocks)
        if full > have:
            new = req.block_hashes[have:full]
            self.kv.promote(new)
            req.hashed_blocks.extend(new)
            req.anon_blocks -= len(new)

    def _emit(
        self,
        req: SimRequest,
        end: float,
        k: int,
        step_itl: float,
        tally: StepTally,
        it: IterationStats | None,
    ) -> None:
        """``req`` samples ``k`` tokens at ``end``: latencies, then a finish if it is done."""
        req.output_tokens += k
        tally.generation_tokens += k
        tally.emitted.append((req, k))
        if req.first_token_s is None:
            req.first_token_s = end
            tally.prompt_first += req.prompt_tokens
            tally.cached_first += max(0, req.num_cached_tokens)
            if it is not None:
                it.time_to_first_tokens_iter.append(end - req.arrival_s)
        else:
            assert req.last_token_s is not None
            gap = end - req.last_token_s
            req.add_itl(gap, k, step_itl if k > 1 else gap)
            if it is not None and k == 1:
                it.inter_token_latencies_iter.append(gap)
        req.last_token_s = end
        if req.output_tokens >= req.stop_at:
            eos = req.eos_after
            stopped = eos is not None and eos <= req.max_tokens
            self._finish(req, end, FinishReason.STOP if stopped else FinishReason.LENGTH)
            tally.finished.append(req)
            if it is not None:
                it.finished_requests.append(finished_request_stats(req))

    def scheduler_stats(self) -> SchedulerStats:
        """Current state plus prefix lookups since the previous call (then reset)."""
        prefix, self._prefix_stats = self._prefix_stats, PrefixCacheStats()
        return SchedulerStats(
            num_running_reqs=len(self.running),
            num_waiting_reqs=len(self.waiting),
            step_counter=self.counters.steps,
            kv_cache_usage=self.kv.usage,
            prefix_cache_stats=prefix,
        )

    # -- helpers -------------------------------------------------------------------------

    def _record_prefix(self, req: SimRequest, hit_tokens: int) -> None:
        stats = self._prefix_stats
        if req.num_preemptions:
            stats.preempted_requests += 1
            stats.preempted_queries += req.num_tokens
            stats.preempted_hits += hit_tokens
        else:
            stats.requests += 1
            stats.queries += req.num_tokens
            stats.hits += hit_tokens
            self.counters.prefix_queries += req.num_tokens
            self.counters.prefix_hits += hit_tokens

    def _free(self, req: SimRequest) -> None:
        self.kv.release(req.hashed_blocks, req.anon_blocks)
        req.hashed_blocks = []
        req.anon_blocks = 0

    def _preempt(self, req: SimRequest) -> None:
        self._free(req)
        req.status = RequestStatus.WAITING
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        self.waiting.appendleft(req)

    def _finish(self, req: SimRequest, end_s: float, reason: FinishReason) -> None:
        self.running.remove(req)
        self._free(req)
        self._by_id.pop(req.request_id, None)
        req.status = RequestStatus.FINISHED
        req.finish_s = end_s
        req.finish_reason = reason
