"""The fleet as consumers see it: the newest snapshot of every engine rank, grouped into
routing targets, plus the router's own accounting between snapshots.

Pure (no sockets, no clocks: callers pass ``now_mono_s``):

* ``InstanceRecord``: one (instance_id, dp_rank), keeping its newest ``Snapshot`` by
  sequence number and when it was received.
* ``Target`` (``fleet/target.py``): one endpoint URL the router can call; data-parallel
  ranks behind one URL add up.

``FleetSubscriber`` (``fleet/subscriber.py``) is the I/O edge that feeds a ``FleetView``
from NATS. The dashboard, exporter and ``top`` read ``instances()``; the router's dispatch
core reads ``candidates(model)`` and reports what it sends through ``on_sent`` and friends.

Performance: ``ingest`` is one ``decode`` plus O(1) dictionary and counter updates, and
``candidates`` returns a cached list that is rebuilt only when membership, state or health
changes (not on every load update), so picking at 1,000 instances stays cheap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eagle_eye.fleet.target import DEFAULT_EJECT_S, DEFAULT_FAILURES_TO_EJECT, Health, Target
from eagle_eye.settings import DEFAULT_STALE_AFTER_S
from eagle_eye.snapshot import EngineState, Snapshot, SnapshotError, decode

log = logging.getLogger(__name__)


class InstanceRecord:
    """The newest snapshot of one engine rank and when it arrived."""

    __slots__ = ("key", "received_mono_s", "snapshot", "target")

    def __init__(self, key: tuple[str, int], snapshot: Snapshot, now_mono_s: float) -> None:
        self.key = key
        self.snapshot = snapshot
        self.received_mono_s = now_mono_s
        self.target: Target | None = None

    def age_s(self, now_mono_s: float) -> float:
        """Seconds since the router received this snapshot."""
        return max(0.0, now_mono_s - self.received_mono_s)


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """A read-only row for dashboards and ``/fleet``: one rank's snapshot and its age."""

    snapshot: Snapshot
    received_mono_s: float
    age_s: float
    endpoint: str | None


