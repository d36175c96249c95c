"""Synthetic workloads, in the same ``TraceRequest`` form as a replayed trace.

A routing policy must not be tuned to one trace, so the benchmark also runs shapes that
stress different failure modes of routers (``../shared/ANCHORS.md``):

- ``short_chat``: short independent prompts (ShareGPT-like lengths), nothing shared:
  pure load balancing; cache affinity can only hurt.
- ``system_prompts``: many groups, each with a long shared system prompt: the case where
  cache-chasing routers pile a whole group onto one engine.
- ``multi_turn``: conversations whose every turn resends the history: session affinity
  pays, but sessions differ wildly in length.
- ``bursts``: quiet periods and sudden 6x bursts: herding on stale metrics shows here.
- ``heterogeneous``: the ``short_chat``/``system_prompts`` mix on a fleet where one
  engine runs at half speed (a fleet shape, see ``Scenario.speed_factors``).

Arrival times are generated at a nominal rate; the benchmark rescales them to the
requested fraction of fleet capacity (``trace.scale_rate``), so only the shape matters
here. Every generator is deterministic for a given seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from eagle_eye.bench.routing.trace import MOONCAKE_BLOCK_TOKENS, TraceRequest

_FRESH_ID_BASE: Final = 1 << 40
"""Synthetic block ids start here so they never meet a real trace's ids."""


class _Ids:
    """Allocator of never-before-used block ids."""

    def __init__(self) -> None:
        self._next = _FRESH_ID_BASE

    def take(self, n: int) -> tuple[int, ...]:
        start = self._next
        self._next += n
        return tuple(range(start, start + n))


def _blocks(tokens: int) -> int:
    return max(1, math.ceil(tokens / MOONCAKE_BLOCK_TOKENS))


def _lognormal_int(rng: random.Random, mean: float, sigma: float, lo: int, hi: int) -> int:
    """A lognormal draw with the given mean, clipped to [lo, hi]."""
    mu = math.log(mean) - sigma * sigma / 2
    return int(min(hi, max(lo, round(rng.lognormvariate(mu, sigma)))))


def _poisson_arrivals(rng: random.Random, rate_rps: float, duration_s: float) -> list[float]:
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate_rps)
        if t > duration_s:
            return times
        times.append(t)


def short_chat(
    *, duration_s: float = 600.0, rate_rps: float = 10.0, seed: int = 0
) -> list[TraceRequest]:
    """ShareGPT-like: input mean ~250 tokens, output mean ~220, no shared prefixes.

    The means and spread follow the ShareGPT V3 length statistics commonly used by
    vLLM's serving benchmark (heavy-tailed, inputs mostly under 1k tokens).
    """
    rng = random.Random(seed)
    ids = _Ids()
    out = []
    for t in _poisson_arrivals(rng, rate_rps, duration_s):
        inp = _lognormal_int(rng, 250, 1.0, 8, 4096)
        outp = _lognormal_int(rng, 220, 0.9, 4, 2048)
        out.append(
            TraceRequest(
                arrival_s=t, input_tokens=inp, output_tokens=outp, hash_ids=ids.take(_blocks(inp))
            )
        )
    return out


def system_prompts(
    *,
    duration_s: float = 600.0,
    rate_rps: float = 4.0,
    groups: int = 64,
    system_tokens: int = 6144,
    seed: int = 0,
) -> list[TraceRequest]:
    """``groups`` tenants, each with a ``system_tokens``-long shared prefix + a question.

    Group popularity is Zipf-like (a few tenants send most traffic), which is what makes
    a prefix-greedy router overload one engine.
    """
    rng = random.Random(seed)
    ids = _Ids()
    sys_blocks = system_tokens // MOONCAKE_BLOCK_TOKENS
    prefixes = [ids.take(sys_blocks) for _ in range(groups)]
    weights = [1.0 / (g + 1) for g in range(groups)]
    out = []
    for t in _poisson_arrivals(rng, rate_rps, duration_s):
        g = rng.choices(range(groups), weights)[0]
        question = _lognormal_int(rng, 400, 0.8, 16, 4096)
        inp = sys_blocks * MOONCAKE_BLOCK_TOKENS + question
        outp = _lognormal_int(rng, 250, 0.8, 4, 2048)
        hash_ids = prefixes[g] + ids.take(_blocks(question))
        out.append(
            TraceRequest(arrival_s=t, input_tokens=inp, output_tokens=outp, hash_ids=hash_ids)
        )
    return out


