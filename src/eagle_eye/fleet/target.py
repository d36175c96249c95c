"""One routing target: an endpoint URL the router can call, and what it knows about it.

Data-parallel ranks of one server advertise the same endpoint and aggregate into one
target (their queues add up); an engine that publishes nothing is a *static* target known
only by URL. Targets carry what routing needs between snapshots: requests in flight
through this router, requests sent since the last snapshot (so a burst does not herd onto
the engine that looked least loaded a few milliseconds ago) and the prompt tokens still
in prefill. ``FleetView`` (``fleet/view.py``) owns the targets and keeps them current.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Final

from eagle_eye.snapshot import EngineState

if TYPE_CHECKING:
    from eagle_eye.fleet.view import InstanceRecord

DEFAULT_FAILURES_TO_EJECT: Final = 3
DEFAULT_EJECT_S: Final = 5.0
"""How long a target that failed ``failures_to_eject`` times in a row sits out before a
request is allowed through as a recovery probe."""


class Health(str, Enum):
    """Passive health of a target as the router's own requests see it."""

    HEALTHY = "healthy"
    EJECTED = "ejected"
    """Too many consecutive failures; excluded until the probe deadline."""
    PROBING = "probing"
    """Ejection expired: one request is let through; success heals, failure re-ejects."""


class Target:
    """One endpoint the router sends requests to (all dp ranks behind one URL).

    Load fields (``running``, ``waiting``, ``kv_usage``) come from the newest snapshots of
    the ranks; ``inflight`` and ``sent_since_snapshot`` are the router's own counts.
    """

    __slots__ = (
        "consecutive_failures",
        "decisions_total",
        "eject_until_mono_s",
        "engine",
        "generation_tokens_per_s",
        "health",
        "inflight",
        "kv_capacity_tokens",
        "kv_usage",
        "last_snapshot_mono_s",
        "lora_adapters",
        "model",
        "pending_prefill_tokens",
        "ranks",
        "running",
        "sent_since_snapshot",
        "state",
        "static",
        "ttft_recent_s",
        "url",
        "waiting",
    )

    def __init__(self, url: str, *, model: str | None = None, static: bool = False) -> None:
        self.url = url
        self.model = model
        """Served model, or None for a static target whose models are unknown."""
        self.lora_adapters: frozenset[str] = frozenset()
        self.engine = "unknown"
        self.static = static
        self.ranks: dict[tuple[str, int], InstanceRecord] = {}
        self.state = EngineState.READY
        self.running = 0
        self.waiting = 0
        self.kv_usage: float | None = None
        self.kv_capacity_tokens: int | None = None
        self.ttft_recent_s: float | None = None
        self.generation_tokens_per_s: float | None = None
        self.last_snapshot_mono_s: float | None = None
        self.inflight = 0
        self.sent_since_snapshot = 0
        self.pending_prefill_tokens = 0.0
        """Prompt tokens (not expected in the engine's prefix cache) of requests this
        router sent here that have produced no first token yet: the prefill backlog a new
        request would queue behind. Snapshots carry request counts, not tokens, and one
        80k-token prompt holds an engine longer than twenty short ones."""
        self.decisions_total = 0
        self.health = Health.HEALTHY
        self.consecutive_failures = 0
        self.eject_until_mono_s = 0.0

    def serves(self, model: str) -> bool:
        """True if a request for ``model`` (base name or LoRA adapter) can go here."""
        return self.model is None or model == self.model or model in self.lora_adapters

    def fresh(self, now_mono_s: float, stale_after_s: float) -> bool:
        """Whether the snapshot load figures are recent enough to trust."""
        last = self.last_snapshot_mono_s
        return last is not None and now_mono_s - last <= stale_after_s

    def snapshot_age_s(self, now_mono_s: float) -> float | None:
        last = self.last_snapshot_mono_s
        return None if last is None else max(0.0, now_mono_s - last)

    def __repr__(self) -> str:
        return (
            f"Target({self.url!r}, state={self.state.value}, running={self.running}, "
            f"waiting={self.waiting}, inflight={self.inflight})"
        )
