"""One engine step: its plan (the batch, fixed when it starts), its cost, and its outcome.

A step is two calls on ``EngineCore`` because the batch is fixed when the step starts
and its tokens appear when it ends: ``plan_step`` returns a ``StepPlan`` priced by
``price_step`` (the cost model), ``complete`` gathers a ``StepTally`` over the batch and
returns a ``StepResult``. Pure data and arithmetic; times are simulated seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle_eye.sim.cost_model import CostProfile, attention_pairs
from eagle_eye.sim.request import SimRequest
from eagle_eye.sim.stats import IterationStats, PromptTokenStats, SchedulerStats


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
class StepTally:
    """What completing a step gathers over its batch before the engine's counters move."""

    emitted: list[tuple[SimRequest, int]] = field(default_factory=list)
    finished: list[SimRequest] = field(default_factory=list)
    prompt_first: int = 0
    """Prompt tokens of the requests that produced their first token in this step."""
    cached_first: int = 0
    """How many of those were served from the prefix cache."""
    generation_tokens: int = 0

    def fill_iteration_stats(self, it: IterationStats, plan: StepPlan) -> None:
        """Write the step's totals into ``it`` (per-request entries are already there)."""
        it.num_generation_tokens = self.generation_tokens
        it.num_prompt_tokens = self.prompt_first
        it.prompt_token_stats = PromptTokenStats(
            computed=self.prompt_first - self.cached_first,
            local_cache_hit=self.cached_first,
            cached_tokens=self.cached_first,
            total=self.prompt_first,
        )
        it.num_preempted_reqs = len(plan.preempted)
        it.num_scheduled_tokens = sum(n for _, n in plan.scheduled)


def price_step(
    profile: CostProfile,
    speed_factor: float,
    start_s: float,
    scheduled: list[tuple[SimRequest, int]],
    preempted: list[SimRequest],
    admitted: int,
) -> StepPlan:
    """The plan of a batch, timed by the cost model (call before any request advances).

    A request counts as decoding when exactly one token is left to compute and it has
    produced output before; everything else is a prefill chunk, whose causal attention
    pairs make long prompts cost more than linearly.
    """
    prefill_tokens = decode_seqs = kv_read = 0
    pairs = 0.0
    for req, n in scheduled:
        kv_read += req.num_computed_tokens + n
        if req.num_tokens - req.num_computed_tokens == 1 and req.output_tokens > 0:
            decode_seqs += 1
        else:
            prefill_tokens += n
            pairs += attention_pairs(n, req.num_computed_tokens)
    duration = profile.step_time_s(
        prefill_tokens=prefill_tokens,
        decode_seqs=decode_seqs,
        kv_tokens_read=kv_read,
        attention_pairs=pairs,
        speed_factor=speed_factor,
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
