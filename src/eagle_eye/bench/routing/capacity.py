"""Fleet capacity for a trace, from the simulator's cost model, to set ``--load F``.

``--load 0.85`` means: scale the trace's arrival rate to 85 % of the request rate the
fleet sustains on this trace's request mix. That rate is estimated analytically from the
same cost model the simulator steps with (``eagle_eye.sim.cost_model``):

- An engine at saturation runs full steps of ``max_num_batched_tokens`` tokens (prefill
  chunks plus one token per decoding sequence), so a request with ``p`` prompt and ``o``
  output tokens occupies ``(p + o) / max_num_batched_tokens`` steps' fixed overhead.
- Its prompt costs ``prefill_token_s`` per token plus causal attention
  (``attention_pair_s`` x ``p (p + 1) / 2``: chunking does not change the pair count).
- Each output token costs ``decode_seq_s`` plus reading its whole context
  (``kv_read_token_s`` x (``p`` + tokens generated so far)).
- **No prefix-cache reuse is assumed.** Reuse depends on the routing policy, which is
  what the benchmark measures: a router that keeps conversations on warm engines runs
  the same offered load at a lower real utilisation; round-robin, which scatters
  conversations, runs close to the nominal figure.

Capacity (requests/s) = sum of engine speed factors / mean per-request cost, the mean
taken over the requests actually replayed. Every figure goes into ``results.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from eagle_eye.bench.routing.trace import TraceRequest


class CostModel(Protocol):
    """The fields of ``eagle_eye.sim.cost_model.CostProfile`` this estimate reads."""

    @property
    def name(self) -> str: ...
    @property
    def step_overhead_s(self) -> float: ...
    @property
    def prefill_token_s(self) -> float: ...
    @property
    def decode_seq_s(self) -> float: ...
    @property
    def kv_read_token_s(self) -> float: ...
    @property
    def attention_pair_s(self) -> float: ...
    @property
    def max_num_batched_tokens(self) -> int: ...


def request_cost_s(profile: CostModel, input_tokens: int, output_tokens: int) -> float:
    """Engine-seconds one request needs on a saturated engine at speed factor 1."""
    p, o = input_tokens, output_tokens
    steps = (p + o) / profile.max_num_batched_tokens
    prefill = profile.prefill_token_s * p + profile.attention_pair_s * p * (p + 1) / 2
    # Context read per decode step: p, p + 1, ..., p + o - 1.
    kv_read = profile.kv_read_token_s * (o * p + o * (o - 1) / 2)
    decode = profile.decode_seq_s * o + kv_read
    return steps * profile.step_overhead_s + prefill + decode


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityEstimate:
    """How the fleet's capacity on a trace was computed (goes into results.json)."""

    profile: str
    engines: int
    speed_factor_sum: float
    mean_request_cost_s: float
    capacity_rps: float
    trace_rate_rps: float
    load: float
    rate_factor: float
    """Multiplier applied to the trace's arrival rate: load x capacity / trace rate."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_capacity(
    requests: Sequence[TraceRequest],
    profile: CostModel,
    speed_factors: Sequence[float],
    *,
    load: float,
    trace_rate_rps: float,
) -> CapacityEstimate:
    """Capacity of ``speed_factors`` engines on ``requests``; and the rate factor for ``load``."""
    if not requests:
        raise ValueError("empty trace")
    if load <= 0:
        raise ValueError(f"load must be > 0, got {load}")
    mean_cost = sum(
        request_cost_s(profile, r.input_tokens, r.output_tokens) for r in requests
    ) / len(requests)
    speed = float(sum(speed_factors))
    capacity = speed / mean_cost
    return CapacityEstimate(
        profile=profile.name,
        engines=len(speed_factors),
        speed_factor_sum=speed,
        mean_request_cost_s=mean_cost,
        capacity_rps=capacity,
        trace_rate_rps=trace_rate_rps,
        load=load,
        rate_factor=load * capacity / trace_rate_rps,
    )
