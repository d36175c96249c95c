"""The engine model in virtual time: a whole fleet in-process, no HTTP, no sleeping.

A benchmark drives it with a routing policy; the simulated clock jumps from event to
event, and runs of identical decode steps are computed in one go, so an hour of the
Mooncake conversation trace on 8 engines replays in seconds. Times are simulated seconds.

The simplest use is ``run``::

    fleet = OfflineFleet(engines=8, profile="llama3.1-8b-h100", seed=0)
    requests = [OfflineRequest.from_trace_row(row, i) for i, row in enumerate(rows)]
    done = fleet.run(requests, policy=lambda req, views, fleet: min(
        range(len(views)), key=lambda i: views[i].running + views[i].waiting))

``policy(request, views, fleet) -> engine index`` sees one ``EngineView`` per engine, as
old as ``metrics_staleness_s`` says (0 = the state after each engine's last completed
step, which is what a per-step NATS snapshot gives a router). A policy that wants the
prompt's KV block hashes (for a prefix index) calls ``fleet.block_hashes(request)``;
``fleet.cached_prefix_tokens(i, request)`` is an oracle of what engine ``i`` holds.

For finer control, call the steps ``run`` is made of yourself::

    done += fleet.advance_to(request.arrival_s)   # engines step up to that instant
    fleet.submit(request, engine_index)           # arrives at fleet.now_s
    done += fleet.drain()                         # run until every request finished
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle_eye.sim.cost_model import DEFAULT_PROFILE, CostProfile, get_profile
from eagle_eye.sim.engine import EngineCore
from eagle_eye.sim.fast_forward import extend_decode
from eagle_eye.sim.request import SimRequest
from eagle_eye.sim.step import StepPlan
from eagle_eye.sim.tokens import (
    eos_position,
    prompt_key,
    text_block_hashes,
    text_key,
    text_token_count,
    trace_block_hashes,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineRequest:
    """A request to replay. Give ``hash_ids`` (trace), ``text``, or neither (no sharing)."""

    request_id: str
    arrival_s: float
    prompt_tokens: int
    max_tokens: int
    hash_ids: tuple[int, ...] | None = None
    """Mooncake-style ids of 512-token prompt blocks (shared ids = shared prefix)."""
    text: str | None = None
    """A text prompt; overrides ``prompt_tokens`` with its simulated token count."""
    ignore_eos: bool = True
    """True: generate exactly ``max_tokens`` (trace replay). False: stop at a drawn EOS."""
    tag: Any = None

    @classmethod
    def from_trace_row(cls, row: Mapping[str, Any], index: int) -> OfflineRequest:
        """One line of ``mooncake_conversation.jsonl`` (timestamp in ms)."""
        return cls(
            request_id=f"trace-{index}",
            arrival_s=float(row["timestamp"]) / 1000.0,
            prompt_tokens=int(row["input_length"]),
            max_tokens=max(1, int(row["output_length"])),
            hash_ids=tuple(row.get("hash_ids") or ()),
        )


@dataclass(frozen=True, slots=True)
class EngineView:
    """What a routing policy may read about one engine (as of ``time_s``)."""

    index: int
    time_s: float
    running: int
    waiting: int
    kv_usage: float
    kv_capacity_tokens: int
    free_blocks: int
    prefix_cache_queries_total: int
    prefix_cache_hits_total: int
    preemptions_total: int
    generation_tokens_total: int
    prompt_tokens_total: int
    steps: int
    speed_factor: float


@dataclass(frozen=True, slots=True)
class CompletedRequest:
    """A finished request and its latencies in simulated seconds."""

    request_id: str
    engine_index: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    ttft_s: float
    e2e_s: float
    queued_s: float
    mean_itl_s: float | None
    max_itl_s: float
    finish_reason: str
    preemptions: int
    tag: Any = None


@dataclass(slots=True)
class _Engine:
    index: int
    core: EngineCore
    inflight: StepPlan | None = None
    history: deque[EngineView] = field(default_factory=deque)


Policy = Callable[[OfflineRequest, Sequence[EngineView], "OfflineFleet"], int]


class OfflineFleet:
    """``engines`` simulated engines sharing one virtual clock."""

    def __init__(
        self,
        engines: int = 8,
        profile: str | CostProfile = DEFAULT_PROFILE,
        speed_factors: Sequence[float] | None = None,
        seed: int = 0,
        *,
        metrics_staleness_s: float = 0.0,
        enable_prefix_caching: bool = True,
    ) -> None:
        if engines <= 0:
            raise ValueError("engines must be positive")
        factors = list(speed_factors) if speed_factors is not None else [1.0] * engines
        if len(factors) != engines:
            raise ValueError(f"{len(factors)} speed factors for {engines} engines")
        self.profile = get_profile(profile) if isinstance(profile, str) else profile
        self.seed = seed
        self.metrics_staleness_s = metrics_staleness_s
        self.now_s = 0.0
        self._engines = [
            _Engine(
                i,
                EngineCore(
                    self.profile,
                    speed_factor=f,
                    enable_prefix_caching=enable_prefix_caching,
                    collect_stats=False,
                ),
            )
            for i, f in enumerate(factors)
        ]
        self._hash_memo: dict[str, list[int]] = {}

    @property
    def engines(self) -> int:
        return len(self._engines)

    # -- driving -------------------------------------------------------------------------

    def advance_to(self, t_s: float) -> list[CompletedRequest]:
        """Run every engine's steps that end by ``t_s``; return requests finished meanwhile."""
        if t_s < self.now_s:
            raise ValueError(f"time runs forward: {t_s} < {self.now_s}")
        done: list[CompletedRequest] = []
        for engine in self._engines:
            self._advance(engine, t_s, done)
        if not math.isinf(t_s):
            self.now_s = t_s
        return done

    def submit(self, request: OfflineRequest, engine_index: int) -> None:
        """Hand ``request`` to an engine at ``max(request.arrival_s, now_s)``."""
        engine = self._engines[engine_index]
        arrival = max(request.arrival_s, self.now_s)
        hashes = self.block_hashes(request)
        prompt_tokens = (
            text_token_count(request.text) if request.text is not None else request.prompt_tokens
        )
        key = (
            text_key(request.text, self.seed)
            if request.text is not None
            else prompt_key(hashes, prompt_tokens, self.seed)
        )
        eos = None if request.ignore_eos else eos_position(key, self.profile.mean_output_tokens)
        core = engine.core
        max_tokens = min(request.max_tokens, max(1, core.max_model_len - prompt_tokens))
        sim = SimRequest(
            request_id=request.request_id,
            prompt_tokens=min(prompt_tokens, core.max_model_len - 1),
            max_tokens=max_tokens,
            block_hashes=hashes,
            arrival_s=arrival,
            eos_after=eos,
            text_key=key,
            tag=request,
        )
        if core.now_s < arrival and engine.inflight is None:
            core.now_s = arrival
        core.add_request(sim)

    def drain(self) -> list[CompletedRequest]:
        """Run until every submitted request has finished."""
        done: list[CompletedRequest] = []
        for engine in self._engines:
            self._advance(engine, math.inf, done)
        self.now_s = max([self.now_s, *(e.core.now_s for e in self._engines)])
        return done

    def run(self, requests: Iterable[OfflineRequest], policy: Policy) -> list[CompletedRequest]:
        """Replay ``requests`` in arrival order, routing each with ``policy``; then drain."""
        done: list[CompletedRequest] = []
        for request in sorted(requests, key=lambda r: r.arrival_s):
            done += self.advance_to(max(self.now_s, request.arrival_s))
            index = policy(request, self.views(), self)
            self.submit(request, index)
        done += self.drain()
        return done

    # -- what policies read ----------------------------------------------------------------

    def views(self) -> list[EngineView]:
        """One view per engine, ``metrics_staleness_s`` old (or fresh when 0)."""
        if self.metrics_staleness_s <= 0:
            return [self._view(e, self.now_s) for e in self._engines]
        cutoff = self.now_s - self.metrics_staleness_s
        out = []
        for engine in self._engines:
            history = engine.history
            while len(history) > 1 and history[1].time_s <= cutoff:
                history.popleft()
            if history and history[0].time_s <= cutoff:
                out.append(history[0])
            else:
                out.append(self._empty_view(engine))
        return out

    def block_hashes(self, request: OfflineRequest) -> list[int]:
        """The KV block hashes of ``request``'s prompt (memoised per request id)."""
        memo = self._hash_memo.get(request.request_id)
        if memo is not None:
            return memo
        bs = self.profile.block_size
        if request.text is not None:
            hashes = text_block_hashes(request.text, bs)
        elif request.hash_ids:
            hashes = trace_block_hashes(request.hash_ids, request.prompt_tokens, bs)
        else:
            hashes = []
        if len(self._hash_memo) > 4096:
            self._hash_memo.clear()
        self._hash_memo[request.request_id] = hashes
        return hashes

    def cached_prefix_tokens(self, engine_index: int, request: OfflineRequest) -> int:
        """Oracle: prompt tokens engine ``engine_index`` has cached for ``request`` now."""
        return self._engines[engine_index].core.cached_prefix_tokens(self.block_hashes(request))

    def core(self, engine_index: int) -> EngineCore:
        """The engine model itself (tests read its invariants)."""
        return self._engines[engine_index].core

    # -- internals -----------------------------------------------------------------------

    def _advance(self, engine: _Engine, t_s: float, done: list[CompletedRequest]) -> None:
        core = engine.core
        record = self.metrics_staleness_s > 0
        while True:
            plan = engine.inflight
            if plan is None:
                if not core.has_work:
                    if core.now_s < t_s and not math.isinf(t_s):
                        core.now_s = t_s
                    return
                plan = core.plan_step(core.now_s)
                if plan is None:  # cannot happen with requests checked against capacity
                    raise RuntimeError(f"engine {engine.index} has work but cannot schedule it")
                plan = extend_decode(core, plan, t_s)
                engine.inflight = plan
            if plan.end_s > t_s:
                return
            engine.inflight = None
            result = core.complete(plan)
            for req in result.finished:
                done.append(_completed(engine.index, req))
            if record:
                engine.history.append(self._view(engine, core.now_s))

    def _view(self, engine: _Engine, time_s: float) -> EngineView:
        core = engine.core
        c = core.counters
        return EngineView(
            index=engine.index,
            time_s=time_s,
            running=len(core.running),
            waiting=len(core.waiting),
            kv_usage=core.kv.usage,
            kv_capacity_tokens=core.profile.kv_capacity_tokens,
            free_blocks=core.kv.free_blocks,
            prefix_cache_queries_total=c.prefix_queries,
            prefix_cache_hits_total=c.prefix_hits,
            preemptions_total=c.preemptions,
            generation_tokens_total=c.generation_tokens,
            prompt_tokens_total=c.prompt_tokens,
            steps=c.steps,
            speed_factor=core.speed_factor,
        )

    def _empty_view(self, engine: _Engine) -> EngineView:
        core = engine.core
        return EngineView(
            index=engine.index,
            time_s=0.0,
            running=0,
            waiting=0,
            kv_usage=0.0,
            kv_capacity_tokens=core.profile.kv_capacity_tokens,
            free_blocks=core.kv.num_blocks,
            prefix_cache_queries_total=0,
            prefix_cache_hits_total=0,
            preemptions_total=0,
            generation_tokens_total=0,
            prompt_tokens_total=0,
            steps=0,
            speed_factor=core.speed_factor,
        )


def _completed(index: int, req: SimRequest) -> CompletedRequest:
    assert req.finish_s is not None and req.first_token_s is not None
    return CompletedRequest(
        request_id=req.request_id,
        engine_index=index,
        arrival_s=req.arrival_s,
        prompt_tokens=req.prompt_tokens,
        output_tokens=req.output_tokens,
        cached_tokens=max(0, req.num_cached_tokens),
        ttft_s=req.first_token_s - req.arrival_s,
        e2e_s=req.finish_s - req.arrival_s,
        queued_s=(req.first_scheduled_s or req.arrival_s) - req.arrival_s,
        mean_itl_s=req.mean_itl_s,
        max_itl_s=req.itl_max_s,
        finish_reason=req.finish_reason.value if req.finish_reason else "abort",
        preemptions=req.num_preemptions,
        tag=req.tag,
    )
