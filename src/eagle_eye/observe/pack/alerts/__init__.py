"""Alert rules, each with the ``promtool test rules`` cases that prove it.

One module per domain, each a table of ``Alert`` constants whose thresholds are named
module-level constants used in both the PromQL and the annotations: ``availability``
(engine down, no ready instance), ``queue``, ``kv_cache`` (saturation, preemptions),
``router`` (error ratio, stale routing metrics), ``accelerator`` (GPU/NPU next to the
engine), ``loading`` (slow model loads) and ``slo_burn`` (latency SLO budget burn).
``model`` holds ``Alert`` and ``Case``; ``promtool.py`` turns the cases into test files and
a unit test refuses an alert without them.
"""

from __future__ import annotations

from typing import Any, Final

from eagle_eye.observe.pack.alerts import (
    accelerator,
    availability,
    kv_cache,
    loading,
    queue,
    router,
    slo_burn,
)
from eagle_eye.observe.pack.alerts.model import Alert, Case, Series

__all__ = ["ALERTS", "Alert", "Case", "Series", "alert_groups"]

ALERTS: Final[tuple[Alert, ...]] = (
    *availability.ALERTS,
    *queue.ALERTS,
    *kv_cache.ALERTS,
    *router.ALERTS,
    *accelerator.ALERTS,
    *loading.ALERTS,
    *slo_burn.ALERTS,
)
"""Every alert, in the order of the generated rule file."""


def alert_groups() -> list[dict[str, Any]]:
    """The alert rule group as Prometheus loads it."""
    return [{"name": "eagle_eye.alerts", "rules": [a.to_rule() for a in ALERTS]}]
