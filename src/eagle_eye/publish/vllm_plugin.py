"""The vLLM stat-logger plugin: plain ``vllm serve`` publishes snapshots to NATS.

vLLM finds ``EagleEyeStatLogger`` through the entry-point group
``vllm.stat_logger_plugins`` (declared in our ``pyproject.toml``) and calls ``record()``
after every engine step on its output-handler loop. Where vLLM has
``AggregateStatLoggerBase`` (the V1 engine), ``EagleEyeStatLogger`` is one of those: vLLM
builds it once for all its data-parallel engines and calls it directly, so
``record_sleep_state`` reaches us too (vLLM's wrapper for per-engine loggers drops it);
it holds one ``EngineStatLogger`` per engine. On older vLLM it is ``EngineStatLogger``
itself, which vLLM constructs per engine with ``(vllm_config, engine_index)``.
Configuration comes from ``EAGLE_EYE_*`` environment variables (see
``eagle_eye.settings``); with no ``EAGLE_EYE_NATS_URL`` the plugin logs one line and does
nothing.

Rules this module lives by, because it runs inside the engine:

* ``record()`` never raises, never blocks and costs microseconds: it reads a few
  attributes, folds counters, and hands an immutable ``Sample`` to the publisher.
* vLLM's stats classes are not a stable interface: every field is read with
  ``getattr`` and a default, so vLLM 0.8 through current work and a missing field is
  simply absent from the snapshot.
* Broken configuration or an unreachable NATS produce one clear log line; vLLM serves on.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from typing import Any

from eagle_eye.publish.channel import Channel, InstanceIdentity, Sample, ewma
from eagle_eye.publish.publisher import Publisher
from eagle_eye.settings import (
    DEFAULT_PORT,
    PublisherSettings,
    SettingsError,
    default_host_address,
    publisher_from_env,
    server_port_from_argv,
)
from eagle_eye.snapshot import EngineState

log = logging.getLogger("eagle_eye.vllm")

try:  # Subclass vLLM's real base when vLLM is present, so its plugin loader accepts us.
    from vllm.v1.metrics.loggers import StatLoggerBase as _StatLoggerBase
except Exception:  # noqa: BLE001 - no vLLM (simulator, tests, other engines)
    _StatLoggerBase = None
try:  # vLLM with one logger for all data-parallel engines (V1, 2025 onwards)
    from vllm.v1.metrics.loggers import AggregateStatLoggerBase as _AggregateBase
except Exception:  # noqa: BLE001 - older vLLM, or none
    _AggregateBase = None
if _StatLoggerBase is None:

    class _StatLoggerBase:  # type: ignore[no-redef]
        """Stand-in with vLLM's constructor shape, used where vLLM is not installed."""

        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            pass


_shared_lock = threading.Lock()
_shared: dict[tuple[Any, ...], Publisher] = {}


def shared_publisher(settings: PublisherSettings) -> Publisher:
    """One publisher (one NATS connection, one thread) per process and configuration."""
    key = (settings.nats, settings.subject, settings.subject_mode, settings.heartbeat_s)
    with _shared_lock:
        publisher = _shared.get(key)
        if publisher is None or publisher.stopping:  # a closed one is replaced
            publisher = Publisher(
                settings.nats,
                subject=settings.subject,
                subject_mode=settings.subject_mode,
                heartbeat_s=settings.heartbeat_s,
                client_name="eagle-eye-vllm",
            )
            _shared[key] = publisher
        return publisher


