"""Offline routing runs: the router's own policy code against the simulator in virtual time.

No HTTP and no NATS, but nothing about routing is mocked either: requests become
``RequestFeatures`` exactly as the gateway builds them (prompt text hashed in 128-char
blocks), the policy picks from the ``Target``s of a real ``FleetView``, and that view is
fed ``Snapshot``s built from each engine's state after its steps, delayed by
``snapshot_delay_s`` (default 2 ms: the publish-to-visible latency ``bench freshness``
measures, rounded up). Between snapshots the view does its own accounting
(``on_sent``/``on_finished``), as the gateway does, and the prefix index learns every
dispatch. The simulator is ``eagle_eye.sim.offline.OfflineFleet``.

An hour of the Mooncake trace on 8 engines replays in well under a minute, which is what
makes parameter sweeps (``PolicyConfig``) practical.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eagle_eye.bench.routing.metrics import LoadSample, RequestResult
from eagle_eye.bench.routing.trace import TraceRequest, prompt_text_head

MODEL = "sim"


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


def run_offline(
    policy_name: str,
    requests: Sequence[TraceRequest],
    *,
    engines: int,
    speed_factors: Sequence[float],
    profile: str | None = None,
    policy_config: Any = None,
    snapshot_delay_s: float = 0.002,
    sample_every_s: float = 1.0,
    seed: int = 0,
    policy: Any = None,
) -> OfflineRun:
    """Replay ``requests`` through policy ``policy_name`` on an ``OfflineFleet``.

    ``policy`` overrides the named policy with any object that has the router's
    ``pick(features, candidates, rng)`` (for prototyping a policy before it is proposed
    for ``route/policies.py``); if it has ``bind_offline(fleet, urls)`` that is called
    first, and an ``index`` attribute is fed like the gateway feeds its prefix index.
    """
    from eagle_eye.fleet.view import FleetView
    from eagle_eye.route.features import RequestFeatures
    from eagle_eye.route.policies import PolicyConfig, make_policies
    from eagle_eye.route.prefix import CHARS_PER_TOKEN, DEFAULT_MAX_BLOCKS, block_hashes
    from eagle_eye.sim.cost_model import DEFAULT_PROFILE
    from eagle_eye.sim.offline import OfflineFleet, OfflineRequest
    from eagle_eye.snapshot import Snapshot

    config = policy_config if policy_config is not None else PolicyConfig()
    if policy is None:
        policy = make_policies(config)[policy_name]
    index = getattr(policy, "index", None)
    sim = OfflineFleet(
        engines=engines,
        profile=profile or DEFAULT_PROFILE,
        speed_factors=list(speed_factors),
        seed=seed,
        metrics_staleness_s=snapshot_delay_s,
    )
    view = FleetView(stale_after_s=config.stale_after_s)
    urls = [f"http://engine-{i}" for i in range(engines)]
    bind = getattr(policy, "bind_offline", None)
    if bind is not None:
        bind(sim, urls)
    by_url = {u: i for i, u in enumerate(urls)}
    seqs = [0] * engines
    last_view_time = [-1.0] * engines
    capacity = sim.profile.kv_capacity_tokens
    rng = random.Random(seed)
    head_chars = config.block_chars * DEFAULT_MAX_BLOCKS
    results: dict[int, RequestResult] = {}
    # Router-side prefill accounting, when the router has it (FleetView.on_first_token):
    # request -> (engine, estimated prefill tokens), released at its first token.
    on_first_token: Any = getattr(view, "on_first_token", None)
    on_sent: Any = view.on_sent
    prefill_accounting = on_first_token is not None
    awaiting_first: dict[int, tuple[int, float]] = {}
    samples: list[LoadSample] = []
    next_sample_s = 0.0

    def publish(now_s: float) -> None:
        for v in sim.views():
            i = v.index
            if v.time_s <= last_view_time[i] and seqs[i] > 0:
                continue
            last_view_time[i] = v.time_s
            seqs[i] += 1
            view.apply(
                Snapshot(
                    instance_id=f"engine-{i}",
                    model=MODEL,
                    engine="sim",
                    seq=seqs[i],
                    timestamp_s=v.time_s,
                    endpoint=urls[i],
                    running=v.running,
                    waiting=v.waiting,
                    kv_usage=min(1.0, max(0.0, v.kv_usage)),
                    kv_capacity_tokens=capacity,
                    prefix_cache_queries_total=v.prefix_cache_queries_total,
                    prefix_cache_hits_total=v.prefix_cache_hits_total,
                ),
                now_s,
            )

    def release(k: int) -> None:
        engine, tokens = awaiting_first.pop(k)
        target = view.target(urls[engine])
        if target is not None:
            on_first_token(target, tokens)

    def first_tokens() -> None:
        """Release the prefill estimate of every request whose first token is out (the
        gateway does it when the first byte of the stream arrives)."""
        if not awaiting_first:
            return
        for i in range(engines):
            for req in sim.core(i).running:
                if req.first_token_s is not None:
                    k = int(req.request_id)
                    if k in awaiting_first:
                        release(k)

    def finish(done: Sequence[Any]) -> None:
        first_tokens()
        for c in done:
            k = int(c.request_id)
            if k in awaiting_first:
                release(k)
            target = view.target(urls[c.engine_index])
            if target is not None:
                view.on_finished(target)
            r = results[k]
            r.ttft_s = c.ttft_s
            r.e2e_s = c.e2e_s
            r.output_tokens = c.output_tokens
            r.itls_s.extend(_itls(c.mean_itl_s, c.max_itl_s, c.output_tokens))

    def sample_until(t_s: float) -> None:
        nonlocal next_sample_s
        while next_sample_s <= t_s:
            for v in sim.views():
                samples.append(
                    LoadSample(
                        t_s=next_sample_s,
                        engine=urls[v.index],
                        running=v.running,
                        waiting=v.waiting,
                        prefix_queries_total=v.prefix_cache_queries_total,
                        prefix_hits_total=v.prefix_cache_hits_total,
                    )
                )
            next_sample_s += sample_every_s

    publish(0.0)
    for k, request in enumerate(requests):
        now = request.arrival_s
        if now > sim.now_s:
            # Sample on the grid on the way (load over time), then advance to the arrival.
            while next_sample_s <= now:
                finish(sim.advance_to(max(sim.now_s, next_sample_s)))
                sample_until(sim.now_s)
            finish(sim.advance_to(now))
        publish(sim.now_s)
        text = prompt_text_head(request, head_chars)
        features = RequestFeatures(
            model=MODEL,
            prompt_tokens=request.input_tokens,
            max_tokens=request.output_tokens,
            prefix_hashes=block_hashes(text, config.block_chars),
            session_key=request.session,
            now_mono_s=sim.now_s,
        )
        candidates = view.candidates(MODEL, sim.now_s)
        target = policy.pick(features, candidates, rng)
        if prefill_accounting:
            # As the gateway does: overlap with what this target was sent before, then send.
            matched = 0
            if index is not None and features.prefix_hashes:
                matched = index.match(features.prefix_hashes, (target.url,)).get(target.url, 0)
            tokens = max(0.0, request.input_tokens - matched * config.block_chars / CHARS_PER_TOKEN)
            on_sent(target, tokens)
            awaiting_first[k] = (by_url[target.url], tokens)
        else:
            view.on_sent(target)
        if index is not None:
            index.insert(features.prefix_hashes, target.url)
        results[k] = RequestResult(index=k, arrival_s=request.arrival_s, engine=target.url)
        sim.submit(
            OfflineRequest(
                request_id=str(k),
                arrival_s=request.arrival_s,
                prompt_tokens=request.input_tokens,
                max_tokens=request.output_tokens,
                hash_ids=request.hash_ids,
            ),
            by_url[target.url],
        )
    # Drain, still sampling load on the grid until the fleet is idle.
    while any(r.e2e_s is None for r in results.values()):
        before = sim.now_s
        finish(sim.advance_to(max(sim.now_s, next_sample_s)))
        sample_until(sim.now_s)
        if sim.now_s == before and next_sample_s <= before:  # pragma: no cover - safety
            break
        if sim.now_s > (requests[-1].arrival_s if requests else 0) + 36_000:
            break
    finish(sim.drain())
    return OfflineRun(
        router="eagle-eye",
        policy=policy_name,
        results=[results[k] for k in sorted(results)],
        samples=samples,
    )
