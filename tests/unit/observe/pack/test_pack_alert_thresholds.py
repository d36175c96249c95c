"""Each alert threshold is one named constant, written into both the PromQL and the text."""

from __future__ import annotations

import pytest

from eagle_eye.observe.pack.alerts import ALERTS, Alert, kv_cache, loading, queue, router
from eagle_eye.observe.pack.alerts import accelerator as acc
from eagle_eye.observe.pack.alerts.model import label, percent

# (alert, text the expression must contain, text an annotation must contain)
CASES = (
    (
        queue.QUEUE_BUILD_UP,
        f"> {queue.QUEUE_WAITING_REQUESTS_MAX}",
        f"more than {queue.QUEUE_WAITING_REQUESTS_MAX} requests",
    ),
    (
        kv_cache.KV_CACHE_SATURATED,
        f"> {kv_cache.KV_CACHE_SATURATED_RATIO}",
        f"above {percent(kv_cache.KV_CACHE_SATURATED_RATIO)}",
    ),
    (
        kv_cache.PREEMPTION_STORM,
        f"> {kv_cache.PREEMPTIONS_PER_S_MAX}",
        f"more than {kv_cache.PREEMPTIONS_PER_S_MAX:g} requests per second",
    ),
    (
        router.HIGH_ERROR_RATE,
        f"> {router.ERROR_RATIO_MAX}",
        f"more than {percent(router.ERROR_RATIO_MAX)}",
    ),
    (
        router.ROUTING_METRICS_STALE,
        f"> {router.SNAPSHOT_STALE_AFTER_S}",
        f"over {router.SNAPSHOT_STALE_AFTER_S} s",
    ),
    (
        acc.KV_HIGH_COMPUTE_LOW,
        f"< {acc.LOW_COMPUTE_UTILIZATION_RATIO}",
        f"below {percent(acc.LOW_COMPUTE_UTILIZATION_RATIO)}",
    ),
    (
        loading.SLOW_MODEL_LOAD,
        f"> {loading.MODEL_LOAD_SLOW_AFTER_S}",
        f"over {loading.MODEL_LOAD_SLOW_AFTER_S // 60} minutes",
    ),
    (
        loading.RAY_SERVE_SLOW_MODEL_LOAD,
        f"> {loading.RAY_SERVE_LOAD_SLOW_AFTER_MS}",
        f"over {loading.RAY_SERVE_LOAD_SLOW_AFTER_MS / 1000:g} s",
    ),
)


@pytest.mark.parametrize(("alert", "in_expr", "in_text"), CASES, ids=[c[0].name for c in CASES])
def test_threshold_appears_in_expression_and_annotation(
    alert: Alert, in_expr: str, in_text: str
) -> None:
    assert in_expr in alert.expr
    assert in_text in alert.summary + alert.description


def test_for_durations_quoted_in_the_summary_match_the_rule() -> None:
    assert queue.QUEUE_BUILD_UP.for_ == f"{queue.QUEUE_BUILD_UP_FOR_MIN}m"
    assert f"for {queue.QUEUE_BUILD_UP_FOR_MIN} minutes" in queue.QUEUE_BUILD_UP.summary
    saturated = kv_cache.KV_CACHE_SATURATED
    assert saturated.for_ == f"{kv_cache.KV_CACHE_SATURATED_FOR_MIN}m"
    assert f"for {kv_cache.KV_CACHE_SATURATED_FOR_MIN} minutes" in saturated.summary


def test_alert_names_are_unique_across_domains() -> None:
    names = [a.name for a in ALERTS]
    assert len(names) == len(set(names))


def test_threshold_formatting_helpers() -> None:
    assert percent(0.9) == "90 %"
    assert percent(0.05) == "5 %"
    assert percent(0.125) == "12.5 %"
    assert label("pod") == "{{ $labels.pod }}"
