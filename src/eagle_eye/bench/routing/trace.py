"""Request traces in the Mooncake format: parse, cap, rescale, and turn into prompts.

A trace is a list of ``TraceRequest`` sorted by arrival. The Mooncake format (FAST'25
release, ``../shared/data/README.md``) is one JSON object per line::

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ...]}

``timestamp`` is the arrival in milliseconds, ``hash_ids`` name the prompt's 512-token
blocks; equal ids at the same position are a reusable shared prefix. The trace carries no
text, so ``prompt_text`` synthesises one deterministic 512-token chunk per hash id: every
router (ours reads tokens, the Rust peers read characters) then sees the same prefix
structure the trace recorded, and the simulator maps the same text to the same KV blocks.

Everything here is pure except ``load_trace`` (reads a file).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from eagle_eye.errors import EagleEyeError

MOONCAKE_BLOCK_TOKENS: Final = 512
"""Tokens per ``hash_ids`` block in the Mooncake traces."""


class TraceError(EagleEyeError, ValueError):
    """A trace line that is not a valid Mooncake record; ``line`` is 1-based."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"trace line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceRequest:
    """One request of a trace, in simulated seconds from the start of the trace."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]
    """Prefix block ids, ``MOONCAKE_BLOCK_TOKENS`` tokens each (the last may be partial)."""
    session: str | None = None
    """Conversation key for session-affine routing (synthetic multi-turn workloads)."""


def parse_record(obj: Any, line: int = 1) -> TraceRequest:
    """Validate one decoded Mooncake record."""
    if not isinstance(obj, dict):
        raise TraceError(line, "expected a JSON object")
    ts: Any = obj.get("timestamp")
    inp, out, ids = obj.get("input_length"), obj.get("output_length"), obj.get("hash_ids")
    if type(ts) not in (int, float) or not math.isfinite(ts) or ts < 0:
        raise TraceError(line, f"timestamp must be milliseconds >= 0, got {ts!r}")
    if type(inp) is not int or inp < 1:
        raise TraceError(line, f"input_length must be an integer >= 1, got {inp!r}")
    if type(out) is not int or out < 1:
        raise TraceError(line, f"output_length must be an integer >= 1, got {out!r}")
    if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
        raise TraceError(line, "hash_ids must be a list of integers >= 0")
    session = obj.get("session")
    return TraceRequest(
        arrival_s=float(ts) / 1000.0,
        input_tokens=inp,
        output_tokens=out,
        hash_ids=tuple(ids),
        session=session if isinstance(session, str) else None,
    )


def parse_lines(lines: Iterable[str], *, limit: int | None = None) -> list[TraceRequest]:
    """Parse JSONL text (blank lines skipped) into requests sorted by arrival."""
    requests: list[TraceRequest] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise TraceError(number, f"not JSON: {exc}") from exc
        requests.append(parse_record(obj, number))
        if limit is not None and len(requests) >= limit:
            break
    requests.sort(key=lambda r: r.arrival_s)
    return requests


def load_trace(path: str | Path, *, limit: int | None = None) -> list[TraceRequest]:
    """Read a Mooncake JSONL trace file."""
    with open(path, encoding="utf-8") as handle:
        return parse_lines(handle, limit=limit)


def dump_lines(requests: Sequence[TraceRequest]) -> list[str]:
    """The JSONL lines for ``requests`` (inverse of ``parse_lines``)."""
    out = []
    for r in requests:
        obj: dict[str, Any] = {
            "timestamp": round(r.arrival_s * 1000.0, 3),
            "input_length": r.input_tokens,
            "output_length": r.output_tokens,
            "hash_ids": list(r.hash_ids),
        }
        if r.session is not None:
            obj["session"] = r.session
        out.append(json.dumps(obj))
    return out


# -- shaping -------------------------------------------------------------------------


def span_s(requests: Sequence[TraceRequest]) -> float:
    """Time from the first to the last arrival."""
    if len(requests) < 2:
        return 0.0
    return requests[-1].arrival_s - requests[0].arrival_s


def arrival_rate_rps(requests: Sequence[TraceRequest]) -> float:
    """Mean arrival rate over the trace's span (requests per second)."""
    span = span_s(requests)
    if span <= 0:
        return math.inf if requests else 0.0
    # n arrivals over the span: n - 1 gaps, so (n - 1) / span is the unbiased rate.
    return (len(requests) - 1) / span


def rebase(requests: Sequence[TraceRequest]) -> list[TraceRequest]:
    """Shift arrivals so the first request arrives at 0."""
    if not requests:
        return []
    start = requests[0].arrival_s
    return [replace(r, arrival_s=r.arrival_s - start) for r in requests]


