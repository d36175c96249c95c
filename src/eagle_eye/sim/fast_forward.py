"""Runs of identical decode steps in closed form, so offline replays skip per-token work.

While every running request decodes one token per step and nothing joins or leaves the
batch, step ``j`` (0-based) of a run costs ``base + kv_coef * (ctx + j * n)``, where ``n``
is the batch size and ``ctx`` the context tokens read by the first step. ``k`` steps
therefore take ``a k^2 + b k`` seconds with ``a = kv_coef n / 2`` and
``b = base + kv_coef ctx - a``; the largest ``k`` that ends by a deadline is the positive
root of that quadratic, rounded down. Used by ``eagle_eye.sim.offline`` only: the
real-time server steps one token at a time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from eagle_eye.sim.request import SimRequest
from eagle_eye.sim.step import StepPlan

if TYPE_CHECKING:
    from eagle_eye.sim.engine import EngineCore


def extend_decode(core: EngineCore, plan: StepPlan, until_s: float) -> StepPlan:
    """Stretch a pure-decode plan into the run of identical steps that ends by ``until_s``.

    Valid only when the batch cannot change in between: every running request decodes,
    nobody was admitted or preempted (so no waiting request could be admitted before a
    request finishes, as KV only fills up meanwhile), and no request finishes before
    the last of the steps. Returns ``plan`` itself, with ``steps`` and ``end_s`` raised
    and the extra KV blocks allocated, or unchanged when no run longer than one step fits.
    """
    if (
        plan.preempted
        or plan.admitted
        or plan.prefill_tokens
        or len(plan.scheduled) != len(core.running)
        or plan.end_s > until_s
    ):
        return plan
    reqs = core.running
    k_max = min(r.stop_at - r.output_tokens for r in reqs)
    if k_max <= 1:
        return plan
    a, b = _run_coefficients(core, reqs)
    k = _steps_by(a, b, until_s - plan.start_s, k_max)
    if k <= 1:
        return plan
    k = _steps_that_fit(core, reqs, k)
    if k <= 1:
        return plan
    bs = core.block_size
    for r in reqs:
        need = -(-(r.num_computed_tokens + k) // bs) - r.held_blocks
        if need > 0:
            core.kv.allocate(need)
            r.anon_blocks += need
    plan.steps = k
    plan.end_s = plan.start_s + a * k * k + b * k
    return plan


def _run_coefficients(core: EngineCore, reqs: list[SimRequest]) -> tuple[float, float]:
    """``(a, b)`` such that ``k`` decode steps of this batch take ``a k^2 + b k`` seconds."""
    n = len(reqs)
    profile = core.profile
    kv_coef = profile.kv_read_token_s / core.speed_factor
    base = (profile.step_overhead_s + profile.decode_seq_s * n) / core.speed_factor
    ctx = sum(r.num_computed_tokens + 1 for r in reqs)
    a = kv_coef * n / 2
    b = base + kv_coef * ctx - a
    return a, b


def _steps_by(a: float, b: float, span_s: float, k_max: int) -> int:
    """The most steps (at most ``k_max``) whose total time fits in ``span_s``."""
    if math.isinf(span_s):
        k = k_max
    elif a > 0:
        k = min(k_max, int((-b + math.sqrt(b * b + 4 * a * span_s)) / (2 * a)))
    else:
        k = min(k_max, int(span_s / b))
    while k > 1 and a * k * k + b * k > span_s:
        k -= 1
    return k


def _steps_that_fit(core: EngineCore, reqs: list[SimRequest], k: int) -> int:
    """Halve ``k`` until the blocks ``k`` more tokens per request need are free."""
    bs = core.block_size
    while k > 1:
        extra = sum(-(-(r.num_computed_tokens + k) // bs) - r.held_blocks for r in reqs)
        if extra <= core.kv.free_blocks:
            break
        k //= 2
    return k