class FleetView:
    """Newest state of every engine rank and every routing target. Pure and single-threaded.

    Call ``ingest(bytes, now)`` for every NATS message; it never raises (bad messages are
    counted in ``malformed``, out-of-order ones in ``out_of_order``). The gateway calls
    ``candidates(model)``, then ``on_sent``/``on_finished``/``on_failure``/``on_success``
    around each upstream request.
    """

    def __init__(
        self,
        *,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        failures_to_eject: int = DEFAULT_FAILURES_TO_EJECT,
        eject_s: float = DEFAULT_EJECT_S,
        static_urls: Iterable[str] = (),
    ) -> None:
        self.stale_after_s = stale_after_s
        self.failures_to_eject = failures_to_eject
        self.eject_s = eject_s
        self.malformed = 0
        """Messages that did not decode as a valid snapshot."""
        self.out_of_order = 0
        """Snapshots older than one already held for the same rank (dropped)."""
        self.ingested = 0
        """Snapshots accepted."""
        self.last_error: str | None = None
        self.restarts = 0
        """Publisher restarts seen (sequence number went back with a newer timestamp)."""
        self.on_restart: Callable[[str], None] | None = None
        """Called with the endpoint of a restarted engine (its caches are gone)."""
        self._records: dict[tuple[str, int], InstanceRecord] = {}
        self._targets: dict[str, Target] = {}
        self._version = 0
        self._candidates_cache: dict[str, tuple[int, list[Target]]] = {}
        self._ejected: list[Target] = []
        for url in static_urls:
            self.add_static(url)

    # -- ingest ------------------------------------------------------------------------

    def ingest(self, data: bytes, now_mono_s: float) -> Snapshot | None:
        """Decode one message and apply it; None if it was malformed or out of order."""
        try:
            snapshot = decode(data)
        except SnapshotError as exc:
            self.malformed += 1
            self.last_error = str(exc)
            return None
        except Exception as exc:  # noqa: BLE001 - ingest must never raise into the NATS loop
            self.malformed += 1
            self.last_error = repr(exc)
            return None
        return snapshot if self.apply(snapshot, now_mono_s) else None

    def apply(self, snapshot: Snapshot, now_mono_s: float) -> bool:
        """Apply an already-decoded snapshot (offline drivers use this). True if kept."""
        key = (snapshot.instance_id, snapshot.dp_rank)
        record = self._records.get(key)
        if record is None:
            record = InstanceRecord(key, snapshot, now_mono_s)
            self._records[key] = record
            self.ingested += 1
            self._attach(record)
            return True
        old = record.snapshot
        if snapshot.seq <= old.seq:
            # A restarted publisher starts again at seq 1 with a newer clock.
            if not (snapshot.seq < old.seq and snapshot.timestamp_s > old.timestamp_s):
                self.out_of_order += 1
                return False
            self.restarts += 1
            if self.on_restart is not None and snapshot.endpoint is not None:
                self.on_restart(snapshot.endpoint)
        self.ingested += 1
        record.snapshot = snapshot
        record.received_mono_s = now_mono_s
        target = record.target
        endpoint = snapshot.endpoint
        if target is None or (endpoint is not None and endpoint != target.url):
            self._detach(record)
            self._attach(record)
            return True
        # Fast path: same target; update aggregates in O(1).
        target.running += snapshot.running - old.running
        target.waiting += snapshot.waiting - old.waiting
        if (
            snapshot.state is not old.state
            or snapshot.model != old.model
            or snapshot.lora_adapters != old.lora_adapters
        ):
            self._refresh_identity(target)
        if len(target.ranks) == 1:
            target.kv_usage = snapshot.kv_usage
            target.ttft_recent_s = snapshot.ttft_recent_s
            target.generation_tokens_per_s = snapshot.generation_tokens_per_s
        else:
            self._refresh_load(target)
        target.last_snapshot_mono_s = now_mono_s
        target.sent_since_snapshot = 0
        return True

    def _attach(self, record: InstanceRecord) -> None:
        snapshot = record.snapshot
        url = snapshot.endpoint
        if url is None:
            # Not routable (no endpoint advertised); still shown in instances().
            record.target = None
            return
        target = self._targets.get(url)
        if target is None:
            target = Target(url, model=snapshot.model)
            self._targets[url] = target
        target.static = False
        target.ranks[record.key] = record
        record.target = target
        self._refresh_identity(target)
        self._refresh_load(target)
        target.last_snapshot_mono_s = record.received_mono_s
        target.sent_since_snapshot = 0

    def _detach(self, record: InstanceRecord) -> None:
        target = record.target
        record.target = None
        if target is None:
            return
        target.ranks.pop(record.key, None)
        if not target.ranks and not target.static:
            if target.inflight == 0:
                del self._targets[target.url]
            else:
                target.state = EngineState.STOPPING
        else:
            self._refresh_identity(target)
            self._refresh_load(target)
        self._version += 1

    def _refresh_identity(self, target: Target) -> None:
        """Recompute model, adapters and state from the ranks (rare: on change only)."""
        ranks = [r.snapshot for r in target.ranks.values()]
        if ranks:
            target.model = ranks[0].model
            target.engine = ranks[0].engine
            adapters: set[str] = set()
            for s in ranks:
                adapters.update(s.lora_adapters)
            target.lora_adapters = frozenset(adapters)
            # Ready if any rank is ready; otherwise the most advanced lifecycle state.
            states = {s.state for s in ranks}
            if EngineState.READY in states:
                target.state = EngineState.READY
            else:
                target.state = ranks[0].state
        self._version += 1

    def _refresh_load(self, target: Target) -> None:
        ranks = [r.snapshot for r in target.ranks.values()]
        target.running = sum(s.running for s in ranks)
        target.waiting = sum(s.waiting for s in ranks)
        kv = [s.kv_usage for s in ranks if s.kv_usage is not None]
        target.kv_usage = sum(kv) / len(kv) if kv else None
        caps = [s.kv_capacity_tokens for s in ranks if s.kv_capacity_tokens is not None]
        target.kv_capacity_tokens = sum(caps) if caps else None
        ttfts = [s.ttft_recent_s for s in ranks if s.ttft_recent_s is not None]
        target.ttft_recent_s = sum(ttfts) / len(ttfts) if ttfts else None
        rates = [s.generation_tokens_per_s for s in ranks if s.generation_tokens_per_s is not None]
        target.generation_tokens_per_s = sum(rates) if rates else None

    def add_static(self, url: str) -> Target:
        """A backend given on the command line; it serves whatever model is asked for
        until a snapshot says otherwise."""
        url = url.rstrip("/")
        target = self._targets.get(url)
        if target is None:
            target = Target(url, static=True)
            self._targets[url] = target
            self._version += 1
        target.static = True
        return target

    def learn_static_models(self, target: Target, models: list[tuple[str, str | None]]) -> None:
        """Set a static target's model from its ``/v1/models`` answer: ``(id, parent)``
        pairs, where entries with a parent are LoRA adapters of that base model."""
        if not target.static or target.ranks or not models:
            return
        bases = [m for m, parent in models if parent is None] or [models[0][0]]
        target.model = bases[0]
        target.lora_adapters = frozenset(m for m, _ in models if m != target.model)
        self._version += 1

    def forget_older_than(self, now_mono_s: float, max_age_s: float) -> int:
        """Drop ranks whose last snapshot is older than ``max_age_s`` (engines that vanished
        without saying ``stopping``). Returns how many were dropped."""
        old = [r for r in self._records.values() if now_mono_s - r.received_mono_s > max_age_s]
        for record in old:
            self._detach(record)
            del self._records[record.key]
        return len(old)

    # -- reading -----------------------------------------------------------------------

    def instances(self, now_mono_s: float | None = None) -> list[InstanceInfo]:
        """Every engine rank the router has heard from, with its snapshot age."""
        now = time.monotonic() if now_mono_s is None else now_mono_s
        return [
            InstanceInfo(
                snapshot=r.snapshot,
                received_mono_s=r.received_mono_s,
                age_s=r.age_s(now),
                endpoint=r.target.url if r.target is not None else None,
            )
            for r in self._records.values()
        ]

    def record(self, instance_id: str, dp_rank: int = 0) -> InstanceRecord | None:
        return self._records.get((instance_id, dp_rank))

    def targets(self) -> list[Target]:
        """Every routing target, whatever its state."""
        return list(self._targets.values())

    def target(self, url: str) -> Target | None:
        return self._targets.get(url)

    def __len__(self) -> int:
        return len(self._records)

    def models(self) -> dict[str, set[str]]:
        """Model (and LoRA adapter) names served by ready targets -> their ``engine`` kinds."""
        out: dict[str, set[str]] = {}
        for t in self._targets.values():
            if t.model is None or t.state is not EngineState.READY:
                continue
            for name in (t.model, *t.lora_adapters):
                out.setdefault(name, set()).add(t.engine)
        return out

    def knows_model(self, model: str) -> bool:
        """True if any target (in any state) has ever advertised ``model``, or a static
        target could serve it."""
        return any(t.serves(model) for t in self._targets.values())

    def candidates(self, model: str, now_mono_s: float) -> list[Target]:
        """Targets that may take a new request for ``model`` now.

        Ready (not loading, draining or stopping), serving the model or adapter, and not
        ejected by passive health. An ejected target whose ejection has expired becomes a
        candidate again as a recovery probe. The list is cached per model and rebuilt only
        when membership, state or health changes; do not mutate it.
        """
        cached = self._candidates_cache.get(model)
        if cached is not None and cached[0] == self._version:
            lst = cached[1]
            # Cheap expiry check for ejections: only ejected targets are absent.
            if self._ejections_due(now_mono_s):
                return self.candidates(model, now_mono_s)
            return lst
        for t in self._targets.values():
            if t.health is Health.EJECTED and now_mono_s >= t.eject_until_mono_s:
                t.health = Health.PROBING
        lst = [
            t
            for t in self._targets.values()
            if t.state is EngineState.READY and t.health is not Health.EJECTED and t.serves(model)
        ]
        self._candidates_cache[model] = (self._version, lst)
        return lst

    def _ejections_due(self, now_mono_s: float) -> bool:
        if not self._ejected:
            return False
        due = any(now_mono_s >= t.eject_until_mono_s for t in self._ejected)
        if due:
            self._ejected = [t for t in self._ejected if now_mono_s < t.eject_until_mono_s]
            self._version += 1
        return due

    # -- the router's own accounting ---------------------------------------------------

    def on_sent(self, target: Target, prefill_tokens: float = 0.0) -> None:
        """A request was dispatched to ``target``; ``prefill_tokens`` is the router's
        estimate of the prompt tokens it must compute (after its prefix-cache overlap)."""
        target.inflight += 1
        target.sent_since_snapshot += 1
        target.decisions_total += 1
        target.pending_prefill_tokens += prefill_tokens

    def on_first_token(self, target: Target, prefill_tokens: float) -> None:
        """The request's prefill is done (first token seen, or it ended without one):
        release what ``on_sent`` added. Call once per request."""
        target.pending_prefill_tokens = max(0.0, target.pending_prefill_tokens - prefill_tokens)

    def on_finished(self, target: Target) -> None:
        """A request dispatched to ``target`` completed (any outcome)."""
        if target.inflight > 0:
            target.inflight -= 1
        if (
            target.inflight == 0
            and not target.ranks
            and not target.static
            and self._targets.get(target.url) is target
        ):
            del self._targets[target.url]
            self._version += 1

    def on_success(self, target: Target) -> None:
        """The engine answered; heal passive health."""
        target.consecutive_failures = 0
        if target.health is not Health.HEALTHY:
            target.health = Health.HEALTHY
            self._version += 1

    def on_failure(self, target: Target, now_mono_s: float) -> None:
        """Connection error or 5xx from ``target``; eject after repeated failures."""
        target.consecutive_failures += 1
        if target.health is Health.PROBING or target.consecutive_failures >= self.failures_to_eject:
            target.health = Health.EJECTED
            target.eject_until_mono_s = now_mono_s + self.eject_s
            self._ejected.append(target)
            self._version += 1
