"""The tuning knobs of the built-in policies, in one small typed value.

The benchmark sweeps these (``bench/routing``), the router takes them from its flags, and
every built-in profile reads its plugins' parameters from here, so a tuned value is one
edit. User-defined profiles (``profiles.py``) give each plugin its own parameters instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from eagle_eye.route.prefix import DEFAULT_BLOCK_CHARS
from eagle_eye.settings import DEFAULT_STALE_AFTER_S

DEFAULT_POLICY: Final = "cost"


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyConfig:
    """Parameters of every built-in policy."""

    stale_after_s: float = DEFAULT_STALE_AFTER_S
    """Snapshots older than this are ignored; only local accounting counts."""
    sample_above: int = 64
    """With more candidates than this, score only ``sample_d`` random ones (power of d
    choices) plus the best prefix holders: keeps ``pick`` O(d) at any fleet size."""
    sample_d: int = 8
    """Random engines scored per pick in large fleets. Balancing gains little beyond a few
    choices (power of two already avoids herding) while ``pick`` cost grows with d; 8
    keeps ``pick`` well under 50 us at 1,000 instances."""
    block_chars: int = DEFAULT_BLOCK_CHARS
    # cost: all terms in "requests-equivalent" units.
    prefill_weight: float = 1.0
    """Cost per ``prefill_unit_tokens`` of prompt the engine must still compute."""
    prefill_unit_tokens: float = 1000.0
    waiting_weight: float = 1.0
    """Cost per queued request (waiting + sent since the snapshot)."""
    running_weight: float = 0.25
    """Cost per running request (decode load); vLLM's DP balancer uses 4:1 waiting:running."""
    kv_weight: float = 2.0
    """Cost per unit of KV-cache usage (0-1)."""
    kv_full: float = 0.95
    """KV usage at or above this is treated as full: the engine would preempt."""
    kv_full_penalty: float = 1000.0
    pending_prefill_weight: float = 0.1
    """Cost per ``prefill_unit_tokens`` of prompt the router has sent to the engine and
    seen no first token for (``Target.pending_prefill_tokens``): the work queued ahead."""
    # prefix_affinity gate (like the SGLang router's cache_aware balance thresholds).
    cache_threshold: float = 0.3
    """Minimum fraction of the prompt's blocks the holder must have to follow the prefix."""
    balance_abs: float = 4.0
    balance_rel: float = 1.5
    """Follow the prefix only if holder load <= max(min_load * balance_rel,
    min_load + balance_abs); otherwise the least-loaded engine takes the request."""
    session_vnodes: int = 64
