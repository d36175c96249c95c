"""Successive ``Reading``s of one rank -> publisher ``Sample``s (pure, no I/O).

What needs memory between scrapes:

* prompt/generation token counters: a ``Sample`` carries them cumulative *since the
  publisher started* (the publisher turns them into per-message deltas), so the first
  scrape is the baseline and later ones add their increase; an engine restart (counter
  goes down) starts a new baseline instead of producing a negative step;
* recent TTFT and ITL: the engine exports cumulative histograms, so the mean over the
  requests that finished between two scrapes is ``delta(sum) / delta(count)``; those
  interval means are folded into an exponentially weighted mean, the same smoothing the
  vLLM plugin uses. Until something happens after the agent started they stay absent.

Cumulative prefix-cache and preemption counters are the engine's own totals and pass
through unchanged, so a snapshot and the engine's ``/metrics`` agree on them.
"""

from __future__ import annotations

from eagle_eye.publish.agent.engines import Reading
from eagle_eye.publish.channel import Sample, ewma
from eagle_eye.snapshot import EngineState


class _Counter:
    """An engine counter re-based to start at 0 when first seen; survives resets."""

    __slots__ = ("_last", "total")

    def __init__(self) -> None:
        self._last: int | None = None
        self.total = 0

    def update(self, raw: int | None) -> int | None:
        if raw is None:
            return None if self._last is None else self.total
        if self._last is not None:
            self.total += raw - self._last if raw >= self._last else raw
        self._last = raw
        return self.total


class _RecentMean:
    """EWMA of a histogram's mean over each scrape interval."""

    __slots__ = ("_count", "_sum", "value")

    def __init__(self) -> None:
        self._sum: float | None = None
        self._count: int | None = None
        self.value: float | None = None

    def update(self, total_s: float | None, count: int | None) -> float | None:
        if total_s is None or count is None:
            return self.value
        prev_sum, prev_count = self._sum, self._count
        self._sum, self._count = total_s, count
        if prev_sum is None or prev_count is None or count <= prev_count:
            return self.value  # first sight, nothing new, or a reset
        mean = (total_s - prev_sum) / (count - prev_count)
        if mean >= 0:
            self.value = ewma(self.value, (mean,))
        return self.value


class RankTracker:
    """State for one (model, rank, replica) across scrapes."""

    __slots__ = ("_generation", "_itl", "_prompt", "_ttft")

    def __init__(self) -> None:
        self._prompt = _Counter()
        self._generation = _Counter()
        self._ttft = _RecentMean()
        self._itl = _RecentMean()

    def sample(self, reading: Reading, now_mono_s: float) -> Sample:
        """The publisher sample for ``reading`` taken at ``now_mono_s``."""
        return Sample(
            running=reading.running or 0,
            waiting=reading.waiting or 0,
            kv_usage=reading.kv_usage,
            prefix_cache_queries_total=reading.prefix_cache_queries_total,
            prefix_cache_hits_total=reading.prefix_cache_hits_total,
            preemptions_total=reading.preemptions_total,
            prompt_tokens_total=self._prompt.update(reading.prompt_tokens_total),
            generation_tokens_total=self._generation.update(reading.generation_tokens_total),
            ttft_recent_s=self._ttft.update(reading.ttft_sum_s, reading.ttft_count),
            itl_recent_s=self._itl.update(reading.itl_sum_s, reading.itl_count),
            state=EngineState.READY,
            monotonic_s=now_mono_s,
        )
