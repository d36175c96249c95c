"""What the engine's step path touches: who is publishing, one sample, one rank's lane.

Why it is a module of its own: everything here runs (or is built) on the engine's step
path, so it must stay tiny. ``Channel.offer()`` only stores a reference and, at most once
per send, pokes the ``Publisher``'s background thread (``publish/publisher.py``), which
does everything slow. The sender reads and writes a channel's slots directly (no locks:
each slot is written by one side only, and a reference swap is atomic under the GIL).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from eagle_eye.snapshot import EngineState, Part, Snapshot, field_names

if TYPE_CHECKING:
    from eagle_eye.publish.publisher import Publisher

_EWMA_ALPHA: Final = 0.2
_IDENTITY_FIELDS: Final = field_names(Part.IDENTITY)
"""Snapshot fields copied from ``InstanceIdentity`` (same names)."""
_SAMPLE_FIELDS: Final = field_names(Part.SAMPLE)
"""Snapshot fields copied from ``Sample`` (same names)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceIdentity:
    """Who is publishing: the fields of a snapshot that do not change per step (exactly
    the wire format's ``Part.IDENTITY`` fields)."""

    instance_id: str
    model: str
    engine: str
    endpoint: str | None = None
    engine_version: str | None = None
    dp_rank: int = 0
    lora_adapters: tuple[str, ...] = ()
    kv_capacity_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """An engine rank's state at one instant, as cheap to build as possible (the wire
    format's ``Part.SAMPLE`` fields, plus cumulative token counters and a timestamp).

    Counters are cumulative since the publisher started so that coalescing (dropping all
    but the newest sample) never loses counts; the sender turns them into per-message
    deltas and rates.
    """

    running: int = 0
    waiting: int = 0
    kv_usage: float | None = None
    prefix_cache_queries_total: int | None = None
    prefix_cache_hits_total: int | None = None
    preemptions_total: int | None = None
    prompt_tokens_total: int | None = None
    generation_tokens_total: int | None = None
    ttft_recent_s: float | None = None
    itl_recent_s: float | None = None
    step: int | None = None
    state: EngineState = EngineState.READY
    monotonic_s: float = 0.0
    """``time.monotonic()`` when sampled; 0 means "now" at send time."""


PAUSE_S: Final = 0.25
"""Samples further apart than this are an engine going quiet, not one step."""


class Channel:
    """One engine rank's lane into a ``Publisher`` (get one with ``Publisher.channel``)."""

    __slots__ = (
        "__weakref__",
        "_force",
        "_identity",
        "_interval_s",
        "_last_sent_mono",
        "_last_sent_sample",
        "_latest",
        "_offers",
        "_publisher",
        "_rate",
        "_seen_mono_s",
        "_seen_offers",
        "_seq",
        "_subject",
        "_unsent",
    )

    def __init__(self, publisher: Publisher, identity: InstanceIdentity, subject: str) -> None:
        self._publisher = publisher
        self._identity = identity
        self._subject = subject
        self._latest: Sample = Sample(state=EngineState.LOADING)
        self._unsent = True
        self._force = False
        self._seq = 0
        self._last_sent_mono = 0.0
        self._last_sent_sample: Sample | None = None
        self._rate: float | None = None
        self._offers = 0
        """Samples offered so far (the sender's measure of the engine's step rate)."""
        self._seen_offers = 0
        self._seen_mono_s = 0.0
        """Offer count and sample time at the sender's last look (sender thread only)."""
        self._interval_s: float | None = None
        """The engine's step period as the sender estimates it (sender thread only)."""

    @property
    def identity(self) -> InstanceIdentity:
        return self._identity

    @property
    def subject(self) -> str:
        return self._subject

    @property
    def latest(self) -> Sample:
        return self._latest

    def update_identity(self, **changes: Any) -> None:
        """Change static fields (e.g. KV capacity once the engine knows it)."""
        self._identity = replace(self._identity, **changes)

    def offer(self, sample: Sample) -> None:
        """Make ``sample`` the newest state. Never blocks, never raises."""
        try:
            if self._unsent:
                self._publisher.stats.coalesced += 1
            self._latest = sample
            self._offers += 1
            self._unsent = True
            self._publisher._wake_threadsafe()
        except Exception:  # noqa: BLE001 - defensive: never raise into the engine
            self._publisher.stats.offer_errors += 1

    def look(self, now_mono_s: float) -> bool:
        """Whether a sample arrived since the sender's last look (sender thread only).

        Also keeps the engine's step period: the time between looked-at samples divided
        by the samples offered in between (an EWMA that follows faster steps quickly), so
        coalescing does not stretch it; a quiet spell longer than ``PAUSE_S`` is not a step.
        """
        offers = self._offers
        if offers == self._seen_offers:
            return False
        sample_s = self._latest.monotonic_s or now_mono_s
        gap_s = sample_s - self._seen_mono_s
        if self._seen_offers and 0.0 < gap_s < PAUSE_S:
            interval_s = gap_s / (offers - self._seen_offers)
            previous = self._interval_s
            if previous is None:
                self._interval_s = interval_s
            else:
                alpha = 0.5 if interval_s < previous else 0.2
                self._interval_s = previous + alpha * (interval_s - previous)
        self._seen_offers, self._seen_mono_s = offers, sample_s
        return True

    @property
    def next_sample_due_s(self) -> float | None:
        """When the next sample is expected (monotonic), once a step period is known."""
        if self._interval_s is None:
            return None
        return self._seen_mono_s + self._interval_s

    def build_snapshot(self, now_wall_s: float, now_mono_s: float) -> Snapshot:
        """The snapshot for the newest sample (sender thread only)."""
        sample, ident, prev = self._latest, self._identity, self._last_sent_sample
        step_prompt = _delta(sample.prompt_tokens_total, prev.prompt_tokens_total if prev else None)
        step_gen = _delta(
            sample.generation_tokens_total, prev.generation_tokens_total if prev else None
        )
        if step_gen is not None and prev is not None and sample.monotonic_s > prev.monotonic_s:
            rate = step_gen / (sample.monotonic_s - prev.monotonic_s)
            self._rate = rate if self._rate is None else self._rate + 0.3 * (rate - self._rate)
        elif step_gen == 0 and self._rate is not None and sample.running == 0:
            self._rate = 0.0
        self._seq += 1
        age_s = now_mono_s - sample.monotonic_s if sample.monotonic_s else 0.0
        values = {name: getattr(ident, name) for name in _IDENTITY_FIELDS}
        for name in _SAMPLE_FIELDS:
            values[name] = getattr(sample, name)
        return Snapshot(
            seq=self._seq,
            timestamp_s=now_wall_s - max(0.0, age_s),
            step_prompt_tokens=step_prompt,
            step_generation_tokens=step_gen,
            generation_tokens_per_s=None if self._rate is None else max(0.0, self._rate),
            **values,
        )

    def mark_sent(self, now_mono_s: float) -> None:
        self._last_sent_mono = now_mono_s
        self._last_sent_sample = self._latest


def _delta(now: int | None, before: int | None) -> int | None:
    """Counter increase since the last message (the whole counter on the first one)."""
    if now is None:
        return None
    if before is None:
        return now
    return max(0, now - before)


def ewma(previous: float | None, values: Iterable[Any], alpha: float = _EWMA_ALPHA) -> float | None:
    """Fold ``values`` into an exponentially weighted mean (engine side: keep it tiny)."""
    for value in values:
        previous = value if previous is None else previous + alpha * (value - previous)
    return previous
