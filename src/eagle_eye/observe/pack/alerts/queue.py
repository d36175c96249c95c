"""Queueing: requests wait in an engine's scheduler instead of running."""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.alerts.model import VLLM_POD_OUT, Alert, Case, label, vllm_series

QUEUE_WAITING_REQUESTS_MAX: Final = 20
"""Waiting requests one engine may hold before it counts as queueing: a busy engine briefly
queues a few requests between batch steps; a steady 20 means it is at its batch or
KV-cache limit and the time to first token grows with every arrival."""

QUEUE_BUILD_UP_FOR_MIN: Final = 5
"""Minutes the queue must stay over the limit: bursts drain within a minute or two, so only
a queue that lasts this long needs replicas or rebalancing."""

QUEUE_BUILD_UP: Final = Alert(
    name="EagleEyeQueueBuildUp",
    expr=f"eagle_eye:requests_waiting > {QUEUE_WAITING_REQUESTS_MAX}",
    for_=f"{QUEUE_BUILD_UP_FOR_MIN}m",
    severity="warning",
    summary=(
        f"{label('pod')} has had more than {QUEUE_WAITING_REQUESTS_MAX} requests queued "
        f"for {QUEUE_BUILD_UP_FOR_MIN} minutes"
    ),
    description=(
        f"Requests for {label('model_name')} wait in the {label('engine_kind')} "
        f"scheduler of {label('pod')} instead of running: the engine is at its "
        "batch or KV-cache limit."
    ),
    runbook=(
        "Compare with the other pods of the model: if only this one queues, the "
        "router is not balancing (check routing-metrics freshness); if all do, add "
        "replicas."
    ),
    fires=Case(
        series=(vllm_series("vllm:num_requests_waiting", "30x15"),),
        eval_time="10m",
        fired=(VLLM_POD_OUT,),
    ),
    silent=Case(
        series=(vllm_series("vllm:num_requests_waiting", "0x5 30x3 0x7"),),
        eval_time="10m",
    ),
)

ALERTS: Final = (QUEUE_BUILD_UP,)
