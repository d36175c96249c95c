"""The five dashboards, in the order the docs list them.

Each lives in its own module as a table of panels: ``dashboards_fleet`` (fleet overview),
``dashboards_engine`` (one engine, everything vLLM reports), ``dashboards_router``
(gateway and exporter) and ``dashboards_cluster`` (KV cache vs accelerator, Ray Serve).
"""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.dashboards_cluster import KV_ACCELERATOR, RAY_SERVE
from eagle_eye.observe.pack.dashboards_engine import ENGINE
from eagle_eye.observe.pack.dashboards_fleet import FLEET
from eagle_eye.observe.pack.dashboards_router import ROUTER
from eagle_eye.observe.pack.grafana import Dashboard

DASHBOARDS: Final[tuple[Dashboard, ...]] = (FLEET, ENGINE, ROUTER, KV_ACCELERATOR, RAY_SERVE)