class EngineStatLogger(_StatLoggerBase):  # type: ignore[misc]
    """One engine's (data-parallel rank's) logger: one snapshot per step to NATS.

    Built as ``EngineStatLogger(vllm_config, engine_index)`` by ``EagleEyeStatLogger`` (or
    by vLLM itself on older versions). The simulator and tests pass ``settings``,
    ``identity`` and ``publisher`` explicitly instead of using the environment.
    """

    def __init__(
        self,
        vllm_config: Any = None,
        engine_index: int = 0,
        *,
        settings: PublisherSettings | None = None,
        identity: InstanceIdentity | None = None,
        publisher: Publisher | None = None,
    ) -> None:
        try:
            super().__init__(vllm_config, engine_index)
        except Exception:
            log.debug("StatLoggerBase.__init__ signature changed", exc_info=True)
        self.engine_index = engine_index
        self.channel: Channel | None = None
        self._vllm_config = vllm_config
        self._prefix_queries = 0
        self._prefix_hits = 0
        self._have_prefix = False
        self._preemptions = 0
        self._prompt_tokens = 0
        self._generation_tokens = 0
        self._ttft: float | None = None
        self._itl: float | None = None
        self._state = EngineState.LOADING
        self.errors = 0
        _share_vllm_log_handlers()
        try:
            self._setup(settings, identity, publisher)
        except SettingsError as exc:
            log.error("eagle-eye: not publishing: %s", exc)
        except Exception:
            log.exception("eagle-eye: not publishing: plugin set-up failed")

    def _setup(
        self,
        settings: PublisherSettings | None,
        identity: InstanceIdentity | None,
        publisher: Publisher | None,
    ) -> None:
        if publisher is None:
            settings = settings if settings is not None else publisher_from_env()
            if settings.nats is None:
                if self.engine_index == 0:
                    log.info("eagle-eye: EAGLE_EYE_NATS_URL is not set; the stat logger is inert")
                return
            publisher = shared_publisher(settings)
        if identity is None:
            identity = identity_from_vllm(
                self._vllm_config, self.engine_index, settings or publisher_from_env()
            )
        self.channel = publisher.channel(identity)
        if self.engine_index == 0:
            log.info(
                "eagle-eye: publishing %s as %s to %s",
                identity.model,
                identity.instance_id,
                self.channel.subject,
            )

    # -- vLLM's interface ----------------------------------------------------------------

    def record(self, scheduler_stats: Any, iteration_stats: Any, *args: Any, **kwargs: Any) -> None:
        """Called by vLLM after every step (signatures of 0.8 to current accepted)."""
        channel = self.channel
        if channel is None:
            return
        try:
            channel.offer(self._sample(scheduler_stats, iteration_stats))
        except Exception:
            self.errors += 1
            if self.errors == 1:
                log.warning("eagle-eye: could not read vLLM stats", exc_info=True)

    def log_engine_initialized(self) -> None:
        """vLLM calls this once the engine is up: learn KV capacity, become ``ready``."""
        try:
            self._state = EngineState.READY
            capacity = kv_capacity_tokens(self._vllm_config)
            if self.channel is not None:
                if capacity is not None:
                    self.channel.update_identity(kv_capacity_tokens=capacity)
                self.channel.offer(_replace_state(self.channel.latest, EngineState.READY))
        except Exception:
            log.debug("eagle-eye: log_engine_initialized failed", exc_info=True)

    def log(self) -> None:
        """Periodic hook (every ``VLLM_LOG_STATS_INTERVAL``); snapshots already flow."""

    def record_sleep_state(self, sleep: Any = 0, level: Any = 0, *args: Any) -> None:
        """A sleeping engine takes no work: publish it as ``draining`` until it wakes.

        vLLM's base class names the first argument ``is_awake``, but every caller
        (``AsyncLLM.sleep``/``wake_up``) passes 1 when going to sleep and 0 on waking,
        and vLLM's own Prometheus logger reads it that way; so do we.
        """
        try:
            self._state = EngineState.DRAINING if sleep == 1 else EngineState.READY
            if self.channel is not None:
                self.channel.offer(_replace_state(self.channel.latest, self._state))
        except Exception:
            log.debug("eagle-eye: record_sleep_state failed", exc_info=True)

    # -- mapping -----------------------------------------------------------------------

    def _sample(self, scheduler_stats: Any, iteration_stats: Any) -> Sample:
        if self._state is EngineState.LOADING:
            # Engines that never call log_engine_initialized are ready once they step.
            self._state = EngineState.READY
        running = waiting = 0
        kv_usage = None
        step = None
        s = scheduler_stats
        if s is not None:
            running = getattr(s, "num_running_reqs", 0) or 0
            # vllm:num_requests_waiting counts the deferred ("skipped") ones too; so do we.
            waiting = (getattr(s, "num_waiting_reqs", 0) or 0) + (
                getattr(s, "num_skipped_waiting_reqs", 0) or 0
            )
            kv_usage = getattr(s, "kv_cache_usage", None)
            if kv_usage is None:
                kv_usage = getattr(s, "gpu_cache_usage", None)
            prefix = getattr(s, "prefix_cache_stats", None)
            if prefix is not None:
                self._have_prefix = True
                self._prefix_queries += getattr(prefix, "queries", 0) or 0
                self._prefix_hits += getattr(prefix, "hits", 0) or 0
            step = getattr(s, "step_counter", None)
        it = iteration_stats
        if it is not None:
            self._generation_tokens += getattr(it, "num_generation_tokens", 0) or 0
            prompt = getattr(it, "num_prompt_tokens", None)
            if prompt is None:
                stats = getattr(it, "prompt_token_stats", None)
                prompt = getattr(stats, "computed", None) if stats is not None else None
            self._prompt_tokens += prompt or 0
            self._preemptions += getattr(it, "num_preempted_reqs", 0) or 0
            # Fold each step's mean, not each value: one step's 32 ITLs would otherwise
            # wash out all history, and sum() over the list runs in C (hot path).
            ttfts = getattr(it, "time_to_first_tokens_iter", None)
            if ttfts:
                self._ttft = ewma(self._ttft, (sum(ttfts) / len(ttfts),))
            itls = getattr(it, "inter_token_latencies_iter", None)
            if itls:
                self._itl = ewma(self._itl, (sum(itls) / len(itls),))
        if kv_usage is not None:
            kv_usage = min(1.0, max(0.0, float(kv_usage)))
        return Sample(
            running=int(running),
            waiting=int(waiting),
            kv_usage=kv_usage,
            prefix_cache_queries_total=self._prefix_queries if self._have_prefix else None,
            prefix_cache_hits_total=self._prefix_hits if self._have_prefix else None,
            preemptions_total=self._preemptions,
            prompt_tokens_total=self._prompt_tokens,
            generation_tokens_total=self._generation_tokens,
            ttft_recent_s=self._ttft,
            itl_recent_s=self._itl,
            step=step if isinstance(step, int) and step >= 0 else None,
            state=self._state,
            monotonic_s=time.monotonic(),
        )


