"""The default policy, ``cost``: the estimated work ahead of this request on each engine.

``prefill_weight * new_prefill_tokens / prefill_unit_tokens`` (prompt not already in the
engine's prefix cache, per the prefix index) ``+ pending_prefill_weight *
pending_prefill_tokens / prefill_unit_tokens`` (prompt tokens this router sent there that
have not produced a first token yet) ``+ waiting_weight * queued + running_weight *
running + kv_weight * kv_usage`` (+ a large penalty at a full KV cache), argmin with a
random tie-break. Like NVIDIA Dynamo's ``prefill_blocks_after_overlap + decode_blocks``,
with the router's own sends since the last snapshot counted as queued.

Defined twice on purpose: ``cost_profile`` builds it from the pipeline's parts (the
readable definition, and what a user copies to make a variant in configuration), and
``Cost`` is the same sum fused into one loop, because this loop is the router's hot path
in large fleets. A property test holds the two equal.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from eagle_eye.fleet.target import Target
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.policies.base import TIE_EPSILON, PickContext, request_tokens, require
from eagle_eye.route.policies.config import PolicyConfig
from eagle_eye.route.policies.filters import Sample, SampleConfig
from eagle_eye.route.policies.pickers import ArgMin
from eagle_eye.route.policies.profiles import Profile
from eagle_eye.route.policies.scorers import (
    BlockConfig,
    Freshness,
    Kv,
    KvFull,
    KvFullConfig,
    NewPrefill,
    PendingPrefill,
    Queue,
    Running,
)
from eagle_eye.route.prefix import CHARS_PER_TOKEN, PrefixIndex


def sample_filter(config: PolicyConfig) -> Sample:
    return Sample(SampleConfig(above=config.sample_above, d=config.sample_d))


def cost_profile(config: PolicyConfig, index: PrefixIndex | None) -> Profile:
    """The default policy as a pipeline: what ``Cost`` computes, term by term."""
    fresh = Freshness(stale_after_s=config.stale_after_s)
    unit = config.prefill_unit_tokens
    return Profile(
        "cost",
        filters=[sample_filter(config)],
        scorers=[
            (config.prefill_weight / unit, NewPrefill(BlockConfig(block_chars=config.block_chars))),
            (config.pending_prefill_weight / unit, PendingPrefill()),
            (config.waiting_weight, Queue(fresh)),
            (config.running_weight, Running(fresh)),
            (config.kv_weight, Kv(fresh)),
            (
                config.kv_full_penalty,
                KvFull(KvFullConfig(stale_after_s=config.stale_after_s, full=config.kv_full)),
            ),
        ],
        picker=ArgMin(),
        index=index,
    )


class Cost:
    """``cost_profile`` fused into one loop (see the module docstring)."""

    name = "cost"

    def __init__(self, config: PolicyConfig | None = None, index: PrefixIndex | None = None):
        self.config = config or PolicyConfig()
        self.index = index if index is not None else PrefixIndex()
        self._sample = sample_filter(self.config)

    def pick(
        self, request: RequestFeatures, candidates: Sequence[Target], rng: random.Random
    ) -> Target:
        return self.pick_scored(request, candidates, rng, None)

    def pick_scored(
        self,
        request: RequestFeatures,
        candidates: Sequence[Target],
        rng: random.Random,
        scores: list[tuple[Target, float]] | None,
    ) -> Target:
        """``pick``, also appending every (target, score) to ``scores`` when given."""
        require(candidates)
        c, now = self.config, request.now_mono_s
        ctx = PickContext(request, rng, self.index)
        pool = self._sample.filter(ctx, candidates)
        matched = ctx.matches(pool)
        block_tokens = c.block_chars / CHARS_PER_TOKEN
        prompt = request.prompt_tokens
        per_request_tokens = request_tokens(request)
        prefill_scale = c.prefill_weight / c.prefill_unit_tokens
        pending_scale = c.pending_prefill_weight / c.prefill_unit_tokens
        fresh_since = now - c.stale_after_s
        waiting_weight, running_weight, kv_weight = c.waiting_weight, c.running_weight, c.kv_weight
        kv_full, kv_full_penalty = c.kv_full, c.kv_full_penalty
        best: list[Target] = []
        best_score = float("inf")
        for t in pool:
            last = t.last_snapshot_mono_s
            held = matched.get(t.url, 0) * block_tokens if matched else 0.0
            score = prefill_scale * max(0.0, prompt - held)
            if t.pending_prefill_tokens:
                score += pending_scale * t.pending_prefill_tokens
            if last is not None and last >= fresh_since:
                sent = t.sent_since_snapshot
                score += waiting_weight * (t.waiting + sent) + running_weight * t.running
                kv = t.kv_usage
                if kv is not None:
                    if t.kv_capacity_tokens:
                        kv += per_request_tokens * (sent + 1) / t.kv_capacity_tokens
                    score += kv_weight * kv
                    if kv >= kv_full:
                        score += kv_full_penalty
            else:
                score += waiting_weight * t.inflight
            if scores is not None:
                scores.append((t, score))
            if score < best_score - TIE_EPSILON:
                best_score = score
                best = [t]
            elif score <= best_score + TIE_EPSILON:
                best.append(t)
        if not best:
            return pool[rng.randrange(len(pool))]
        return best[0] if len(best) == 1 else best[rng.randrange(len(best))]
