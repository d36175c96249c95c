"""Per-engine mappings from a scraped page to ``Reading``s, and kind detection.

``read(kind, text, default_model)`` is the single entry point the agent uses;
``detect(text)`` picks the kind from the metric families on the page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from eagle_eye.publish.agent.engines import llamacpp, ray_serve, sglang, tgi, vllm
from eagle_eye.publish.agent.engines.base import EngineKind, MappingError, RankKey, Reading
from eagle_eye.publish.agent.promtext import family_prefixes

__all__ = ["EngineKind", "MappingError", "RankKey", "Reading", "detect", "read"]

# Checked in order: a Ray node page can also carry plain names of other systems, and a
# Ray Serve LLM page has ray_vllm_* (never vllm:*), so Ray goes first.
_SIGNATURES: Final = (
    (vllm.RAY_VLLM_PREFIX, EngineKind.RAY_SERVE),
    ("ray_serve_", EngineKind.RAY_SERVE),
    (sglang.PREFIX, EngineKind.SGLANG),
    (vllm.VLLM_PREFIX, EngineKind.VLLM),
    ("tgi_", EngineKind.TGI),
    ("llamacpp:", EngineKind.LLAMACPP),
)

_READERS: Final[dict[EngineKind, Callable[[str, str | None], list[Reading]]]] = {
    EngineKind.VLLM: vllm.read,
    EngineKind.SGLANG: sglang.read,
    EngineKind.TGI: tgi.read,
    EngineKind.LLAMACPP: llamacpp.read,
    EngineKind.RAY_SERVE: ray_serve.read,
}


def detect(text: str) -> EngineKind | None:
    """The engine kind whose metric families appear on ``text``, or None."""
    present = family_prefixes(text, [prefix for prefix, _ in _SIGNATURES])
    for prefix, kind in _SIGNATURES:
        if prefix in present:
            return kind
    return None


def read(kind: EngineKind, text: str, default_model: str | None = None) -> list[Reading]:
    """Readings for every rank/replica/model on the page; raises on a broken page."""
    return _READERS[kind](text, default_model)
