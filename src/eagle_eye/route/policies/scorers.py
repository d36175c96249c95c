"""Scorers: one cost term each, in requests-equivalent units (lower is better).

A profile multiplies each term by its weight and adds them up; nothing is rescaled, so a
queue of 2 costs twice a queue of 1 whatever the other engines look like. Load terms
read the newest snapshot plus what the router sent since (``Target.sent_since_snapshot``,
which the engine will count as waiting); when the snapshot is older than
``stale_after_s`` they fall back to the router's own in-flight count.

=================  ======================================================================
``queue``          queued requests: snapshot waiting + sent since (in flight when stale)
``running``        running requests (decode load); 0 when stale
``load``           running + queued (in flight when stale)
``inflight``       requests in flight through this router
``kv``             KV-cache usage 0-1 once this request and those sent since land
``kv_full``        1 when that usage reaches ``full`` (the engine would preempt)
``new_prefill``    prompt tokens the engine must compute after its prefix-cache overlap
``pending_prefill``  prompt tokens sent there with no first token yet (work queued ahead)
``prefix_depth``   minus the prefix blocks held, when the prefix gate followed the prefix
=================  ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_eye.fleet.target import Target
from eagle_eye.route.policies.base import (
    PickContext,
    kv_pressure,
    load_estimate,
    queued_estimate,
    request_tokens,
)
from eagle_eye.route.prefix import CHARS_PER_TOKEN, DEFAULT_BLOCK_CHARS


@dataclass(frozen=True, slots=True, kw_only=True)
class Freshness:
    stale_after_s: float
    """Snapshots older than this are ignored; the router's own accounting counts."""


class Queue:
    def __init__(self, config: Freshness) -> None:
        self.stale_after_s = config.stale_after_s

    def score(self, ctx: PickContext, t: Target) -> float:
        return queued_estimate(t, ctx.request.now_mono_s, self.stale_after_s)


class Running:
    def __init__(self, config: Freshness) -> None:
        self.stale_after_s = config.stale_after_s

    def score(self, ctx: PickContext, t: Target) -> float:
        return float(t.running) if t.fresh(ctx.request.now_mono_s, self.stale_after_s) else 0.0


class Load:
    def __init__(self, config: Freshness) -> None:
        self.stale_after_s = config.stale_after_s

    def score(self, ctx: PickContext, t: Target) -> float:
        return load_estimate(t, ctx.request.now_mono_s, self.stale_after_s)


class Inflight:
    def score(self, ctx: PickContext, t: Target) -> float:
        return float(t.inflight)


class Kv:
    def __init__(self, config: Freshness) -> None:
        self.stale_after_s = config.stale_after_s

    def score(self, ctx: PickContext, t: Target) -> float:
        extra = request_tokens(ctx.request) * (t.sent_since_snapshot + 1)
        return kv_pressure(t, ctx.request.now_mono_s, self.stale_after_s, extra)


@dataclass(frozen=True, slots=True, kw_only=True)
class KvFullConfig:
    stale_after_s: float
    full: float = 0.95
    """Usage at or above this counts as full."""


class KvFull:
    def __init__(self, config: KvFullConfig) -> None:
        self.config = config

    def score(self, ctx: PickContext, t: Target) -> float:
        extra = request_tokens(ctx.request) * (t.sent_since_snapshot + 1)
        kv = kv_pressure(t, ctx.request.now_mono_s, self.config.stale_after_s, extra)
        return 1.0 if kv >= self.config.full else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockConfig:
    block_chars: int = DEFAULT_BLOCK_CHARS
    """Characters per prefix block (as the prefix index hashes prompts)."""


class NewPrefill:
    def __init__(self, config: BlockConfig) -> None:
        self.block_tokens = config.block_chars / CHARS_PER_TOKEN

    def score(self, ctx: PickContext, t: Target) -> float:
        matched = ctx.matches(ctx.pool)
        held = matched.get(t.url, 0) * self.block_tokens if matched else 0.0
        return max(0.0, ctx.request.prompt_tokens - held)


class PendingPrefill:
    def score(self, ctx: PickContext, t: Target) -> float:
        return t.pending_prefill_tokens


class PrefixDepth:
    def score(self, ctx: PickContext, t: Target) -> float:
        if not ctx.followed_prefix:
            return 0.0
        return -float(ctx.matches(ctx.pool).get(t.url, 0))
