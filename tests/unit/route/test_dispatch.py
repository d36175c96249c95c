"""The dispatch core: one place that picks, accounts, feeds the prefix index and reports."""

from __future__ import annotations

import random

import pytest

from eagle_eye.fleet.target import Health
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.dispatch import Attempt, Dispatcher
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.observers import DispatchObserver, Outcome
from eagle_eye.route.policies import PolicyConfig, make_policies
from eagle_eye.route.prefix import PrefixIndex, block_hashes
from eagle_eye.route.requests import ApiError
from eagle_eye.snapshot import EngineState, Snapshot

NOW = 50.0
PROMPT = "The same long system prompt for every request. " * 240
"""About 2,900 tokens: long enough that its prefill outweighs one queued request."""


class Recorder(DispatchObserver):
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def on_rejected(self, reason: str) -> None:
        self.events.append(("rejected", reason))

    def on_dispatched(self, attempt: Attempt) -> None:
        self.events.append(("dispatched", attempt.target.url))

    def on_retry(self, attempt: Attempt) -> None:
        self.events.append(("retry", attempt.number))

    def on_upstream_error(self, attempt: Attempt, kind: str) -> None:
        self.events.append(("upstream_error", kind))

    def on_first_token(self, attempt: Attempt) -> None:
        self.events.append(("first_token", attempt.target.url))

    def on_complete(self, attempt: Attempt, outcome: Outcome) -> None:
        self.events.append(("complete", outcome.status))


def _setup(
    engines: int = 2, **limits: int
) -> tuple[FleetView, PrefixIndex, Dispatcher, Recorder, dict[str, object]]:
    fleet = FleetView()
    for i in range(engines):
        snap = Snapshot(
            instance_id=f"e{i}",
            model="m",
            engine="sim",
            seq=1,
            timestamp_s=1.0,
            endpoint=f"http://e{i}",
        )
        fleet.apply(snap, NOW)
    index = PrefixIndex()
    recorder = Recorder()
    dispatcher = Dispatcher(
        fleet,
        index,
        block_chars=128,
        rng=random.Random(0),
        observers=[recorder],
        clock=lambda: NOW,
        **limits,  # type: ignore[arg-type]
    )
    return fleet, index, dispatcher, recorder, make_policies(PolicyConfig(), index)  # type: ignore[return-value]


def _request(prompt: str = PROMPT, model: str = "m") -> RequestFeatures:
    return RequestFeatures(
        model=model,
        prompt_tokens=len(prompt) // 4,
        prefix_hashes=block_hashes(prompt),
        now_mono_s=NOW,
    )


def test_a_dispatch_counts_the_request_learns_the_prefix_and_releases_it_at_first_token() -> None:
    _, index, dispatcher, recorder, policies = _setup()
    request = _request()
    first = dispatcher.dispatch(request, policies["cost"])  # type: ignore[arg-type]
    assert first is not None
    target = first.target
    assert first.matched_blocks == 0
    assert first.prefill_tokens == request.prompt_tokens
    assert (target.inflight, target.sent_since_snapshot) == (1, 1)
    assert target.pending_prefill_tokens == request.prompt_tokens
    assert index.match(request.prefix_hashes, [target.url]) == {
        target.url: len(request.prefix_hashes)
    }
    # The same prompt again: the cost policy follows the prefix, the estimate shrinks to
    # the partial tail block the index cannot vouch for.
    second = dispatcher.dispatch(request, policies["cost"])  # type: ignore[arg-type]
    assert second is not None and second.target is target
    assert second.matched_blocks == len(request.prefix_hashes)
    assert second.prefill_tokens == pytest.approx(
        request.prompt_tokens - len(request.prefix_hashes) * 32
    )
    dispatcher.first_token(first)
    assert first.prefill_tokens == 0.0
    assert target.pending_prefill_tokens == pytest.approx(second.prefill_tokens)
    dispatcher.finished(first)
    dispatcher.finished(second)  # never saw a first token: released on the way out
    assert (target.inflight, target.pending_prefill_tokens, dispatcher.inflight_total) == (0, 0, 0)
    assert recorder.events == [
        ("dispatched", target.url),
        ("dispatched", target.url),
        ("first_token", target.url),
    ]


def test_a_retry_skips_the_instances_already_tried_and_is_reported() -> None:
    _, _, dispatcher, recorder, policies = _setup()
    first = dispatcher.dispatch(_request(), policies["round_robin"])  # type: ignore[arg-type]
    assert first is not None
    dispatcher.failed(first, "connect")
    dispatcher.finished(first)
    tried = {first.target.url}
    retry = dispatcher.dispatch(_request(), policies["round_robin"], tried=tried, number=1)  # type: ignore[arg-type]
    assert retry is not None and retry.target.url not in tried
    dispatcher.finished(retry)
    tried.add(retry.target.url)
    assert dispatcher.dispatch(_request(), policies["cost"], tried=tried, number=2) is None  # type: ignore[arg-type]
    assert [e for e in recorder.events if e[0] != "dispatched"] == [
        ("upstream_error", "connect"),
        ("retry", 1),
    ]


def test_limits_and_unknown_models_are_client_errors_counted_by_reason() -> None:
    fleet, _, dispatcher, recorder, policies = _setup(
        engines=1, max_inflight_per_instance=1, max_inflight_total=5
    )
    held = dispatcher.dispatch(_request(), policies["cost"])  # type: ignore[arg-type]
    assert held is not None
    with pytest.raises(ApiError) as err:
        dispatcher.dispatch(_request(), policies["cost"])  # type: ignore[arg-type]
    assert (err.value.status, err.value.code) == (429, "rate_limit_exceeded")
    with pytest.raises(ApiError) as err:
        dispatcher.dispatch(_request(model="other"), policies["cost"])  # type: ignore[arg-type]
    assert (err.value.status, err.value.code) == (404, "model_not_found")
    fleet.apply(
        Snapshot(
            instance_id="e0",
            model="m",
            engine="sim",
            seq=2,
            timestamp_s=2.0,
            endpoint="http://e0",
            state=EngineState.DRAINING,
        ),
        NOW,
    )
    with pytest.raises(ApiError) as err:
        dispatcher.dispatch(_request(), policies["cost"])  # type: ignore[arg-type]
    assert (err.value.status, err.value.headers) == (503, {"Retry-After": "1"})
    dispatcher.finished(held)
    dispatcher.max_inflight_total = 0
    with pytest.raises(ApiError):
        dispatcher.admit()
    reasons = [reason for kind, reason in recorder.events if kind == "rejected"]
    assert reasons == ["instance_limit", "unknown_model", "no_instance", "fleet_limit"]


def test_repeated_failures_eject_a_target_through_passive_health() -> None:
    fleet, _, dispatcher, _, policies = _setup(engines=1)
    for _ in range(fleet.failures_to_eject):
        attempt = dispatcher.dispatch(_request(), policies["cost"])  # type: ignore[arg-type]
        assert attempt is not None
        dispatcher.failed(attempt, "status_5xx")
        dispatcher.finished(attempt)
    (target,) = fleet.targets()
    assert target.health is Health.EJECTED
