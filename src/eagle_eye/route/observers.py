"""What happens to a request, fanned out to observers (metrics, dashboard, tracing, ...).

The dispatch core reports each event once, to a list of ``DispatchObserver``s, the way
vLLM fans its per-step stats out to its stat loggers: Prometheus (``RouterMetrics``), the
live dashboard's statistics (``StatsObserver``) and, later, traces and model-behaviour
detectors are all observers; none of them is called from the HTTP code directly. Every
hook does nothing by default, so an observer implements only what it needs. Hooks run on
the event loop that serves requests: they must be fast and must not raise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eagle_eye.fleet.stats import RouterStatsRecorder

if TYPE_CHECKING:
    from eagle_eye.route.dispatch import Attempt


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """A finished request as the client saw it (times on the router's monotonic clock)."""

    model: str
    operation: str
    """``chat``, ``completion`` or ``generate``."""
    instance: str
    """Endpoint URL of the engine that answered."""
    status: int
    error_type: str | None
    """None on success; the HTTP status or a kind such as ``upstream_died``."""
    duration_s: float
    ttft_s: float | None
    """Time to the first byte of a stream; None when not streamed."""
    tpot_s: float | None
    """Time per output token after the first; None unless more than one token streamed."""
    input_tokens: int | None
    output_tokens: int | None
    """From the engine's ``usage`` report, when it sent one."""


class DispatchObserver:
    """Base class of observers: every hook is a no-op."""

    def on_request(self) -> None:
        """A client request arrived (before validation)."""

    def on_api_error(self, kind: str) -> None:
        """The router answered the client with an error of ``kind`` (its code or type)."""

    def on_rejected(self, reason: str) -> None:
        """The router refused a request itself (no instance, a limit, bad auth, ...)."""

    def on_dispatched(self, attempt: Attempt) -> None:
        """``attempt.target`` was chosen and the request counted against it."""

    def on_retry(self, attempt: Attempt) -> None:
        """The request is being tried again (``attempt`` is the new try)."""

    def on_upstream_error(self, attempt: Attempt, kind: str) -> None:
        """The engine failed: ``connect``, ``status_5xx`` or ``midstream``."""

    def on_first_token(self, attempt: Attempt) -> None:
        """The first byte of the engine's answer arrived (prefill is done)."""

    def on_complete(self, attempt: Attempt, outcome: Outcome) -> None:
        """The client got its whole answer (or an error mid-stream)."""


class StatsObserver(DispatchObserver):
    """Feeds the dashboard's cumulative counters and latency histograms."""

    def __init__(self, recorder: RouterStatsRecorder) -> None:
        self.recorder = recorder

    def on_request(self) -> None:
        self.recorder.observe_request()

    def on_api_error(self, kind: str) -> None:
        self.recorder.observe_error(kind)

    def on_retry(self, attempt: Attempt) -> None:
        self.recorder.observe_retry()

    def on_upstream_error(self, attempt: Attempt, kind: str) -> None:
        self.recorder.observe_error(f"upstream_{kind}")

    def on_complete(self, attempt: Attempt, outcome: Outcome) -> None:
        r = self.recorder
        r.observe_duration(outcome.duration_s)
        if outcome.ttft_s is not None:
            r.observe_ttft(outcome.ttft_s)
        if outcome.tpot_s is not None:
            r.observe_tpot(outcome.tpot_s)