def multi_turn(
    *,
    duration_s: float = 600.0,
    rate_rps: float = 4.0,
    turns_mean: float = 5.0,
    think_s: float = 20.0,
    seed: int = 0,
) -> list[TraceRequest]:
    """Conversations: each turn's prompt is the whole history plus a new message.

    Sessions start as a Poisson process at ``rate_rps / turns_mean``; the next turn comes
    ``think_s`` (exponential) after the previous one's arrival. The history is kept in
    whole 512-token blocks, so a turn reuses every complete block of the turn before.
    """
    rng = random.Random(seed)
    ids = _Ids()
    out: list[TraceRequest] = []
    for s, start in enumerate(_poisson_arrivals(rng, rate_rps / turns_mean, duration_s)):
        turns = max(1, round(rng.expovariate(1.0 / turns_mean)))
        history: tuple[int, ...] = ids.take(_blocks(_lognormal_int(rng, 1500, 0.6, 200, 8000)))
        t = start
        for _ in range(turns):
            if t > duration_s:
                break
            message = _lognormal_int(rng, 300, 0.9, 8, 4096)
            answer = _lognormal_int(rng, 300, 0.8, 8, 2048)
            hash_ids = history + ids.take(_blocks(message))
            inp = len(history) * MOONCAKE_BLOCK_TOKENS + message
            out.append(
                TraceRequest(
                    arrival_s=t,
                    input_tokens=inp,
                    output_tokens=answer,
                    hash_ids=hash_ids,
                    session=f"s{s}",
                )
            )
            history = hash_ids + ids.take(_blocks(answer))
            t += rng.expovariate(1.0 / think_s)
    out.sort(key=lambda r: r.arrival_s)
    return out


def bursts(
    *,
    duration_s: float = 600.0,
    rate_rps: float = 10.0,
    period_s: float = 60.0,
    burst_s: float = 6.0,
    burst_factor: float = 6.0,
    seed: int = 0,
) -> list[TraceRequest]:
    """Short-chat requests whose rate jumps ``burst_factor``-fold for ``burst_s`` each period.

    The base rate is set so the mean over a period is ``rate_rps``.
    """
    rng = random.Random(seed)
    ids = _Ids()
    base = rate_rps * period_s / (period_s - burst_s + burst_s * burst_factor)
    out = []
    t = 0.0
    while True:
        in_burst = (t % period_s) < burst_s
        t += rng.expovariate(base * (burst_factor if in_burst else 1.0))
        if t > duration_s:
            break
        inp = _lognormal_int(rng, 600, 1.0, 8, 8192)
        outp = _lognormal_int(rng, 200, 0.9, 4, 2048)
        out.append(
            TraceRequest(
                arrival_s=t, input_tokens=inp, output_tokens=outp, hash_ids=ids.take(_blocks(inp))
            )
        )
    return out


def mixed(*, duration_s: float = 600.0, rate_rps: float = 6.0, seed: int = 0) -> list[TraceRequest]:
    """Half ``short_chat``, half ``system_prompts`` (used with a heterogeneous fleet)."""
    a = short_chat(duration_s=duration_s, rate_rps=rate_rps / 2, seed=seed)
    b = system_prompts(duration_s=duration_s, rate_rps=rate_rps / 2, seed=seed + 1)
    # The two generators draw ids from separate allocators: shift b's fresh ids apart.
    shift = 1 << 36
    b = [
        TraceRequest(
            arrival_s=r.arrival_s,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            hash_ids=tuple(i + shift for i in r.hash_ids),
        )
        for r in b
    ]
    return sorted(a + b, key=lambda r: r.arrival_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A workload plus the fleet shape it is meant to run on."""

    name: str
    build: Callable[..., list[TraceRequest]]
    speed_factors: Sequence[float] | None = None
    """One engine-speed multiplier per engine (None: all 1); the last is used for extras."""
    description: str = ""


SCENARIOS: Final[dict[str, Scenario]] = {
    s.name: s
    for s in (
        Scenario(name="short_chat", build=short_chat, description="ShareGPT-like, no sharing"),
        Scenario(
            name="system_prompts", build=system_prompts, description="64 groups x 6k shared prefix"
        ),
        Scenario(name="multi_turn", build=multi_turn, description="sessions resending history"),
        Scenario(name="bursts", build=bursts, description="6x bursts, 6 s every minute"),
        Scenario(
            name="heterogeneous",
            build=mixed,
            speed_factors=(0.5,),
            description="mixed chat + system prompts, engine 0 at half speed",
        ),
    )
}


def fleet_speed_factors(scenario: Scenario | None, engines: int) -> list[float]:
    """Per-engine speed multipliers: the scenario's first, then 1.0 for the rest."""
    factors = list(scenario.speed_factors or ()) if scenario is not None else []
    return (factors + [1.0] * engines)[:engines]


def build_workload(name: str, *, duration_s: float, seed: int = 0) -> list[TraceRequest]:
    """Generate scenario ``name`` (see ``SCENARIOS``)."""
    try:
        scenario = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; choose from {', '.join(SCENARIOS)}") from None
    return scenario.build(duration_s=duration_s, seed=seed)
