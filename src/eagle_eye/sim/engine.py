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
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from eagle_eye.errors import EagleEyeError
from eagle_eye.sim.cost_model import CostProfile, attention_pairs
from eagle_eye.sim.kv_cache import KVCache
from eagle_eye.sim.request import FinishReason, RequestStatus, SimRequest
from eagle_eye.sim.stats import (
    FinishedRequestStats,
    IterationStats,
    PrefixCacheStats,
    PromptTokenStats,
    SchedulerStats,
)


class RequestRejectedError(EagleEyeError, ValueError):
    """A request the engine refuses outright (too long for ``max_model_len``)."""


@dataclass(slots=True)
class StepPlan:
    """A scheduled batch: fixed at ``start_s``, done at ``end_s``."""

    start_s: float
    end_s: float
    scheduled: list[tuple[SimRequest, int]]
    """(request, new tokens) in batch order."""
    preempted: list[SimRequest] = field(default_factory=list)
    admitted: int = 0
    prefill_tokens: int = 0
    decode_seqs: int = 0
    steps: int = 1
    """More than 1 for a fast-forwarded run of identical decode steps (offline mode)."""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(slots=True)
class StepResult:
    """What a completed step produced."""

    end_s: float
    emitted: list[tuple[SimRequest, int]]
    """(request, tokens generated this step) for every request that produced tokens."""
    finished: list[SimRequest]
    scheduler_stats: SchedulerStats | None = None
    iteration_stats: IterationStats | None = None


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
        budget = self.max_num_batched_tokens
        scheduled: list[tuple[SimRequest, int]] = []
        preempted: list[SimRequest] = []
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

        admitted = 0
        if not preempted:
            waiting = self.waiting
            while waiting and len(running) < self.max_num_seqs and budget > 0:
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
                if hit is not None:
                    self._record_prefix(req, hit_blocks * bs)
                    if hit_blocks:
                        hashes = req.block_hashes[:hit_blocks]
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
                running.append(req)
                scheduled.append((req, n))
                budget -= n
                admitted += 1

        if not scheduled:
            return None
        return self._cost(start_s, scheduled, preempted, admitted)

    def _cost(
        self,
        start_s: float,
        scheduled: list[tuple[SimRequest, int]],
        preempted: list[SimRequest],
        admitted: int,
    ) -> StepPlan:
        prefill_tokens = decode_seqs = kv_read = 0
        pairs = 0.0
        for req, n in scheduled:
            kv_read += req.num_computed_tokens + n
            if req.num_tokens - req.num_computed_tokens == 1 and req.output_tokens > 0:
                decode_seqs += 1
            else:
                prefill_tokens += n
                pairs += attention_pairs(n, req.num_computed_tokens)
        duration = self.profile.step_time_s(
            prefill_tokens=prefill_tokens,
            decode_seqs=decode_seqs,
            kv_tokens_read=kv_read,
            attention_pairs=pairs,
            speed_factor=self.speed_factor,
        )
        return StepPlan(
            start_s=start_s,
            end_s=start_s + duration,
            scheduled=scheduled,
            preempted=preempted,
            admitted=admitted,
            prefill_tokens=prefill_tokens,
            decode_seqs=decode_seqs,
        )

    def extend_decode(self, plan: StepPlan, until_s: float) -> StepPlan:
        """Stretch a pure-decode plan into the run of identical steps that ends by ``until_s``.

        Valid only when the batch cannot change in between: every running request decodes,
        nobody was admitted or preempted (so no waiting request could be admitted before a
        request finishes, as KV only fills up meanwhile), and no request finishes before
        the last of the steps. Used by the offline fleet to skip per-token work.
        """
        if (
            plan.preempted
            or plan.admitted
            or plan.prefill_tokens
            or len(plan.scheduled) != len(self.running)
            or plan.end_s > until_s
        ):
            return plan
        reqs = self.running
        k_max = min(r.stop_at - r.output_tokens for r in reqs)
        if k_max <= 1:
            return plan
        n = len(reqs)
        kv_coef = self.profile.kv_read_token_s / self.speed_factor
        base = (self.profile.step_overhead_s + self.profile.decode_seq_s * n) / self.speed_factor
        ctx = sum(r.num_computed_tokens + 1 for r in reqs)
        a = kv_coef * n / 2
        b = base + kv_coef * ctx - a
        span = until_s - plan.start_s
        if math.isinf(span):
            k = k_max
        elif a > 0:
            k = min(k_max, int((-b + math.sqrt(b * b + 4 * a * span)) / (2 * a)))
        else:
            k = min(k_max, int(span / b))
        while k > 1 and a * k * k + b * k > span:
            k -= 1
        if k <= 1:
            return plan
        bs = self.block_size
        while k > 1:
            extra = sum(-(-(r.num_computed_tokens + k) // bs) - r.held_blocks for r in reqs)
            if extra <= self.kv.free_blocks:
                break
            k //= 2
        if k <= 1:
            return plan
        for r in reqs:
            need = -(-(r.num_computed_tokens + k) // bs) - r.held_blocks
            if need > 0:
                self.kv.allocate(need)
                r.anon_blocks += need
        plan.steps = k
        plan.end_s = plan.start_s + a * k * k + b * k
        return plan

    # -- completing a step ---------------------------------------------------------------

    def complete(self, plan: StepPlan) -> StepResult:
        """Apply a step's effects at ``plan.end_s``: tokens, finishes, stats."""
        end = plan.end_s
        k = plan.steps
        collect = self.collect_stats
        it = IterationStats(iteration_timestamp=end) if collect else None
        emitted: list[tuple[SimRequest, int]] = []
        finished: list[SimRequest] = []
        counters = self.counters
        bs = self.block_size
        prompt_first = cached_first = 0
        gen_tokens = 0
        step_itl = (plan.end_s - plan.start_s) / k
        for req, n in plan.scheduled:
            if req.status is not RequestStatus.RUNNING:
                continue  # aborted while the step ran
            was_prefill = req.num_tokens - req.num_computed_tokens > 1 or req.output_tokens == 0
            if was_prefill:
                counters.computed_prompt_tokens += min(
                    n, max(0, req.prompt_tokens - req.num_computed_tokens)
                )
            req.num_computed_tokens += n if k == 1 else k
            if self.kv.enable_prefix_caching and req.block_hashes:
                full = min(req.num_computed_tokens // bs, len(req.block_hashes))
                have = len(req.hashed_blocks)
                if full > have:
                    new = req.block_hashes[have:full]
                    self.kv.promote(new)
                    req.hashed_blocks.extend(new)
                    req.anon_blocks -= len(new)
            if req.num_computed_tokens < req.num_tokens:
                continue  # a prefill chunk; no token yet
            new_tokens = k
            req.output_tokens += new_tokens
            gen_tokens += new_tokens
            emitted.append((req, new_tokens))
            if req.first_token_s is None:
                req.first_token_s = end
                prompt_first += req.prompt_tokens
                cached_first += max(0, req.num_cached_tokens)
                if it is not None:
                    it.time_to_first_tokens_iter.append(end - req.arrival_s)
            else:
                assert req.last_token_s is not None
                gap = end - req.last_token_s
                self._add_itl(req, gap, k, step_itl if k > 1 else gap)
                if it is not None and k == 1:
                    it.inter_token_latencies_iter.append(gap)
            req.last_token_s = end
            if req.output_tokens >= req.stop_at:
                eos = req.eos_after
                stopped = eos is not None and eos <= req.max_tokens
                reason = FinishReason.STOP if stopped else FinishReason.LENGTH
                self._finish(req, end, reason)
                finished.append(req)
                if it is not None:
                    it.finished_requests.append(self._finished_stats(req))
        counters.steps += k
        counters.prompt_tokens += prompt_first
        counters.generation_tokens += gen_tokens
        counters.preemptions += len(plan.preempted)
        counters.finished += len(finished)
        counters.busy_s += plan.end_s - plan.start_s
        self.now_s = end
        sched = None
        if it is not None:
            it.num_generation_tokens = gen_tokens
            it.num_prompt_tokens = prompt_first
            it.prompt_token_stats = PromptTokenStats(
                computed=prompt_first - cached_first,
                local_cache_hit=cached_first,
                cached_tokens=cached_first,
                total=prompt_first,
            )
            it.num_preempted_reqs = len(plan.preempted)
            it.num_scheduled_tokens = sum(n for _, n in plan.scheduled)
            sched = self.scheduler_stats()
        return StepResult(
            end_s=end,
            emitted=emitted,
            finished=finished,
            scheduler_stats=sched,
            iteration_stats=it,
        )

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

    @staticmethod
    def _add_itl(req: SimRequest, total_s: float, count: int, max_gap_s: float) -> None:
        req.itl_sum_s += total_s
        req.itl_count += count
        if max_gap_s > req.itl_max_s:
            req.itl_max_s = max_gap_s

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

    @staticmethod
    def _finished_stats(req: SimRequest) -> FinishedRequestStats:
        assert req.finish_s is not None and req.finish_reason is not None
        first_sched = req.first_scheduled_s if req.first_scheduled_s is not None else req.arrival_s
        first_tok = req.first_token_s if req.first_token_s is not None else req.finish_s
        decode = req.finish_s - first_tok
        return FinishedRequestStats(
            finish_reason=req.finish_reason.value,
            e2e_latency=req.finish_s - req.arrival_s,
            num_prompt_tokens=req.prompt_tokens,
            num_generation_tokens=req.output_tokens,
            max_tokens_param=req.max_tokens,
            queued_time=first_sched - req.arrival_s,
            prefill_time=first_tok - first_sched,
            inference_time=req.finish_s - first_sched,
            decode_time=decode,
            mean_time_per_output_token=decode / (req.output_tokens - 1)
            if req.output_tokens > 1
            else 0.0,
            num_cached_tokens=max(0, req.num_cached_tokens),
        )
