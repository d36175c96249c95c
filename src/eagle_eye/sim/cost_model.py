"""How long one engine step takes: a documented, calibrated cost model (pure).

The simulator advances in engine steps, like vLLM V1: each step runs one forward pass
over a batch that mixes prefill chunks and decode tokens. Its duration is::

    step_s = (step_overhead_s
              + prefill_token_s   * prefill_tokens
              + decode_seq_s      * decode_seqs
              + kv_read_token_s   * kv_tokens_read
              + attention_pair_s  * prefill_attention_pairs) / speed_factor

* ``step_overhead_s``: reading the weights once per step (decode is memory-bound) plus
  the CPU side of a step (scheduling, sampling, detokenising).
* ``prefill_token_s``: the dense matmuls per prompt token (2 x parameters FLOPs) at a
  realistic model FLOPs utilisation.
* ``decode_seq_s``: the same matmuls for one decode token plus per-sequence sampling
  and bookkeeping.
* ``kv_read_token_s``: reading one token's K and V over all layers from HBM; every
  scheduled sequence reads its whole context once per step.
* ``attention_pair_s``: the quadratic part of prefill attention, per (query, key) pair
  (causal: a chunk of ``n`` new tokens after ``c`` cached ones has ``n * (c + n/2)``
  pairs). It is what makes 80k-token prompts cost more than linearly.

Constants are derived from public hardware and model specifications with efficiency
factors taken from published measurements; ``docs/simulator.md`` shows each derivation
and the sources. They reproduce the order of magnitude of vLLM on that hardware (ITL,
prefill throughput, KV capacity), not an exact trace of any one GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

BLOCK_SIZE_TOKENS: Final = 16
"""vLLM's default KV block size on GPUs (``--block-size``, CUDA default 16)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CostProfile:
    """One model-on-hardware configuration: step cost constants and engine limits."""

    name: str
    description: str
    step_overhead_s: float
    """Fixed cost of any non-empty step (weights read once + CPU overhead)."""
    prefill_token_s: float
    """Cost per prompt token computed in a step."""
    decode_seq_s: float
    """Cost per sequence decoding one token in a step."""
    kv_read_token_s: float
    """Cost per token of context read from the KV cache by a scheduled sequence."""
    attention_pair_s: float
    """Cost per causal (query, key) pair of prefill attention."""
    num_gpu_blocks: int
    """KV-cache capacity in blocks (vLLM logs it as ``# GPU blocks``)."""
    block_size: int = BLOCK_SIZE_TOKENS
    max_model_len: int = 131072
    """Longest prompt + output a request may have (``--max-model-len``)."""
    max_num_seqs: int = 1024
    """Most requests running at once (vLLM V1 default on >= 70 GiB GPUs, API server)."""
    max_num_batched_tokens: int = 8192
    """Per-step token budget (vLLM V1 default on >= 70 GiB GPUs, API server)."""
    mean_output_tokens: int = 256
    """Mean length at which a request without ``ignore_eos`` emits EOS."""
    sources: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    def step_time_s(
        self,
        *,
        prefill_tokens: int,
        decode_seqs: int,
        kv_tokens_read: int,
        attention_pairs: float = 0.0,
        speed_factor: float = 1.0,
    ) -> float:
        """Duration of one step with this batch (0 for an empty batch)."""
        if prefill_tokens == 0 and decode_seqs == 0:
            return 0.0
        cost = (
            self.step_overhead_s
            + self.prefill_token_s * prefill_tokens
            + self.decode_seq_s * decode_seqs
            + self.kv_read_token_s * kv_tokens_read
            + self.attention_pair_s * attention_pairs
        )
        return cost / speed_factor

    def with_limits(self, **changes: int | float | str) -> CostProfile:
        """A copy with some fields changed (tests shrink the KV cache this way)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def attention_pairs(new_tokens: int, cached_tokens: int) -> float:
    """Causal (query, key) pairs for ``new_tokens`` queries after ``cached_tokens`` keys."""
    return new_tokens * (cached_tokens + (new_tokens + 1) / 2)


# ---- calibration ---------------------------------------------------------------------
# H100 SXM5 80 GB: 989 TFLOPS dense BF16, 3.35 TB/s HBM3 (NVIDIA H100 datasheet).
_H100_FLOPS: Final = 989e12
_H100_HBM_BYTES_PER_S: Final = 3.35e12
_MFU: Final = 0.5  # prefill MFU of vLLM on H100 (Sarathi-Serve / DistServe report 40-60 %)
_HBM_EFFICIENCY: Final = 0.8  # achievable fraction of peak HBM bandwidth in decode
_CPU_STEP_OVERHEAD_S: Final = 0.0005  # vLLM V1 scheduler + sampler per step, async output
_PER_SEQ_OVERHEAD_S: Final = 10e-6  # sampling + detokenising one sequence per step


def _gpu_profile(
    *,
    name: str,
    description: str,
    params: float,
    layers: int,
    hidden: int,
    kv_heads: int,
    head_dim: int,
    tp: int,
    num_gpu_blocks: int,
    max_model_len: int,
    extra_overhead_s: float,
    sources: tuple[str, ...],
) -> CostProfile:
    flops = _H100_FLOPS * _MFU * tp
    hbm = _H100_HBM_BYTES_PER_S * _HBM_EFFICIENCY
    weight_bytes_per_gpu = params * 2 / tp
    kv_bytes_per_token_per_gpu = 2 * layers * kv_heads * head_dim * 2 / tp
    per_token_s = 2 * params / flops
    return CostProfile(
        name=name,
        description=description,
        step_overhead_s=weight_bytes_per_gpu / hbm + _CPU_STEP_OVERHEAD_S + extra_overhead_s,
        prefill_token_s=per_token_s,
        decode_seq_s=per_token_s + _PER_SEQ_OVERHEAD_S,
        kv_read_token_s=kv_bytes_per_token_per_gpu / hbm,
        attention_pair_s=4 * layers * hidden / flops,
        num_gpu_blocks=num_gpu_blocks,
        max_model_len=max_model_len,
        sources=sources,
    )


_COMMON_SOURCES: Final = (
    "NVIDIA H100 Tensor Core GPU datasheet: 989 TFLOPS BF16 dense, 3.35 TB/s (SXM5)",
    "vLLM engine/arg_utils.py: max_num_seqs 1024, max_num_batched_tokens 8192 "
    "for the API server on GPUs with >= 70 GiB",
    "vLLM cache config: block_size 16, gpu_memory_utilization 0.9",
    "Agrawal et al., Sarathi-Serve (OSDI'24) and Zhong et al., DistServe (OSDI'24): "
    "prefill MFU 40-60 % on A100/H100",
)

PROFILES: Final[dict[str, CostProfile]] = {
    p.name: p
    for p in (
        _gpu_profile(
            name="llama3.1-8b-h100",
            description="Llama-3.1-8B-Instruct, BF16, one H100 SXM 80 GB (TP1)",
            params=8.03e9,
            layers=32,
            hidden=4096,
            kv_heads=8,
            head_dim=128,
            tp=1,
            # 0.9 x 80 GiB - 16.1 GB weights - ~4 GB activations/graphs = ~56 GB of KV at
            # 128 KiB per token: ~430k tokens, what vLLM logs for this model on an H100.
            num_gpu_blocks=27_000,
            max_model_len=131_072,
            extra_overhead_s=0.0,
            sources=(
                *_COMMON_SOURCES,
                "meta-llama/Llama-3.1-8B config.json: 32 layers, hidden 4096, 8 KV heads, "
                "head_dim 128, max_position_embeddings 131072",
            ),
        ),
        _gpu_profile(
            name="llama3.1-70b-h100x4",
            description="Llama-3.1-70B-Instruct, BF16, four H100 SXM 80 GB (TP4)",
            params=70.6e9,
            layers=80,
            hidden=8192,
            kv_heads=8,
            head_dim=128,
            tp=4,
            # Per GPU: 0.9 x 80 GiB - 35.3 GB weights - ~4 GB = ~33 GB at 80 KiB per token.
            num_gpu_blocks=25_000,
            max_model_len=131_072,
            extra_overhead_s=0.0015,  # two all-reduces per layer over NVLink
            sources=(
                *_COMMON_SOURCES,
                "meta-llama/Llama-3.1-70B config.json: 80 layers, hidden 8192, 8 KV heads, "
                "head_dim 128, max_position_embeddings 131072",
            ),
        ),
        CostProfile(
            name="tiny-cpu",
            description=(
                "The tiny 2-layer Llama on vLLM's CPU build used by the side-by-side tests "
                "(short context: max_model_len 2048)"
            ),
            # Measured side by side with vLLM 0.32 CPU on this project's 2-core machines
            # (tests/integration/vllm/test_sim_vs_vllm.py): ITL about 3.3 ms at batch 4,
            # prefill about 0.1 ms per computed token in mixed batches; TOOLS notes 32
            # concurrent 200-token requests in about 6 s (~30 ms steps at batch 32, HTTP
            # load on the same 2 cores included).
            step_overhead_s=0.002,
            prefill_token_s=60e-6,
            decode_seq_s=500e-6,
            kv_read_token_s=20e-9,
            attention_pair_s=1e-9,
            num_gpu_blocks=4096,
            max_model_len=2048,
            max_num_seqs=256,
            max_num_batched_tokens=2048,
            mean_output_tokens=64,
            sources=("Eagle Eye side-by-side test and TOOLS notes: vLLM CPU build, tiny Llama",),
        ),
    )
}

DEFAULT_PROFILE: Final = "llama3.1-8b-h100"


def get_profile(name: str) -> CostProfile:
    """The named profile; ``KeyError`` lists the known names."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise KeyError(f"unknown simulator profile {name!r}; known: {known}") from None


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks needed to hold ``tokens`` tokens."""
    return math.ceil(tokens / block_size) if tokens > 0 else 0
