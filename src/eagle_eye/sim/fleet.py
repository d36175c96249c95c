"""A fleet of simulated engines on HTTP, in the current asyncio loop.

Tests, demos and the ``eagle-eye sim`` command all start engines this way::

    async with SimFleet(SimFleetConfig(engines=3, nats_url=url)) as fleet:
        fleet.urls                  # ["http://127.0.0.1:41235", ...]
        await fleet.engines[0].kill()
        await fleet.engines[0].restart()
        fleet.engines[1].set_draining(True)

Every engine publishes through the real vLLM plugin class (``EagleEyeStatLogger``) over
one shared ``Publisher`` (one NATS connection for the fleet). Start-up takes
milliseconds: nothing is loaded, only sockets are bound.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from eagle_eye.publish.publisher import Publisher
from eagle_eye.settings import PublisherSettings, nats_from_env
from eagle_eye.sim.clock import SimClock
from eagle_eye.sim.cost_model import DEFAULT_PROFILE, CostProfile, get_profile
from eagle_eye.sim.server import EngineSpec, SimEngineServer

FLAVORS = ("vllm", "sglang")


@dataclass(slots=True, kw_only=True)
class SimFleetConfig:
    """How many engines, where, how fast, and what they claim to be."""

    engines: int = 4
    host: str = "127.0.0.1"
    base_port: int = 0
    """First port; engine ``i`` listens on ``base_port + i``. 0: kernel-chosen ports."""
    flavor: str = "vllm"
    """``vllm`` or ``sglang``: metric names, ``/v1/loads``, ``/generate`` shape."""
    nats_url: str | None = None
    """Publish snapshots here through the plugin; None: no publishing."""
    speedup: float = 1.0
    """Simulated seconds per wall second; all reported times are simulated."""
    profile: str = DEFAULT_PROFILE
    speed_factors: list[float] | None = None
    """One multiplier per engine (1 = the profile's speed, 0.5 = half as fast)."""
    model: str = "sim-llama"
    """The served model name clients put in ``"model"``."""
    seed: int = 0
    instance_prefix: str = "sim"
    """Instance ids are ``{instance_prefix}-{index}``."""
    max_num_seqs: int | None = None
    """Override the profile's ``max_num_seqs`` (like vLLM's ``--max-num-seqs``)."""
    max_num_batched_tokens: int | None = None
    num_gpu_blocks: int | None = None
    """Override the KV-cache size in blocks (like ``--num-gpu-blocks-override``)."""
    max_model_len: int | None = None
    heartbeat_s: float = 1.0

    def validate(self) -> None:
        """Raise ``ValueError`` naming the bad field."""
        if self.engines <= 0:
            raise ValueError("engines must be at least 1")
        if self.flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, got {self.flavor!r}")
        if self.speedup <= 0:
            raise ValueError("speedup must be positive")
        if not 0 <= self.base_port <= 65535 - self.engines:
            raise ValueError(f"base_port {self.base_port} leaves no room for {self.engines} ports")
        factors = self.speed_factors
        if factors is not None:
            if len(factors) != self.engines:
                raise ValueError(f"{len(factors)} speed factors for {self.engines} engines")
            if any(not f > 0 for f in factors):
                raise ValueError("speed factors must be positive")
        get_profile(self.profile)
        for name in ("max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive")

    def resolved_profile(self) -> CostProfile:
        """The named profile with this config's limit overrides applied."""
        profile = get_profile(self.profile)
        changes = {
            name: getattr(self, name)
            for name in (
                "max_num_seqs",
                "max_num_batched_tokens",
                "num_gpu_blocks",
                "max_model_len",
            )
            if getattr(self, name) is not None
        }
        return profile.with_limits(**changes) if changes else profile


class SimFleet:
    """Async context manager running ``config.engines`` simulated engines."""

    def __init__(
        self,
        config: SimFleetConfig | None = None,
        *,
        publisher: Publisher | None = None,
        tracer: Any = None,
    ) -> None:
        """``publisher``: publish through this one (not closed here) instead of ``nats_url``.
        ``tracer``: an OpenTelemetry ``Tracer``; every engine then records vLLM-shaped
        engine spans joined to each request's ``traceparent`` (``server/tracing.py``)."""
        self.config = config or SimFleetConfig()
        self.tracer = tracer
        self.config.validate()
        self.clock = SimClock(self.config.speedup)
        self.publisher: Publisher | None = publisher
        self._own_publisher = False
        self.engines: list[SimEngineServer] = []

    @property
    def urls(self) -> list[str]:
        return [engine.url for engine in self.engines]

    async def start(self) -> None:
        cfg = self.config
        settings = PublisherSettings(nats=None, heartbeat_s=cfg.heartbeat_s)
        if cfg.nats_url and self.publisher is None:
            nats = nats_from_env({}, url=cfg.nats_url)
            settings = PublisherSettings(nats=nats, heartbeat_s=cfg.heartbeat_s)
            self.publisher = Publisher(
                nats, heartbeat_s=cfg.heartbeat_s, client_name="eagle-eye-sim"
            )
            self._own_publisher = True
        profile = cfg.resolved_profile()
        factors = cfg.speed_factors or [1.0] * cfg.engines
        self.engines = [
            SimEngineServer(
                EngineSpec(
                    index=i,
                    instance_id=f"{cfg.instance_prefix}-{i}",
                    host=cfg.host,
                    port=cfg.base_port + i if cfg.base_port else 0,
                    flavor=cfg.flavor,
                    model=cfg.model,
                    profile=profile,
                    speed_factor=factors[i],
                    seed=cfg.seed + i,
                ),
                self.clock,
                publisher=self.publisher,
                publisher_settings=settings,
                tracer=self.tracer,
            )
            for i in range(cfg.engines)
        ]
        try:
            await asyncio.gather(*(engine.start() for engine in self.engines))
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop every engine (``stopping`` published), then close the NATS connection."""
        await asyncio.gather(*(engine.stop() for engine in self.engines), return_exceptions=True)
        if self._own_publisher and self.publisher is not None:
            await asyncio.to_thread(self.publisher.close)
            self.publisher = None
            self._own_publisher = False

    async def __aenter__(self) -> SimFleet:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
