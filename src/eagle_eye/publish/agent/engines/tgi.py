"""Hugging Face TGI's ``/metrics`` page (names from its documentation, see ANCHORS.md).

TGI serves one model and labels nothing with it, so the model name comes from the
agent (``--model`` or the engine's ``/v1/models``). It has no KV-usage gauge and no
TTFT histogram, so those fields stay absent. ``tgi_batch_max_total_tokens`` is the
token budget TGI derived from free memory for the KV cache: the KV capacity.
Generated and input token totals are the ``_sum`` of TGI's per-request histograms,
so they move when requests finish, not per step.
"""

from __future__ import annotations

from typing import Final

from eagle_eye.publish.agent.engines.base import EngineKind, EngineMap, RankKey, Reading, read_page


def _key(_labels: dict[str, str]) -> RankKey:
    return RankKey(model="")


TGI: Final = EngineMap(
    kind=EngineKind.TGI,
    fields={
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
        "kv_capacity_tokens": ("tgi_batch_max_total_tokens",),
        "prompt_tokens_total": ("tgi_request_input_length_sum",),
        "generation_tokens_total": ("tgi_request_generated_tokens_sum",),
    },
    key=_key,
)


def read(text: str, default_model: str | None = None) -> list[Reading]:
    """One reading (TGI has no ranks on its page)."""
    return read_page(text, TGI, default_model)