def _share_vllm_log_handlers() -> None:
    """Show Eagle Eye's log lines in vLLM's log stream, in vLLM's format.

    vLLM configures only its own ``vllm`` logger; without this, our INFO lines (the one
    that says the plugin is inert for lack of a NATS URL, say) would go nowhere. An
    application that configured logging itself (root or ``eagle_eye`` handlers) is left
    alone.
    """
    ours = logging.getLogger("eagle_eye")
    if ours.handlers or logging.getLogger().handlers:
        return
    theirs = logging.getLogger("vllm")
    if not theirs.handlers:
        return
    for handler in theirs.handlers:
        ours.addHandler(handler)
    ours.setLevel(theirs.getEffectiveLevel())
    ours.propagate = False


def _replace_state(sample: Sample, state: EngineState) -> Sample:
    from dataclasses import replace

    return replace(sample, state=state, monotonic_s=time.monotonic())


def identity_from_vllm(
    vllm_config: Any, engine_index: int, settings: PublisherSettings
) -> InstanceIdentity:
    """Who this engine is, from settings first and vLLM's config second."""
    env = os.environ
    port = settings.port or server_port_from_argv(sys.argv, DEFAULT_PORT)
    instance_id = settings.instance_id or f"{socket.gethostname()}-{port}"
    endpoint = settings.endpoint or f"http://{default_host_address(env)}:{port}"
    return InstanceIdentity(
        instance_id=instance_id,
        model=settings.model or served_model_name(vllm_config) or "unknown",
        engine="vllm",
        endpoint=endpoint,
        engine_version=_vllm_version(),
        dp_rank=engine_index,
        kv_capacity_tokens=kv_capacity_tokens(vllm_config),
    )


