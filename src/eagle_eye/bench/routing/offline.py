"""Offline routing runs: the router's own dispatch core against the simulator in virtual time.

No HTTP and no NATS, but nothing about routing is mocked either: requests become
``RequestFeatures`` exactly as the gateway builds them (prompt text hashed in 128-char
blocks), and the router's ``Dispatcher`` (``route/dispatch.py``) picks, accounts and
feeds the prefix index exactly as it does behind the gateway, from the ``Target``s of a
real ``FleetView``. That view is fed ``Snapshot``s built from each engine's state after
its steps, delayed by ``snapshot_delay_s`` (default 2 ms: the publish-to-visible latency
``bench freshness`` measures, rounded up). A request's prefill estimate is released at
its first token, as the gateway does when the first byte of a stream arrives. The
simulator is ``eagle_eye.sim.offline.OfflineFleet``.

An hour of the Mooncake trace on 8 engines replays in well under a minute, which is what
makes parameter sweeps (``PolicyConfig``) practical.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

from eagle_eye.bench.routing.metrics import LoadSample, RequestResult
from eagle_eye.bench.routing.trace import TraceRequest, prompt_text_head
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.dispatch import Attempt, Dispatcher
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.policies import PolicyConfig, make_policies
from eagle_eye.route.prefix import DEFAULT_MAX_BLOCKS, PrefixIndex, block_hashes
from eagle_eye.sim.cost_model import DEFAULT_PROFILE
from eagle_eye.sim.offline import CompletedRequest, EngineView, OfflineFleet, OfflineRequest
from eagle_eye.snapshot import Part, Snapshot, field_names

MODEL: Final = "sim"
_VIEW_FIELDS: Final = tuple(
    name for name in field_names(Part.SAMPLE) if name in {f.name for f in fields(EngineView)}
)
"""Snapshot fields an engine view carries under the same name."""


@dataclass(frozen=True, slots=True)
class OfflineRun:
    """What one offline row measured."""

    router: str
    policy: str
    results: list[RequestResult]
    samples: list[LoadSample]


def _itls(mean_itl_s: float | None, max_itl_s: float, tokens: int) -> list[float]:
    """Per-token gaps reconstructed from the simulator's mean and max (it keeps no list).

    One gap at the max, the rest at the value that keeps the mean exact; enough for a p99
    over thousands of requests (every request contributes its worst gap).
    """
    gaps = tokens - 1
    if gaps <= 0 or mean_itl_s is None:
        return []
    if gaps == 1:
        return [max_itl_s]
    rest = max(0.0, (mean_itl_s * gaps - max_itl_s) / (gaps - 1))
    return [max_itl_s] + [rest] * (gaps - 1)


class _Replay:
    """One offline run: the simulated fleet, the router's view of it, and the bookkeeping
    that ties requests to their attempts."""

    def __init__(
        self,
        sim: OfflineFleet,
        dispatcher: Dispatcher,
        *,
        sample_every_s: float,
        block_chars: int,
    ) -> None:
        self.sim = sim
        self.dispatcher = dispatcher
        self.view = dispatcher.fleet
        self.urls = [f"http://engine-{i}" for i in range(sim.engines)]
        self.by_url = {u: i for i, u in enumerate(self.urls)}
        self.seqs = [0] * sim.engines
        self.last_view_time_s = [-1.0] * sim.engines
        self.capacity = sim.profile.kv_capacity_tokens
        self.head_chars = block_chars * DEFAULT_MAX_BLOCKS
        self.block_chars = block_chars
        self.sample_every_s = sample_every_s
        self.next_sample_s = 0.0
        self.results: dict[int, RequestResult] = {}
        self.samples: list[LoadSample] = []
        self.inflight: dict[int, Attempt] = {}
        self.awaiting_first: dict[int, Attempt] = {}
        """Requests whose prefill estimate is not released yet."""

    def publish(self, now_s: float) -> None:
        """Every engine whose state changed since its last snapshot sends a new one."""
        for v in self.sim.views():
            i = v.index
            if v.time_s <= self.last_view_time_s[i] and self.seqs[i] > 0:
                continue
            self.last_view_time_s[i] = v.time_s
            self.seqs[i] += 1
            values = {name: getattr(v, name) for name in _VIEW_FIELDS}
            values["kv_usage"] = min(1.0, max(0.0, v.kv_usage))
            snapshot = Snapshot(
                instance_id=f"engine-{i}",
                model=MODEL,
                engine="sim",
                seq=self.seqs[i],
                timestamp_s=v.time_s,
                endpoint=self.urls[i],
                kv_capacity_tokens=self.capacity,
                **values,
            )
            self.view.apply(snapshot, now_s)

    def submit(self, k: int, request: TraceRequest, policy: Any) -> None:
        """Route request ``k`` through the dispatch core and hand it to its engine."""
        text = prompt_text_head(request, self.head_chars)
        features = RequestFeatures(
            model=MODEL,
            prompt_tokens=request.input_tokens,
            max_tokens=request.output_tokens,
            prefix_hashes=block_hashes(text, self.block_chars),
            session_key=request.session,
            now_mono_s=self.sim.now_s,
        )
        attempt = self.dispatcher.dispatch(features, policy)
        assert attempt is not None  # one model, and the fleet never leaves
        self.inflight[k] = self.awaiting_first[k] = attempt
        url = attempt.target.url
        self.results[k] = RequestResult(index=k, arrival_s=request.arrival_s, engine=url)
        self.sim.submit(
            OfflineRequest(
                request_id=str(k),
                arrival_s=request.arrival_s,
                prompt_tokens=request.input_tokens,
                max_tokens=request.output_tokens,
                hash_ids=request.hash_ids,
            ),
            self.by_url[url],
        )

    def first_tokens(self) -> None:
        """Release the prefill estimate of every request whose first token is out."""
        if not self.awaiting_first:
            return
        for i in range(self.sim.engines):
            for req in self.sim.core(i).running:
                if req.first_token_s is not None:
                    attempt = self.awaiting_first.pop(int(req.request_id), None)
                    if attempt is not None:
                        self.dispatcher.first_token(attempt)

    def finish(self, done: Sequence[CompletedRequest]) -> None:
        self.first_tokens()
        for c in done:
            k = int(c.request_id)
            attempt = self.awaiting_first.pop(k, None)
            if attempt is not None:
                self.dispatcher.first_token(attempt)
            self.dispatcher.finished(self.inflight.pop(k))
            r = self.results[k]
            r.ttft_s = c.ttft_s
            r.e2e_s = c.e2e_s
            r.output_tokens = c.output_tokens
            r.itls_s.extend(_itls(c.mean_itl_s, c.max_itl_s, c.output_tokens))

    def sample_until(self, t_s: float) -> None:
        """Record every engine's load at each grid point up to ``t_s``."""
        while self.next_sample_s <= t_s:
            for v in self.sim.views():
                self.samples.append(
                    LoadSample(
                        t_s=self.next_sample_s,
                        engine=self.urls[v.index],
                        running=v.running,
                        waiting=v.waiting,
                        prefix_queries_total=v.prefix_cache_queries_total,
                        prefix_hits_total=v.prefix_cache_hits_total,
                    )
                )
            self.next_sample_s += self.sample_every_s

    def advance_to(self, t_s: float) -> None:
        """Step the engines to ``t_s``, sampling load on the grid on the way."""
        sim = self.sim
        if t_s > sim.now_s:
            while self.next_sample_s <= t_s:
                self.finish(sim.advance_to(max(sim.now_s, self.next_sample_s)))
                self.sample_until(sim.now_s)
            self.finish(sim.advance_to(t_s))

    def drain(self, last_arrival_s: float) -> None:
        """Run until every request finished, still sampling load on the grid."""
        sim = self.sim
        while any(r.e2e_s is None for r in self.results.values()):
            before = sim.now_s
            self.finish(sim.advance_to(max(sim.now_s, self.next_sample_s)))
            self.sample_until(sim.now_s)
            if sim.now_s == before and self.next_sample_s <= before:  # pragma: no cover
                break
            if sim.now_s > last_arrival_s + 36_000:
                break
        self.finish(sim.drain())


