"""The routing path: requests fail through the router, or routing metrics go stale."""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.alerts.model import EXPORTED, Alert, Case, label, percent, selector
from eagle_eye.observe.pack.rules import ROUTER_REQUESTS

ERROR_RATIO_MAX: Final = 0.05
"""Share of requests (0-1) that may end in a server error over 5 minutes: a few 5xx come
from clients asking for more than ``max_model_len`` or from a pod restarting; one in
twenty is an outage for the users of that model."""

SNAPSHOT_STALE_AFTER_S: Final = 10
"""Seconds without a snapshot from a ready engine before it counts as silent: publishers
send one every heartbeat (``settings.DEFAULT_HEARTBEAT_S``, 1 s) and the router stops
trusting one after two; waiting for ten keeps a GC pause or a NATS reconnect from
alerting."""

_ROUTER_ERRORS = "eagle_eye:request_errors:ratio_rate5m"


def _router_requests(code: str, per_min: int) -> tuple[str, str]:
    labels = {"gen_ai_request_model": "llama", "code": code}
    return (selector(ROUTER_REQUESTS, labels), f"0+{per_min}x20")


HIGH_ERROR_RATE: Final = Alert(
    name="EagleEyeHighErrorRate",
    expr=f"{_ROUTER_ERRORS} > {ERROR_RATIO_MAX}",
    for_="5m",
    severity="critical",
    summary=f"More than {percent(ERROR_RATIO_MAX)} of {label('model_name')} requests fail",
    description=(
        f"The {label('source')} reports server errors for more than "
        f"{percent(ERROR_RATIO_MAX)} of the requests for {label('model_name')} over the "
        "last 5 minutes."
    ),
    runbook=(
        "Router dashboard: which upstream returns errors? Check those engine pods' "
        "logs (OOM, bad requests, max_model_len exceeded)."
    ),
    fires=Case(
        series=(_router_requests("200", 90), _router_requests("502", 10)),
        eval_time="15m",
        fired=({"model_name": "llama", "source": "router"},),
    ),
    silent=Case(
        series=(_router_requests("200", 99), _router_requests("502", 1)),
        eval_time="15m",
    ),
)

_AGE = "eagle_eye_snapshot_age_seconds"
_STATE = "eagle_eye_instance_state"
ROUTING_METRICS_STALE: Final = Alert(
    name="EagleEyeRoutingMetricsStale",
    expr=(
        f"{_AGE} > {SNAPSHOT_STALE_AFTER_S} and on (instance_id, dp_rank) "
        f'{_STATE}{{state="ready"}} == 1'
    ),
    for_="1m",
    severity="warning",
    summary=(f"No fresh snapshot from {label('instance_id')} for over {SNAPSHOT_STALE_AFTER_S} s"),
    description=(
        f"{label('instance_id')} (rank {label('dp_rank')}, "
        f"{label('model_name')}) said it was ready but has published nothing on "
        f"NATS for over {SNAPSHOT_STALE_AFTER_S} s; routers fall back to their own "
        "accounting for it."
    ),
    runbook=(
        "Is the engine hung (check its /health) or has its publisher lost NATS "
        "(engine logs: eagle_eye.publish)? Check the NATS server's connections."
    ),
    fires=Case(
        series=(
            (selector(_AGE, EXPORTED), "0.5x3 30+60x12"),
            (selector(_STATE, {**EXPORTED, "state": "ready"}), "1x15"),
        ),
        eval_time="10m",
        fired=(EXPORTED,),
    ),
    silent=Case(
        series=(
            (selector(_AGE, EXPORTED), "0.5x15"),
            (selector(_STATE, {**EXPORTED, "state": "ready"}), "1x15"),
        ),
        eval_time="10m",
    ),
)

ALERTS: Final = (HIGH_ERROR_RATE, ROUTING_METRICS_STALE)
