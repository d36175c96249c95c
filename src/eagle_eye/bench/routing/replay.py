"""Online replay: send a trace through a router as a streaming OpenAI client, timing it.

Every request is sent at its trace arrival time (divided by the simulator's speedup) as a
streaming ``/v1/completions`` call whose body is identical for every router under test:
the synthetic prompt text (so text-routing peers see the trace's prefix sharing), the
trace's output length with ``ignore_eos`` (so every request generates exactly that many
tokens), and the trace's block ids in the simulator's extension field (so the engines
reproduce the trace's KV-block sharing exactly, whatever the text tokenises to).

Timings are converted to simulated seconds (wall / speedup) so they read as if the
simulated engines ran at real speed.

``LoadRecorder`` listens to the fleet's own snapshots on NATS (the engines publish them
whichever router is in front) to get per-engine load over time and prefix-cache counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import nats

from eagle_eye import subjects
from eagle_eye.bench.routing.metrics import LoadSample, RequestResult
from eagle_eye.bench.routing.trace import TraceRequest, prompt_text
from eagle_eye.snapshot import SnapshotError, decode


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayConfig:
    """How to replay: where to, how fast, and what the request bodies carry."""

    base_url: str
    model: str
    speedup: float = 1.0
    """The simulator's clock speedup; trace times are divided by it, timings multiplied."""
    hash_ids_field: str | None = None
    """Request-body field for the trace's block ids (the simulator's extension), or None."""
    block_tokens_field: str | None = None
    """Request-body field for the block size of those ids, when the simulator wants it."""
    send_text: bool = True
    request_timeout_s: float = 3600.0
    session_header: str = "x-session-id"


def request_body(
    request: TraceRequest, config: ReplayConfig, text: str | None = None
) -> dict[str, Any]:
    """The ``/v1/completions`` body for one trace request (pure)."""
    body: dict[str, Any] = {
        "model": config.model,
        "prompt": (prompt_text(request) if text is None else text) if config.send_text else "",
        "max_tokens": request.output_tokens,
        "min_tokens": request.output_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if config.hash_ids_field:
        body[config.hash_ids_field] = list(request.hash_ids)
    if config.block_tokens_field:
        body[config.block_tokens_field] = 512
    if request.session is not None:
        body["user"] = request.session
    return body


@dataclass(slots=True)
class StreamParser:
    """Consumes SSE lines of one streamed completion and records token times (pure)."""

    sent_mono_s: float
    first_token_mono_s: float | None = None
    last_token_mono_s: float | None = None
    gaps_s: array[float] = field(default_factory=lambda: array("d"))
    chunks_with_text: int = 0
    usage_completion_tokens: int | None = None
    error: str | None = None
    done: bool = False

    def feed(self, line: bytes, now_mono_s: float) -> None:
        line = line.strip()
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.error = "bad_sse: not JSON"
            return
        if not isinstance(obj, dict):
            return
        if "error" in obj:
            err = obj["error"]
            self.error = f"stream_error: {err.get('message') if isinstance(err, dict) else err}"
            return
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage_completion_tokens = usage["completion_tokens"]
        choices = obj.get("choices")
        if not choices:
            return
        choice = choices[0]
        text = choice.get("text")
        if text is None:  # chat-style chunk
            text = (choice.get("delta") or {}).get("content")
        if not text:
            return
        self.chunks_with_text += 1
        if self.first_token_mono_s is None:
            self.first_token_mono_s = now_mono_s
        elif self.last_token_mono_s is not None:
            self.gaps_s.append(now_mono_s - self.last_token_mono_s)
        self.last_token_mono_s = now_mono_s

    def result(self, index: int, arrival_s: float, speedup: float) -> RequestResult:
        """The request's timings in simulated seconds."""
        out = RequestResult(index=index, arrival_s=arrival_s)
        out.output_tokens = self.usage_completion_tokens or self.chunks_with_text
        if self.error is not None:
            out.error = self.error
        elif self.first_token_mono_s is None or self.last_token_mono_s is None:
            out.error = "no_tokens: stream ended without a token"
        else:
            out.ttft_s = (self.first_token_mono_s - self.sent_mono_s) * speedup
            out.e2e_s = (self.last_token_mono_s - self.sent_mono_s) * speedup
            out.itls_s = array("d", (g * speedup for g in self.gaps_s))
        return out


async def _one(
    session: aiohttp.ClientSession,
    index: int,
    request: TraceRequest,
    config: ReplayConfig,
    body: bytes,
) -> RequestResult:
    sent = time.monotonic()
    parser = StreamParser(sent_mono_s=sent)
    headers = {"content-type": "application/json"}
    if request.session is not None:
        headers[config.session_header] = request.session
    try:
        async with session.post(
            config.base_url + "/v1/completions", data=body, headers=headers
        ) as resp:
            if resp.status != 200:
                text = (await resp.text())[:200]
                return RequestResult(
                    index=index, arrival_s=request.arrival_s, error=f"http_{resp.status}: {text}"
                )
            async for line in resp.content:
                parser.feed(line, time.monotonic())
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        parser.error = f"{type(exc).__name__}: {exc}"
    return parser.result(index, request.arrival_s, config.speedup)


async def replay(
    requests: Sequence[TraceRequest],
    config: ReplayConfig,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[RequestResult]:
    """Send every request at ``arrival_s / speedup`` after the start; wait for all.

    Bodies are encoded ahead of time so the client's own CPU use stays off the timed path.
    """
    bodies = [json.dumps(request_body(r, config)).encode() for r in requests]
    timeout = aiohttp.ClientTimeout(total=config.request_timeout_s, sock_connect=10)
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    results: list[RequestResult] = []
    done = 0
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        loop = asyncio.get_running_loop()
        start = loop.time()
        tasks: list[asyncio.Task[RequestResult]] = []
        for i, (request, body) in enumerate(zip(requests, bodies, strict=True)):
            delay = start + request.arrival_s / config.speedup - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_one(session, i, request, config, body)))
        for task in asyncio.as_completed(tasks):
            results.append(await task)
            done += 1
            if progress is not None:
                progress(done, len(tasks))
    results.sort(key=lambda r: r.index)
    return results


class LoadRecorder:
    """Records every engine's load and prefix counters from NATS snapshots.

    ``t_s`` of each sample is simulated seconds since ``mark_start()`` (wall x speedup).
    """

    def __init__(self, nats_url: str, *, speedup: float = 1.0) -> None:
        self.nats_url = nats_url
        self.speedup = speedup
        self.samples: list[LoadSample] = []
        self.malformed = 0
        self._start_mono_s = time.monotonic()
        self._nc: Any = None

    def mark_start(self) -> None:
        """Start the clock (and forget samples from before, e.g. the fleet's start-up)."""
        self._start_mono_s = time.monotonic()
        self.samples.clear()

    async def __aenter__(self) -> LoadRecorder:
        self._nc = await nats.connect(self.nats_url, name="eagle-eye-bench-recorder")
        for subject in subjects.consumer_subjects():
            await self._nc.subscribe(subject, cb=self._on_message)
        await self._nc.flush()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.close()
            self._nc = None

    async def _on_message(self, msg: Any) -> None:
        try:
            s = decode(msg.data)
        except SnapshotError:
            self.malformed += 1
            return
        self.samples.append(
            LoadSample(
                t_s=(time.monotonic() - self._start_mono_s) * self.speedup,
                engine=s.endpoint or s.instance_id,
                running=s.running,
                waiting=s.waiting,
                prefix_queries_total=s.prefix_cache_queries_total,
                prefix_hits_total=s.prefix_cache_hits_total,
            )
        )
