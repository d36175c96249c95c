"""The real-vLLM tests' harness: the server handles come from ``eagle_eye.bench.vllm_server``
(shared with the benchmarks); this adds what only the tests share.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_eye.bench.vllm_server import (
    DISABLED_PLUGINS,
    MAX_MODEL_LEN,
    SERVED_MODEL_NAME,
    START_TIMEOUT_S,
    VllmServer,
    cache_root,
    ensure_tiny_model,
    start_vllm_server,
    vllm_env,
)
from eagle_eye.bus.embedded import EmbeddedNats

__all__ = [
    "DISABLED_PLUGINS",
    "INSTANCE_ID",
    "MAX_MODEL_LEN",
    "MAX_NUM_SEQS",
    "SERVED_MODEL_NAME",
    "START_TIMEOUT_S",
    "EagleVllm",
    "VllmServer",
    "cache_root",
    "ensure_tiny_model",
    "start_vllm_server",
    "vllm_env",
]

INSTANCE_ID = "vllm-it"
"""EAGLE_EYE_INSTANCE_ID of the shared plugin-enabled server."""
MAX_NUM_SEQS = 4
"""Its batch size: small, so a burst of requests leaves some waiting (a visible queue)."""


@dataclass
class EagleVllm:
    """The shared plugin-enabled server and what happened while NATS was still down."""

    server: VllmServer
    nats: EmbeddedNats
    startup_log: str
    """vLLM's log up to its first answer, i.e. while its NATS URL pointed at nothing."""
    served_without_nats: bool

    @property
    def nats_url(self) -> str:
        return self.nats.url
