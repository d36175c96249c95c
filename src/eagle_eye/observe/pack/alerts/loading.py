"""Model loading: an engine (or a Ray Serve replica) takes too long to load its weights."""

from __future__ import annotations

from typing import Final

from eagle_eye.observe.pack.alerts.model import EXPORTED, Alert, Case, Series, label, selector

MODEL_LOAD_SLOW_AFTER_S: Final = 600
"""Seconds an instance may spend in state ``loading``: downloading and loading a 70B model
from a warm cache takes a few minutes; ten means a slow volume, a cold download or a
compile that hangs, and it is past most startup probes."""

RAY_SERVE_LOAD_QUANTILE: Final = 0.9
"""Which quantile of multiplexed model loads to watch: most loads, not the one outlier."""

RAY_SERVE_LOAD_SLOW_AFTER_MS: Final = 60_000
"""Milliseconds a multiplexed model load may take at that quantile: a request that needs
a cold model waits the whole load, and past a minute clients time out."""

_LOADING: Final = "eagle_eye_instance_loading_seconds"
_RAY_LOAD: Final = "ray_serve_multiplexed_model_load_latency_ms"

SLOW_MODEL_LOAD: Final = Alert(
    name="EagleEyeSlowModelLoad",
    expr=f"{_LOADING} > {MODEL_LOAD_SLOW_AFTER_S}",
    for_="1m",
    severity="warning",
    summary=(
        f"{label('instance_id')} has been loading its model for over "
        f"{MODEL_LOAD_SLOW_AFTER_S // 60} minutes"
    ),
    description=(
        f"{label('instance_id')} ({label('model_name')}) reported state "
        f"'loading' for more than {MODEL_LOAD_SLOW_AFTER_S // 60} minutes: weights download "
        "or load is slow, or it is stuck compiling."
    ),
    runbook=(
        "Check the pod's logs and its volume/network throughput; pre-pull weights to "
        "a node-local cache or a PVC, and set startup probes longer than load time."
    ),
    fires=Case(
        series=((selector(_LOADING, EXPORTED), "0+60x15"),),
        eval_time="14m",
        fired=(EXPORTED,),
    ),
    silent=Case(
        series=((selector(_LOADING, EXPORTED), "0+60x5"),),
        eval_time="14m",
    ),
)


def _ray_load_series(latency_ms: int) -> tuple[Series, ...]:
    """Histogram buckets of one replica whose every load takes ``latency_ms``."""
    base = {"namespace": "ml", "application": "llm", "deployment": "LLMServer", "replica": "r1"}
    out: list[Series] = []
    for le in ("1000", "10000", "60000", "300000", "+Inf"):
        bound = float("inf") if le == "+Inf" else float(le)
        out.append(
            (
                selector(f"{_RAY_LOAD}_bucket", {**base, "le": le}),
                "0+1x25" if latency_ms <= bound else "0x25",
            )
        )
    return tuple(out)


_SLOW_LOAD_S: Final = f"{RAY_SERVE_LOAD_SLOW_AFTER_MS / 1000:g} s"
RAY_SERVE_SLOW_MODEL_LOAD: Final = Alert(
    name="EagleEyeRayServeSlowModelLoad",
    expr=(
        f"histogram_quantile({RAY_SERVE_LOAD_QUANTILE}, sum by (namespace, application, "
        f"deployment, le) (rate({_RAY_LOAD}_bucket[15m]))) > {RAY_SERVE_LOAD_SLOW_AFTER_MS}"
    ),
    for_="5m",
    severity="warning",
    summary=f"Ray Serve {label('deployment')} takes over {_SLOW_LOAD_S} to load models",
    description=(
        f"The {round(RAY_SERVE_LOAD_QUANTILE * 100)}th percentile of multiplexed model loads "
        f"of {label('application')}/{label('deployment')} exceeds {_SLOW_LOAD_S}: requests "
        "that need a cold model wait."
    ),
    runbook=(
        "Raise max_num_models_per_replica so hot models stay loaded, or cache weights "
        "on local disk."
    ),
    fires=Case(
        series=_ray_load_series(2 * RAY_SERVE_LOAD_SLOW_AFTER_MS),
        eval_time="20m",
        fired=({"namespace": "ml", "application": "llm", "deployment": "LLMServer"},),
    ),
    silent=Case(series=_ray_load_series(5000), eval_time="20m"),
)

ALERTS: Final = (SLOW_MODEL_LOAD, RAY_SERVE_SLOW_MODEL_LOAD)
