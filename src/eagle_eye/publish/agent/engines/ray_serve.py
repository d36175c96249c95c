"""A Ray node's ``/metrics`` page (Ray's metrics export port) for Ray Serve apps.

Ray Serve LLM deployments log vLLM's metrics through Ray (``ray_vllm_*``, one
``ReplicaId`` per replica): those give full readings per replica and model. A Serve app
that runs something else still has Ray Serve's own per-replica gauge
``ray_serve_replica_processing_queries{replica=...}``; then each replica becomes a
reading with only ``running`` set (Ray keeps queued queries per deployment handle, not
per replica, so ``waiting`` stays 0), and the model name is the deployment name.
"""

from __future__ import annotations

from typing import Final

from eagle_eye.publish.agent.engines import vllm
from eagle_eye.publish.agent.engines.base import (
    EngineKind,
    EngineMap,
    MappingError,
    RankKey,
    Reading,
    read_page,
)
from eagle_eye.publish.agent.promtext import family_prefixes


def _serve_key(labels: dict[str, str]) -> RankKey | None:
    replica = labels.get("replica", "")
    if not replica:
        return None
    return RankKey(model=labels.get("deployment", ""), replica=replica)


RAY_SERVE: Final = EngineMap(
    kind=EngineKind.RAY_SERVE,
    fields={"running": ("ray_serve_replica_processing_queries",)},
    key=_serve_key,
    required=("running",),
)


def read(text: str, default_model: str | None = None) -> list[Reading]:
    """Per-replica readings: vLLM-grade where ``ray_vllm_*`` exist, else Serve's gauge."""
    if family_prefixes(text, (vllm.RAY_VLLM_PREFIX,)):
        return vllm.read(text, default_model, ray=True)
    try:
        return read_page(text, RAY_SERVE, default_model)
    except MappingError:
        raise MappingError("no ray_vllm_* or ray_serve_replica_processing_queries series") from None
