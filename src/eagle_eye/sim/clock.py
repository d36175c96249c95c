"""The simulated clock of a real-time fleet: wall time scaled by ``speedup``."""

from __future__ import annotations

import asyncio
import time


class SimClock:
    """Simulated seconds since the fleet started, running ``speedup`` times faster."""

    def __init__(self, speedup: float = 1.0) -> None:
        if speedup <= 0:
            raise ValueError("speedup must be positive")
        self.speedup = speedup
        self._origin_mono = time.monotonic()

    def now_s(self) -> float:
        return (time.monotonic() - self._origin_mono) * self.speedup

    def wall_delay_s(self, sim_s: float) -> float:
        """Wall seconds until simulated time ``sim_s`` (<= 0 when it has passed)."""
        return (sim_s - self.now_s()) / self.speedup

    async def sleep_until(self, sim_s: float) -> None:
        """Sleep until simulated time ``sim_s``; always yields to the loop at least once."""
        await asyncio.sleep(max(0.0, self.wall_delay_s(sim_s)))
