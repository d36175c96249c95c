"""NATS snapshots as Prometheus series: the fleet at the freshness the router sees it.

``FleetCollector`` is a custom collector (on its own ``CollectorRegistry``, never the
global one) that turns a ``FleetView`` into ``eagle_eye_*`` families at scrape time, so
the NATS path only does ``FleetView.ingest``. ``fleet_families`` is the pure part: given
the instances, the clock and what the exporter remembers (models seen, when each instance
started loading), it returns the metric families; the per-instance ones are one table of
specs (``_PER_INSTANCE``) read by one function. ``Exporter`` is the I/O shell: the
``FleetSubscriber`` and an aiohttp server for ``/metrics``.

Per-instance labels are ``instance_id``, ``dp_rank``, ``model_name`` and ``engine_kind``
(``instance`` and ``job`` belong to Prometheus' scrape target, ``model_name`` matches the
engines' own label, ``engine_kind`` the recording rules').
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from eagle_eye.fleet.view import FleetView, InstanceInfo
from eagle_eye.settings import DEFAULT_READY_STALE_AFTER_S
from eagle_eye.snapshot import FIELDS, EngineState, Snapshot

log = logging.getLogger(__name__)

LABELS: Final = ["instance_id", "dp_rank", "model_name", "engine_kind"]
MAX_MODELS_REMEMBERED: Final = 10_000


@dataclass(slots=True)
class ExporterMemory:
    """What the exporter remembers beyond the fleet view's newest snapshots.

    ``models`` keeps every model ever seen so ``eagle_eye_model_ready_instances`` drops to
    0 (and alerts) when the last instance of a model disappears, instead of vanishing.
    ``loading_since`` records when each rank was first seen loading, for slow-load alerts.
    """

    models: dict[str, None] = field(default_factory=dict)
    loading_since_mono_s: dict[tuple[str, int], float] = field(default_factory=dict)

    def observe(self, snapshot: Snapshot, now_mono_s: float) -> None:
        """Call for every accepted snapshot."""
        if snapshot.model not in self.models and len(self.models) < MAX_MODELS_REMEMBERED:
            self.models[snapshot.model] = None
        key = (snapshot.instance_id, snapshot.dp_rank)
        if snapshot.state is EngineState.LOADING:
            self.loading_since_mono_s.setdefault(key, now_mono_s)
        else:
            self.loading_since_mono_s.pop(key, None)


@dataclass(frozen=True, slots=True)
class IngestCounts:
    accepted: int
    malformed: int
    out_of_order: int
    nats_connected: bool


_Samples = Iterator[tuple[list[str], float]]
"""(values of the family's extra labels, sample value) pairs that one rank contributes."""
_SamplesOf = Callable[[InstanceInfo, ExporterMemory, float], _Samples]
"""``(rank, memory, now_mono_s)`` -> that rank's samples (none when it has no value)."""


@dataclass(frozen=True, slots=True)
class _PerInstance:
    """One per-instance family: every rank adds its samples under ``LABELS`` (+ extras)."""

    name: str
    doc: str
    family: type[GaugeMetricFamily] | type[CounterMetricFamily]
    samples: _SamplesOf
    extra_labels: tuple[str, ...] = ()


def _field(attr: str) -> _SamplesOf:
    """Samples of a numeric Snapshot field: its value, or nothing when it is unknown."""

    def samples(inst: InstanceInfo, _memory: ExporterMemory, _now_mono_s: float) -> _Samples:
        value = getattr(inst.snapshot, attr)
        if value is not None:
            yield [], float(value)

    return samples


def _age(inst: InstanceInfo, _memory: ExporterMemory, _now_mono_s: float) -> _Samples:
    yield [], inst.age_s


def _state(inst: InstanceInfo, _memory: ExporterMemory, _now_mono_s: float) -> _Samples:
    for st in EngineState:
        yield [st.value], 1.0 if inst.snapshot.state is st else 0.0


def _info(inst: InstanceInfo, _memory: ExporterMemory, _now_mono_s: float) -> _Samples:
    yield [inst.snapshot.engine_version or "", inst.endpoint or ""], 1.0


def _loading(inst: InstanceInfo, memory: ExporterMemory, now_mono_s: float) -> _Samples:
    s = inst.snapshot
    since = memory.loading_since_mono_s.get((s.instance_id, s.dp_rank))
    if s.state is EngineState.LOADING and since is not None:
        yield [], max(0.0, now_mono_s - since)


_PER_INSTANCE: Final = (
    # The per-field gauges, then counters, derive from the wire format's field table.
    *(
        _PerInstance(f.metric[0], f.metric[1], GaugeMetricFamily, _field(f.name))
        for f in FIELDS
        if f.metric and f.metric[2] == "gauge"
    ),
    *(
        _PerInstance(f.metric[0], f.metric[1], CounterMetricFamily, _field(f.name))
        for f in FIELDS
        if f.metric and f.metric[2] == "counter"
    ),
    _PerInstance(
        "eagle_eye_snapshot_age_seconds",
        "Seconds since the exporter received the newest snapshot of this rank.",
        GaugeMetricFamily,
        _age,
    ),
    _PerInstance(
        "eagle_eye_instance_state",
        "1 for the rank's current lifecycle state, 0 for the others.",
        GaugeMetricFamily,
        _state,
        ("state",),
    ),
    _PerInstance(
        "eagle_eye_instance_info",
        "Identity of each rank (value 1).",
        GaugeMetricFamily,
        _info,
        ("engine_version", "endpoint"),
    ),
    _PerInstance(
        "eagle_eye_instance_loading_seconds",
        "Seconds since the rank was first seen in state loading (only while loading).",
        GaugeMetricFamily,
        _loading,
    ),
)
"""The per-instance families, in exposition order; ``_instance_families`` reads it."""


def _labels(s: Snapshot) -> list[str]:
    return [s.instance_id, str(s.dp_rank), s.model, s.engine]


def _instance_families(
    instances: Sequence[InstanceInfo], memory: ExporterMemory, now_mono_s: float
) -> list[Metric]:
    """One family per ``_PER_INSTANCE`` spec, with every rank's samples."""
    labels = [_labels(inst.snapshot) for inst in instances]
    families: list[Metric] = []
    for spec in _PER_INSTANCE:
        family = spec.family(spec.name, spec.doc, labels=[*LABELS, *spec.extra_labels])
        for inst, inst_labels in zip(instances, labels, strict=True):
            for extra, value in spec.samples(inst, memory, now_mono_s):
                family.add_metric([*inst_labels, *extra], value)
        families.append(family)
    return families


def _ready_per_model(
    instances: Sequence[InstanceInfo], memory: ExporterMemory, stale_after_s: float
) -> Metric:
    """Fresh ready ranks per model, 0 for every model ever seen (so alerts can fire)."""
    ready_per_model: dict[str, int] = dict.fromkeys(memory.models, 0)
    for inst in instances:
        s = inst.snapshot
        fresh_ready = s.state is EngineState.READY and inst.age_s <= stale_after_s
        ready_per_model[s.model] = ready_per_model.get(s.model, 0) + int(fresh_ready)
    ready = GaugeMetricFamily(
        "eagle_eye_model_ready_instances",
        "Ranks per model that are ready and published within the staleness limit.",
        labels=["model_name"],
    )
    for model, n in sorted(ready_per_model.items()):
        ready.add_metric([model], float(n))
    return ready


def _ingest_families(counts: IngestCounts) -> list[Metric]:
    """The exporter's own health: snapshots by outcome, and whether NATS is connected."""
    snaps = CounterMetricFamily(
        "eagle_eye_exporter_snapshots",
        "Snapshots received from NATS, by outcome.",
        labels=["outcome"],
    )
    snaps.add_metric(["accepted"], float(counts.accepted))
    snaps.add_metric(["malformed"], float(counts.malformed))
    snaps.add_metric(["out_of_order"], float(counts.out_of_order))
    connected = GaugeMetricFamily(
        "eagle_eye_exporter_nats_connected", "1 while the exporter is connected to NATS."
    )
    connected.add_metric([], 1.0 if counts.nats_connected else 0.0)
    return [snaps, connected]


def fleet_families(
    instances: Sequence[InstanceInfo],
    *,
    memory: ExporterMemory,
    now_mono_s: float,
    counts: IngestCounts,
    stale_after_s: float = DEFAULT_READY_STALE_AFTER_S,
) -> list[Metric]:
    """The exporter's metric families for ``instances`` at ``now_mono_s``. Pure."""
    return [
        *_instance_families(instances, memory, now_mono_s),
        _ready_per_model(instances, memory, stale_after_s),
        *_ingest_families(counts),
    ]


class FleetCollector(Collector):
    """Scrape-time view of a ``FleetView``; register it on a private registry."""

    def __init__(
        self,
        fleet: FleetView,
        memory: ExporterMemory,
        *,
        connected: Callable[[], bool] = lambda: True,
        stale_after_s: float = DEFAULT_READY_STALE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fleet = fleet
        self._memory = memory
        self._connected = connected
        self._stale_after_s = stale_after_s
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self._clock()
        fleet = self._fleet
        counts = IngestCounts(
            fleet.ingested, fleet.malformed, fleet.out_of_order, self._connected()
        )
        yield from fleet_families(
            fleet.instances(now),
            memory=self._memory,
            now_mono_s=now,
            counts=counts,
            stale_after_s=self._stale_after_s,
        )


def new_registry(collectors: Iterable[Collector]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return registry