def scale_rate(requests: Sequence[TraceRequest], factor: float) -> list[TraceRequest]:
    """Multiply the arrival rate by ``factor`` (divide every inter-arrival time by it).

    Lengths and prefix sharing are untouched, so only the offered load changes.
    """
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"rate factor must be finite and > 0, got {factor}")
    base = rebase(requests)
    return [replace(r, arrival_s=r.arrival_s / factor) for r in base]


def cap_duration(requests: Sequence[TraceRequest], duration_s: float | None) -> list[TraceRequest]:
    """Keep the requests arriving within ``duration_s`` of the first (None: all)."""
    base = rebase(requests)
    if duration_s is None:
        return base
    return [r for r in base if r.arrival_s <= duration_s]


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceStats:
    """What a trace asks of a fleet, per request on average."""

    requests: int
    span_s: float
    arrival_rate_rps: float
    mean_input_tokens: float
    mean_output_tokens: float
    block_reuse: float
    """Fraction of prompt blocks whose (position-chained) prefix appeared earlier."""


def trace_stats(requests: Sequence[TraceRequest]) -> TraceStats:
    """Summary of ``requests``; ``block_reuse`` bounds the prefix-cache hit rate."""
    n = len(requests)
    seen: set[tuple[int, ...]] = set()
    total_blocks = reused = 0
    for r in requests:
        for i in range(len(r.hash_ids)):
            key = r.hash_ids[: i + 1]
            total_blocks += 1
            if key in seen:
                reused += 1
            else:
                seen.add(key)
    return TraceStats(
        requests=n,
        span_s=span_s(requests),
        arrival_rate_rps=arrival_rate_rps(requests),
        mean_input_tokens=sum(r.input_tokens for r in requests) / n if n else 0.0,
        mean_output_tokens=sum(r.output_tokens for r in requests) / n if n else 0.0,
        block_reuse=reused / total_blocks if total_blocks else 0.0,
    )


# -- prompt text ---------------------------------------------------------------------

_SYLLABLES: Final = tuple(c + v for c in "bcdfghjklmnprstvz" for v in "aeiou")
_CODAS: Final = "bdfgklmnprstxz"
_WORDS: Final = tuple(s + c for s in _SYLLABLES for c in _CODAS)
"""1,190 three-letter words. With a trailing space each is 4 UTF-8 bytes: one token for
the simulator (4 bytes per token) and for routers that estimate 4 characters per token,
so a 512-token block is exactly 2,048 bytes and block boundaries line up everywhere."""
_ID_WORDS: Final = 7
"""Leading words of a chunk that spell its hash id (1190**7 > 2**64): distinct ids never
produce the same chunk."""


def block_words(hash_id: int, tokens: int = MOONCAKE_BLOCK_TOKENS) -> list[str]:
    """The first ``tokens`` words (one per token) of block ``hash_id``'s chunk.

    The id is spelled by the first words; the rest come from SHAKE-128 of the id, so
    the text is the same on every machine and Python version.
    """
    n = len(_WORDS)
    words = []
    x = hash_id if hash_id >= 0 else (1 << 64) + hash_id
    for _ in range(_ID_WORDS):
        words.append(_WORDS[x % n])
        x //= n
    rest = max(0, tokens - _ID_WORDS)
    if rest:
        stream = hashlib.shake_128(b"eagle-eye-block:%d" % hash_id).digest(2 * rest)
        words.extend(_WORDS[v % n] for v in memoryview(stream).cast("H"))
    return words[:tokens]


def prompt_words(request: TraceRequest) -> list[str]:
    """One word per prompt token: full 512-word chunks, the last cut to ``input_tokens``."""
    words: list[str] = []
    remaining = request.input_tokens
    for hash_id in request.hash_ids:
        take = min(MOONCAKE_BLOCK_TOKENS, remaining)
        if take <= 0:
            break
        words.extend(block_words(hash_id, take))
        remaining -= take
    if remaining > 0:  # hash_ids do not cover the prompt: pad with words of a private id
        words.extend(block_words(-1 - len(words), remaining))
    return words


def prompt_text(request: TraceRequest) -> str:
    """The synthetic prompt: 4 bytes (one word and a space) per token of the request."""
    return "".join(w + " " for w in prompt_words(request))


@functools.lru_cache(maxsize=65_536)
def block_text(hash_id: int) -> str:
    """The full 512-token (2,048-byte) chunk of block ``hash_id`` (cached)."""
    return "".join(w + " " for w in block_words(hash_id))


def prompt_text_head(request: TraceRequest, max_chars: int) -> str:
    """``prompt_text(request)[:max_chars]``, built from cached chunks (fast for long prompts)."""
    parts: list[str] = []
    size = 0
    limit = min(max_chars, 4 * request.input_tokens)
    for hash_id in request.hash_ids:
        if size >= limit:
            break
        chunk = block_text(hash_id)
        parts.append(chunk)
        size += len(chunk)
    text = "".join(parts)
    if len(text) < limit:
        return prompt_text(request)[:max_chars]
    return text[:limit]
