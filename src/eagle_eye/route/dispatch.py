"""The dispatch core: decide, account, record. One instance per router; pure.

Every request the router sends, live (``proxy.py``) or in the offline benchmark's
virtual time (``bench/routing/offline.py``), goes through the same steps here, so a
benchmark measures the router we ship:

1. ``dispatch``: the candidates (the fleet view's ready, healthy instances of the model,
   minus those at their concurrency limit and those this request already tried), the
   policy's pick, the prompt's prefix overlap with what that engine was sent before
   (its prefill estimate), the accounting (``FleetView.on_sent``), then the prefix index
   learns the prompt. Returns an ``Attempt``.
2. ``first_token``: prefill is done; the engine's pending-prefill estimate is released.
3. ``succeeded`` / ``failed``: passive health.
4. ``finished``: the attempt is over (any outcome); the accounting is undone.
5. ``complete``: the client's request is over; its ``Outcome`` goes to the observers.

Each step also tells the ``observers`` (``observers.py``). Nothing here does I/O; the
clock is injected so the offline benchmark can run it in virtual time. A request whose
``RequestContext.detail`` is set (a sampled trace) also gets its pick explained
(``Attempt.decision``: the score terms of the candidates, computed before the
accounting moves them).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Sequence

from eagle_eye.fleet.target import Target
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.observers import DispatchObserver, Outcome, RequestContext
from eagle_eye.route.policies import Policy, new_prefill_tokens
from eagle_eye.route.policies.explain import Decision, explain_pick
from eagle_eye.route.policies.filters import not_tried_under_limit
from eagle_eye.route.prefix import PrefixIndex
from eagle_eye.route.requests import ApiError


class Attempt:
    """One try of one request on one target."""

    __slots__ = (
        "context",
        "decision",
        "matched_blocks",
        "number",
        "policy",
        "prefill_tokens",
        "request",
        "target",
    )

    def __init__(
        self,
        *,
        request: RequestFeatures,
        target: Target,
        policy: str,
        number: int,
        matched_blocks: int,
        prefill_tokens: float,
        context: RequestContext | None = None,
        decision: Decision | None = None,
    ) -> None:
        self.request = request
        self.target = target
        self.policy = policy
        self.number = number
        """0 for the first try, 1 for the first retry, ..."""
        self.matched_blocks = matched_blocks
        """Leading prompt blocks the router believes the target holds."""
        self.prefill_tokens = prefill_tokens
        """Estimated prompt tokens the target must compute; 0 once released."""
        self.context = context
        """The client request this attempt serves; None offline (no client)."""
        self.decision = decision
        """Why the policy chose ``target``; only when ``context.detail`` asked for it."""


class Dispatcher:
    """Chooses targets for requests and keeps the fleet view's accounting right."""

    def __init__(
        self,
        fleet: FleetView,
        index: PrefixIndex,
        *,
        block_chars: int,
        rng: random.Random,
        observers: Sequence[DispatchObserver] = (),
        max_inflight_per_instance: int | None = None,
        max_inflight_total: int | None = None,
        retry_after_s: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fleet = fleet
        self.index = index
        self.block_chars = block_chars
        self.rng = rng
        self.observers = list(observers)
        self.max_inflight_per_instance = max_inflight_per_instance
        self.max_inflight_total = max_inflight_total
        self.retry_after_s = retry_after_s
        self.clock = clock
        self.inflight_total = 0
        """Attempts dispatched and not finished, across every target."""

    # -- admission ---------------------------------------------------------------------

    def admit(self) -> None:
        """Raise a 429 when the router is at its own concurrency limit."""
        limit = self.max_inflight_total
        if limit is not None and self.inflight_total >= limit:
            self.reject("fleet_limit")
            raise self._too_many("The router is at its concurrency limit; retry shortly.")

    def reject(self, reason: str) -> None:
        """Count a request the router refused itself."""
        for o in self.observers:
            o.on_rejected(reason)

    def _too_many(self, message: str) -> ApiError:
        return ApiError(
            429,
            message,
            type="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(self.retry_after_s)},
        )

    def candidates(self, model: str, tried: Collection[str] = ()) -> list[Target]:
        """Targets that may take this request now; raises the client's error when the
        fleet cannot serve the model at all. Empty only when retries ran out of targets."""
        found = self.fleet.candidates(model, self.clock())
        if not found:
            if self.fleet.knows_model(model) or not self.fleet.targets():
                # Known but not ready, or no engine discovered yet (a router that just
                # started, or NATS down from the start): transient, so 503, not 404.
                self.reject("no_instance")
                raise ApiError(
                    503,
                    f"No instance of model '{model}' is ready (all loading, draining, "
                    "or failing); retry shortly.",
                    type="service_unavailable",
                    code="no_instance_available",
                    headers={"Retry-After": str(self.retry_after_s)},
                )
            self.reject("unknown_model")
            raise ApiError(
                404,
                f"The model '{model}' does not exist in this fleet.",
                type="not_found_error",
                code="model_not_found",
                param="model",
            )
        limit = self.max_inflight_per_instance
        if not tried and limit is None:
            return found
        kept = not_tried_under_limit(found, tried, limit)
        if not kept and not tried:
            self.reject("instance_limit")
            raise self._too_many(
                f"Every instance of '{model}' is at its concurrency limit; retry shortly."
            )
        return kept

    # -- the request's life ------------------------------------------------------------

    def dispatch(
        self,
        request: RequestFeatures,
        policy: Policy,
        *,
        tried: Collection[str] = (),
        number: int = 0,
        context: RequestContext | None = None,
    ) -> Attempt | None:
        """Pick a target and count the request there; None if no untried target is left."""
        candidates = self.candidates(request.model, tried)
        if not candidates:
            return None
        target = policy.pick(request, candidates, self.rng)
        decision = None
        if context is not None and context.detail:
            decision = explain_pick(policy, request, candidates, target)
        hashes = request.prefix_hashes
        matched = 0
        if hashes:
            # Overlap with what this target was sent before, then remember this prompt.
            matched = self.index.match(hashes, (target.url,)).get(target.url, 0)
            self.index.insert(hashes, target.url)
        attempt = Attempt(
            request=request,
            target=target,
            policy=policy.name,
            number=number,
            matched_blocks=matched,
            prefill_tokens=new_prefill_tokens(request, matched, self.block_chars),
            context=context,
            decision=decision,
        )
        self.fleet.on_sent(target, attempt.prefill_tokens)
        self.inflight_total += 1
        for o in self.observers:
            if number:
                o.on_retry(attempt)
            o.on_dispatched(attempt)
        return attempt

    def first_token(self, attempt: Attempt) -> None:
        """The target produced its first byte: its prefill backlog shrinks."""
        if attempt.prefill_tokens:
            self.fleet.on_first_token(attempt.target, attempt.prefill_tokens)
            attempt.prefill_tokens = 0.0
        for o in self.observers:
            o.on_first_token(attempt)

    def succeeded(self, attempt: Attempt) -> None:
        """The engine answered (any status below 500): heal passive health."""
        self.fleet.on_success(attempt.target)

    def failed(self, attempt: Attempt, kind: str) -> None:
        """The engine failed (``connect``, ``status_5xx``, ``midstream``)."""
        self.fleet.on_failure(attempt.target, self.clock())
        for o in self.observers:
            o.on_upstream_error(attempt, kind)

    def finished(self, attempt: Attempt) -> None:
        """The attempt is over, whatever its outcome; call exactly once."""
        self.inflight_total -= 1
        if attempt.prefill_tokens:  # ended before any token (an error, or not streamed)
            self.fleet.on_first_token(attempt.target, attempt.prefill_tokens)
            attempt.prefill_tokens = 0.0
        self.fleet.on_finished(attempt.target)

    def complete(self, attempt: Attempt, outcome: Outcome) -> None:
        """The client's request is over: tell every observer."""
        for o in self.observers:
            o.on_complete(attempt, outcome)
