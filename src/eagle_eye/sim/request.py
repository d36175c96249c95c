"""A request as the simulated engine tracks it (pure data, simulated seconds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class RequestStatus(str, Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class FinishReason(str, Enum):
    """vLLM's finish reasons, as ``vllm:request_success{finished_reason}`` spells them."""

    STOP = "stop"
    LENGTH = "length"
    ABORT = "abort"


@dataclass(slots=True, eq=False)
class SimRequest:
    """One generation request: what it asks for, and where the scheduler has got to.

    Build it with ``prompt_tokens`` and the prompt's ``block_hashes`` (see
    ``eagle_eye.sim.tokens``). ``eos_after`` is where the simulated model emits EOS;
    ``None`` means ``ignore_eos`` (trace replays generate exactly ``max_tokens``).
    """

    request_id: str
    prompt_tokens: int
    max_tokens: int
    block_hashes: list[int] = field(default_factory=list)
    arrival_s: float = 0.0
    eos_after: int | None = None
    text_key: int = 0
    """Seeds the generated text (``tokens.generated_text``)."""
    tag: object = None
    """Anything the caller wants back with the result (a trace row, a stream)."""
    trace: object = None
    """The trace context the request arrived with (an OpenTelemetry ``Context``) when
    the HTTP server traces; None when it does not. Never read by the scheduler."""

    # -- scheduler state -----------------------------------------------------------------
    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0
    output_tokens: int = 0
    hashed_blocks: list[int] = field(default_factory=list)
    """Hashes of the cached blocks this request holds a reference on (its prefix)."""
    anon_blocks: int = 0
    """Blocks it holds that carry no hash (partial block, generated tokens)."""
    num_cached_tokens: int = -1
    """Prompt tokens served from the prefix cache at first scheduling (-1 before)."""
    num_preemptions: int = 0
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    last_token_s: float | None = None
    finish_s: float | None = None
    finish_reason: FinishReason | None = None
    itl_sum_s: float = 0.0
    itl_count: int = 0
    itl_max_s: float = 0.0

    @property
    def num_tokens(self) -> int:
        """Prompt plus tokens generated so far (what a recompute must rebuild)."""
        return self.prompt_tokens + self.output_tokens

    @property
    def stop_at(self) -> int:
        """Output length at which the request finishes."""
        if self.eos_after is not None and self.eos_after < self.max_tokens:
            return self.eos_after
        return self.max_tokens

    @property
    def held_blocks(self) -> int:
        return len(self.hashed_blocks) + self.anon_blocks

    def add_itl(self, total_s: float, count: int, max_gap_s: float) -> None:
        """Account ``count`` inter-token gaps summing to ``total_s``, the longest ``max_gap_s``."""
        self.itl_sum_s += total_s
        self.itl_count += count
        if max_gap_s > self.itl_max_s:
            self.itl_max_s = max_gap_s

    # -- results (simulated seconds) -----------------------------------------------------

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def queued_s(self) -> float | None:
        if self.first_scheduled_s is None:
            return None
        return self.first_scheduled_s - self.arrival_s

    @property
    def mean_itl_s(self) -> float | None:
        """Mean inter-token latency (TPOT); None with fewer than two tokens."""
        return self.itl_sum_s / self.itl_count if self.itl_count else None