def served_model_name(vllm_config: Any) -> str | None:
    """The name clients use: ``--served-model-name`` (first) or the model path."""
    model_config = getattr(vllm_config, "model_config", None)
    if model_config is None:
        return None
    served = getattr(model_config, "served_model_name", None)
    if isinstance(served, (list, tuple)):
        served = served[0] if served else None
    if isinstance(served, str) and served:
        return served
    model = getattr(model_config, "model", None)
    return model if isinstance(model, str) and model else None


def kv_capacity_tokens(vllm_config: Any) -> int | None:
    """One engine's (data-parallel rank's) KV-cache capacity in tokens, once vLLM has
    sized the cache; None before.

    vLLM records ``kv_cache_size_tokens`` per engine where it has it (group-aware, right
    for hybrid models too). Otherwise ``num_gpu_blocks x block_size``: with tensor
    parallelism every worker holds every block for its share of the heads, so that is
    the engine's capacity; with data parallelism the API server's config holds the sum
    over the engines it talks to, so it is divided by their count.
    """
    cache = getattr(vllm_config, "cache_config", None)
    per_engine = getattr(cache, "kv_cache_size_tokens", None)
    if isinstance(per_engine, int) and per_engine > 0:
        return per_engine
    blocks = getattr(cache, "num_gpu_blocks", None)
    block_size = getattr(cache, "block_size", None)
    if isinstance(blocks, int) and isinstance(block_size, int) and blocks > 0:
        return blocks * block_size // _engines_in_client(vllm_config)
    return None


def _engines_in_client(vllm_config: Any) -> int:
    """How many data-parallel engines this API server talks to (whose blocks it sums):
    one behind an external load balancer, the node's local ones in hybrid mode, all."""
    parallel = getattr(vllm_config, "parallel_config", None)
    if parallel is None or getattr(parallel, "data_parallel_external_lb", False):
        return 1
    if getattr(parallel, "data_parallel_hybrid_lb", False):
        count = getattr(parallel, "data_parallel_size_local", 1)
    else:
        count = getattr(parallel, "data_parallel_size", 1)
    return count if isinstance(count, int) and count > 0 else 1


def _vllm_version() -> str | None:
    module = sys.modules.get("vllm")
    version = getattr(module, "__version__", None)
    return version if isinstance(version, str) else None


if _AggregateBase is not None:

    class EagleEyeStatLogger(_AggregateBase):  # type: ignore[misc]
        """The plugin vLLM loads: one ``EngineStatLogger`` per data-parallel engine.

        vLLM builds it once as ``EagleEyeStatLogger(vllm_config, engine_indexes)``;
        library users pass the class to ``AsyncLLM(..., stat_loggers=[...])``.
        """

        def __init__(self, vllm_config: Any = None, engine_indexes: Any = None) -> None:
            indexes = list(engine_indexes) if engine_indexes else [0]
            self.engines = {i: EngineStatLogger(vllm_config, i) for i in indexes}

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
            *args: Any,
            **kwargs: Any,
        ) -> None:
            engine = self.engines.get(engine_idx)
            if engine is not None:
                engine.record(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            for engine in self.engines.values():
                engine.log_engine_initialized()

        def record_sleep_state(self, sleep: Any = 0, level: Any = 0, *args: Any) -> None:
            for engine in self.engines.values():
                engine.record_sleep_state(sleep, level)

        def log(self) -> None:
            """Periodic hook; snapshots already flow."""

else:

    class EagleEyeStatLogger(EngineStatLogger):  # type: ignore[no-redef]
        """The plugin vLLM loads where it builds one logger per engine (older vLLM)."""