def run_offline(
    policy_name: str,
    requests: Sequence[TraceRequest],
    *,
    engines: int,
    speed_factors: Sequence[float],
    profile: str | None = None,
    policy_config: PolicyConfig | None = None,
    profiles: Mapping[str, Mapping[str, Any]] | None = None,
    snapshot_delay_s: float = 0.002,
    sample_every_s: float = 1.0,
    seed: int = 0,
) -> OfflineRun:
    """Replay ``requests`` through policy ``policy_name`` (a built-in one or one of
    ``profiles``, as the router takes them from configuration) on an ``OfflineFleet``."""
    config = policy_config if policy_config is not None else PolicyConfig()
    index = PrefixIndex()
    policy = make_policies(config, index, profiles)[policy_name]
    sim = OfflineFleet(
        engines=engines,
        profile=profile or DEFAULT_PROFILE,
        speed_factors=list(speed_factors),
        seed=seed,
        metrics_staleness_s=snapshot_delay_s,
    )
    dispatcher = Dispatcher(
        FleetView(stale_after_s=config.stale_after_s),
        index,
        block_chars=config.block_chars,
        rng=random.Random(seed),
        clock=lambda: sim.now_s,
    )
    replay = _Replay(sim, dispatcher, sample_every_s=sample_every_s, block_chars=config.block_chars)
    replay.publish(0.0)
    for k, request in enumerate(requests):
        replay.advance_to(request.arrival_s)
        replay.publish(sim.now_s)
        replay.submit(k, request, policy)
    replay.drain(requests[-1].arrival_s if requests else 0.0)
    return OfflineRun(
        router="eagle-eye",
        policy=policy_name,
        results=[replay.results[k] for k in sorted(replay.results)],
        samples=replay.samples,
    )
