"""The metrics agent: scrape engines that have no plugin, publish the same Snapshots.

One ``EngineWatcher`` per engine URL polls ``/metrics`` (and SGLang's ``/v1/loads``)
every ``interval_s``, turns the page into one reading per data-parallel rank, Ray
replica and model (``eagle_eye.publish.agent.engines``), and offers a ``Sample`` per reading
to its own ``Channel`` of a shared ``Publisher`` (one NATS connection for all engines).
Each watcher runs on its own thread with a blocking keep-alive connection (see
``agent/http.py`` for why stdlib); ``Agent`` (``runner.py``) owns the threads and the
publisher, ``config.py`` holds what the operator asked for.

Faults, and what a consumer sees:

* engine down: after ``unreachable_after`` consecutive failed scrapes every channel of
  that engine publishes ``state=unreachable`` (with the last numbers it had); retries
  back off exponentially up to ``max_backoff_s``; the first good page makes it
  ``ready`` again. A channel that was never seen is announced only when the operator
  named the model (``--model``), because a snapshot needs one.
* garbage, truncated, oversized or non-UTF-8 pages, or pages without the engine's
  queue gauges: ``stats.parse_errors`` goes up, nothing is published for that scrape
  (the publisher's heartbeat re-sends the last good sample with its old timestamp, so
  staleness stays visible), and no exception leaves the watcher.
* a rank, replica or model that disappears from the page for ``forget_after`` good
  scrapes publishes ``stopping`` and is forgotten.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Final

from eagle_eye.publish.agent import engines
from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.publish.agent.engines import EngineKind, MappingError, RankKey, Reading
from eagle_eye.publish.agent.engines import sglang as sglang_engine
from eagle_eye.publish.agent.http import (
    Fetcher,
    FetchError,
    HttpFetcher,
    PageTooLargeError,
    TruncatedPageError,
)
from eagle_eye.publish.agent.models import discover_model
from eagle_eye.publish.agent.promtext import PromParseError
from eagle_eye.publish.agent.track import RankTracker
from eagle_eye.publish.channel import Channel, InstanceIdentity, Sample
from eagle_eye.publish.publisher import Publisher
from eagle_eye.snapshot import MAX_ID_CHARS, EngineState

log = logging.getLogger("eagle_eye.agent")

_MODEL_RETRY_S: Final = 30.0


@dataclass(slots=True)
class WatcherStats:
    """What one watcher did; read by tests, logs and ``bench``."""

    scrapes: int = 0
    pages_ok: int = 0
    fetch_failures: int = 0
    parse_errors: int = 0
    samples_offered: int = 0
    unreachable_events: int = 0
    recoveries: int = 0
    last_error: str = ""
    parse_us_total: float = field(default=0.0)


class EngineWatcher:
    """Scrape one engine and feed its channels. ``poll_once`` is one step, no sleeping."""

    def __init__(
        self,
        target: EngineTarget,
        publisher: Publisher,
        config: AgentConfig,
        fetcher: Fetcher | None = None,
    ) -> None:
        self.target = target
        self.config = config
        self.stats = WatcherStats()
        self.kind: EngineKind | None = target.kind
        self._publisher = publisher
        self._fetcher = fetcher or HttpFetcher(
            target.base_url, timeout_s=config.timeout_s, max_page_bytes=config.max_page_bytes
        )
        self._channels: dict[RankKey, Channel] = {}
        self._trackers: dict[RankKey, RankTracker] = {}
        self._missing: dict[RankKey, int] = {}
        self._failures = 0
        self._unreachable = False
        self._loads_supported: bool | None = None
        self._model = target.model
        self._model_tried_mono = -_MODEL_RETRY_S

    @property
    def unreachable(self) -> bool:
        return self._unreachable

    @property
    def channels(self) -> dict[RankKey, Channel]:
        return dict(self._channels)

    def poll_once(self) -> float:
        """Scrape once, publish what it says; return seconds until the next scrape."""
        self.stats.scrapes += 1
        try:
            response = self._fetcher.get(self.target.metrics_path)
        except FetchError as exc:
            return self._on_failure(str(exc))
        except (PageTooLargeError, TruncatedPageError) as exc:
            self._on_parse_error(str(exc), reachable=True)
            return self.config.interval_s
        if response.status != 200:
            return self._on_failure(f"GET {self.target.metrics_path}: HTTP {response.status}")
        now_mono = time.monotonic()
        started = time.perf_counter()
        try:
            readings = self._read(response.body)
        except (PromParseError, MappingError, UnicodeDecodeError, ValueError) as exc:
            self._on_parse_error(str(exc), reachable=True)
            return self.config.interval_s
        finally:
            self.stats.parse_us_total += (time.perf_counter() - started) * 1e6
        self._on_page(readings, now_mono)
        return self.config.interval_s

    # -- page handling -----------------------------------------------------------------

    def _read(self, body: bytes) -> list[Reading]:
        text = body.decode("utf-8")
        if self.kind is None:
            detected = engines.detect(text)
            if detected is None:
                raise MappingError("no metric family of a known engine on the page")
            self.kind = detected
            log.info("agent: %s looks like %s", self.target.base_url, detected.value)
        if self._model is None and self.kind in (EngineKind.TGI, EngineKind.LLAMACPP):
            self._discover_model()
        readings = engines.read(self.kind, text, self._model)
        if self.kind is EngineKind.SGLANG:
            readings = self._with_loads(readings)
        return readings

    def _discover_model(self) -> None:
        now = time.monotonic()
        if now - self._model_tried_mono < _MODEL_RETRY_S:
            return
        self._model_tried_mono = now
        self._model = discover_model(self._fetcher)
        if self._model is None:
            log.warning(
                "agent: %s does not name its model on /metrics, /v1/models or /info; pass --model",
                self.target.base_url,
            )

    def _with_loads(self, readings: list[Reading]) -> list[Reading]:
        """Overlay SGLang's ``/v1/loads`` when the engine has it (probed once)."""
        if self._loads_supported is False:
            return readings
        try:
            response = self._fetcher.get(sglang_engine.LOADS_PATH)
            if response.status != 200:
                self._loads_supported = False
                return readings
            loads, version = sglang_engine.parse_loads(response.body)
        except (FetchError, PageTooLargeError, TruncatedPageError, sglang_engine.LoadsError):
            if self._loads_supported is None:
                self._loads_supported = False
            return readings
        self._loads_supported = True
        return sglang_engine.merge_loads(readings, loads, version)

    def _on_page(self, readings: list[Reading], now_mono: float) -> None:
        self.stats.pages_ok += 1
        self._failures = 0
        if self._unreachable:
            self._unreachable = False
            self._loads_supported = None
            self.stats.recoveries += 1
            log.info("agent: %s answers again", self.target.base_url)
        models = {r.key.model for r in readings}
        seen = set()
        for reading in readings:
            key = reading.key
            seen.add(key)
            channel = self._channels.get(key)
            if channel is None:
                channel = self._open_channel(key, reading, multi_model=len(models) > 1)
            else:
                self._refresh_identity(channel, reading)
            sample = self._trackers[key].sample(reading, now_mono)
            channel.offer(sample)
            self.stats.samples_offered += 1
        for key in list(self._channels):
            if key in seen:
                self._missing.pop(key, None)
                continue
            self._missing[key] = self._missing.get(key, 0) + 1
            if self._missing[key] >= self.config.forget_after:
                self._forget(key)

    def _open_channel(self, key: RankKey, reading: Reading, *, multi_model: bool) -> Channel:
        assert self.kind is not None
        identity = InstanceIdentity(
            instance_id=self._instance_id(key, multi_model=multi_model),
            model=key.model,
            engine=self.kind.value,
            endpoint=self.target.endpoint,
            engine_version=reading.engine_version,
            dp_rank=key.rank,
            kv_capacity_tokens=reading.kv_capacity_tokens,
        )
        channel = self._publisher.channel(identity)
        self._channels[key] = channel
        self._trackers[key] = RankTracker()
        log.info("agent: publishing %s rank %d as %s", key.model, key.rank, identity.instance_id)
        return channel

    def _instance_id(self, key: RankKey, *, multi_model: bool) -> str:
        """Unique per published lane, and stable whatever order series appear in.

        A Ray replica id is unique within its Serve cluster (and a replica serves one
        model), so ``base/replica``; several models on one non-Ray server get
        ``base/model``; otherwise ranks share ``base`` and differ by ``dp_rank``.
        """
        base = self.target.base_instance_id
        if key.replica:
            return f"{base}/{key.replica}"[:MAX_ID_CHARS]
        if multi_model:
            return f"{base}/{key.model}"[:MAX_ID_CHARS]
        return base

    @staticmethod
    def _refresh_identity(channel: Channel, reading: Reading) -> None:
        ident = channel.identity
        changes: dict[str, object] = {}
        if (
            reading.kv_capacity_tokens is not None
            and reading.kv_capacity_tokens != ident.kv_capacity_tokens
        ):
            changes["kv_capacity_tokens"] = reading.kv_capacity_tokens
        if reading.engine_version is not None and reading.engine_version != ident.engine_version:
            changes["engine_version"] = reading.engine_version
        if changes:
            channel.update_identity(**changes)

    def _forget(self, key: RankKey) -> None:
        channel = self._channels.pop(key)
        self._trackers.pop(key, None)
        self._missing.pop(key, None)
        log.info("agent: %s is gone from the page", channel.identity.instance_id)
        self._publisher.remove(channel, final_state=EngineState.STOPPING)

    # -- faults ------------------------------------------------------------------------

    def _on_parse_error(self, reason: str, *, reachable: bool) -> None:
        self.stats.parse_errors += 1
        self.stats.last_error = reason
        log.debug("agent: bad page from %s: %s", self.target.base_url, reason)
        if reachable:
            self._failures = 0

    def _on_failure(self, reason: str) -> float:
        self.stats.fetch_failures += 1
        self.stats.last_error = reason
        self._failures += 1
        if self._failures == self.config.unreachable_after:
            self._mark_unreachable(reason)
        if self._failures < self.config.unreachable_after:
            return self.config.interval_s
        exponent = min(self._failures - self.config.unreachable_after + 1, 30)
        return float(min(self.config.max_backoff_s, self.config.interval_s * 2**exponent))

    def _mark_unreachable(self, reason: str) -> None:
        self._unreachable = True
        self.stats.unreachable_events += 1
        log.warning("agent: %s unreachable (%s); retrying with backoff", self.target.url, reason)
        if not self._channels and self._model is not None and self.kind is not None:
            key = RankKey(model=self._model)
            self._open_channel(key, Reading(key=key), multi_model=False)
        now = time.monotonic()
        for channel in self._channels.values():
            latest = channel.latest
            base = latest if latest.state is not EngineState.LOADING else Sample()
            channel.offer(replace(base, state=EngineState.UNREACHABLE, monotonic_s=now))

    def close(self) -> None:
        self._fetcher.close()
