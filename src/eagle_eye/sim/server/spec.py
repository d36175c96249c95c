"""What defines one simulated engine: identity, address, flavour, model, cost profile."""

from __future__ import annotations

from dataclasses import dataclass

from eagle_eye.sim.cost_model import CostProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSpec:
    """Everything that defines one simulated engine (fixed across restarts)."""

    index: int
    instance_id: str
    host: str
    port: int
    """0: a kernel-chosen port (kept across ``restart()``)."""
    flavor: str
    """``vllm`` or ``sglang``: which engine's API and metric names to imitate."""
    model: str
    profile: CostProfile
    speed_factor: float
    seed: int
