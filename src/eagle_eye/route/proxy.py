"""Sending one client request to an engine and relaying the answer.

The hot path: pick a target, POST the client's original bytes (no re-serialisation) over
a pooled keep-alive connection, and relay the answer. Streams are relayed chunk by chunk
as they arrive (no buffering), with ``data:`` events counted on the fly for time per
output token.

Failure rules:

* connect error, timeout or 5xx *before any byte reached the client*: the target is
  charged a failure (passive health) and the request is retried on another instance,
  ``RouterConfig.retries`` times;
* the engine dies mid-stream: the client gets a terminating SSE ``error`` event (the
  OpenAI SDK raises ``APIError`` on it) instead of a hang or a silently truncated stream;
* no attempt left: 502 (connect errors) or the engine's own 5xx answer, relayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
from aiohttp import web

from eagle_eye.fleet.stats import RouterStatsRecorder
from eagle_eye.fleet.target import Target
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.config import BACKEND_HEADER, RouterConfig
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.generate import LegacyStream, legacy_response
from eagle_eye.route.metrics import RouterMetrics
from eagle_eye.route.policies import Policy, new_prefill_tokens
from eagle_eye.route.prefix import PrefixIndex
from eagle_eye.route.requests import ApiError, Operation

log = logging.getLogger(__name__)

_CONNECT_ERRORS: Final = (
    aiohttp.ClientConnectionError,  # connect refused/reset, server disconnected
    asyncio.TimeoutError,
    OSError,
)
_MIDSTREAM_ERRORS: Final = (
    aiohttp.ClientPayloadError,
    aiohttp.ClientConnectionError,
    asyncio.TimeoutError,
    OSError,
)
_SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


class Dispatch:
    """Everything one request needs besides the target: kept in one object to keep the
    hot path free of long argument lists."""

    __slots__ = (
        "features",
        "headers",
        "model",
        "operation",
        "path",
        "payload",
        "policy",
        "prefill_tokens",
        "prompt",
        "started_mono_s",
        "stream",
    )

    def __init__(
        self,
        *,
        operation: Operation,
        path: str,
        payload: bytes,
        model: str,
        stream: bool,
        policy: Policy,
        features: RequestFeatures,
        headers: Mapping[str, str],
        started_mono_s: float,
        prompt: str = "",
    ) -> None:
        self.operation = operation
        self.path = path
        self.payload = payload
        self.model = model
        self.stream = stream
        self.policy = policy
        self.features = features
        self.headers = headers
        self.started_mono_s = started_mono_s
        self.prompt = prompt
        self.prefill_tokens = 0.0
        """Estimated prompt tokens to compute at the chosen target; released at the
        first token (``FleetView.on_first_token``)."""


class Proxy:
    """Routes and relays requests; owns the upstream connection pool."""

    def __init__(
        self,
        config: RouterConfig,
        fleet: FleetView,
        metrics: RouterMetrics,
        index: PrefixIndex,
        rng: random.Random,
    ) -> None:
        self.config = config
        self.fleet = fleet
        self.metrics = metrics
        self.index = index
        self.rng = rng
        self.inflight_total = 0
        self.stats = RouterStatsRecorder(policy=config.policy)
        """Cumulative counters and fine-grained latency histograms for the dashboard."""
        self.session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            limit=0, limit_per_host=0, ttl_dns_cache=300, keepalive_timeout=60
        )
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                total=None,
                connect=self.config.connect_timeout_s,
                sock_read=self.config.read_timeout_s,
            ),
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    # -- routing -------------------------------------------------------------------------

    def admit(self) -> None:
        limit = self.config.max_inflight_total
        if limit is not None and self.inflight_total >= limit:
            self.metrics.child(self.metrics.rejected, "fleet_limit").inc()
            raise self._too_many("The router is at its concurrency limit; retry shortly.")

    def _too_many(self, message: str) -> ApiError:
        return ApiError(
            429,
            message,
            type="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(self.config.retry_after_s)},
        )

    def _candidates(self, d: Dispatch, tried: set[str]) -> list[Target]:
        now = time.monotonic()
        candidates = self.fleet.candidates(d.model, now)
        if not candidates:
            if self.fleet.knows_model(d.model) or not self.fleet.targets():
                # Known but not ready, or no engine discovered yet (a router that just
                # started, or NATS down from the start): transient, so 503, not 404.
                self.metrics.child(self.metrics.rejected, "no_instance").inc()
                raise ApiError(
                    503,
                    f"No instance of model '{d.model}' is ready (all loading, draining, "
                    "or failing); retry shortly.",
                    type="service_unavailable",
                    code="no_instance_available",
                    headers={"Retry-After": str(self.config.retry_after_s)},
                )
            self.metrics.child(self.metrics.rejected, "unknown_model").inc()
            raise ApiError(
                404,
                f"The model '{d.model}' does not exist in this fleet.",
                type="not_found_error",
                code="model_not_found",
                param="model",
            )
        per_instance = self.config.max_inflight_per_instance
        if tried or per_instance is not None:
            candidates = [
                t
                for t in candidates
                if t.url not in tried and (per_instance is None or t.inflight < per_instance)
            ]
            if not candidates and not tried:
                self.metrics.child(self.metrics.rejected, "instance_limit").inc()
                raise self._too_many(
                    f"Every instance of '{d.model}' is at its concurrency limit; retry shortly."
                )
        return candidates

    async def handle(self, request: web.Request, d: Dispatch) -> web.StreamResponse:
        """Route ``d`` with retries and relay the answer."""
        assert self.session is not None
        tried: set[str] = set()
        attempts = 1 + max(0, self.config.retries)
        last_error = "no instance could be reached"
        policy_name = d.policy.name
        for attempt in range(attempts):
            candidates = self._candidates(d, tried)
            if not candidates:
                break
            if attempt:
                self.metrics.retries.inc()
                self.stats.observe_retry()
            target = d.policy.pick(d.features, candidates, self.rng)
            matched = 0
            if d.features.prefix_hashes:
                matched = self.index.match(d.features.prefix_hashes, (target.url,)).get(
                    target.url, 0
                )
                self.index.insert(d.features.prefix_hashes, target.url)
            d.prefill_tokens = new_prefill_tokens(
                d.features, matched, self.config.policy_config.block_chars
            )
            self.fleet.on_sent(target, d.prefill_tokens)
            self.metrics.child(self.metrics.decisions, policy_name, target.url).inc()
            self.inflight_total += 1
            try:
                try:
                    upstream = await self.session.post(
                        target.url + d.path, data=d.payload, headers=d.headers
                    )
                except _CONNECT_ERRORS as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
                    self._failed(target, "connect")
                    tried.add(target.url)
                    continue
                if upstream.status >= 500 and attempt + 1 < attempts:
                    last_error = f"HTTP {upstream.status}"
                    upstream.release()
                    self._failed(target, "status_5xx")
                    tried.add(target.url)
                    continue
                if upstream.status >= 500:
                    self._failed(target, "status_5xx")
                else:
                    self.fleet.on_success(target)
                try:
                    return await self._relay(request, d, target, upstream)
                finally:
                    upstream.release()
            finally:
                self.inflight_total -= 1
                if d.prefill_tokens:  # ended before any token (error, non-streaming)
                    self.fleet.on_first_token(target, d.prefill_tokens)
                    d.prefill_tokens = 0.0
                self.fleet.on_finished(target)
        self.metrics.child(self.metrics.rejected, "upstream_unreachable").inc()
        raise ApiError(
            502,
            f"No instance of '{d.model}' answered ({last_error}).",
            type="upstream_error",
            code="upstream_unreachable",
        )

    def _failed(self, target: Target, kind: str) -> None:
        self.fleet.on_failure(target, time.monotonic())
        self.metrics.child(self.metrics.upstream_errors, target.url, kind).inc()
        self.stats.observe_error(f"upstream_{kind}")

    # -- relaying ------------------------------------------------------------------------

    async def _relay(
        self,
        request: web.Request,
        d: Dispatch,
        target: Target,
        upstream: aiohttp.ClientResponse,
    ) -> web.StreamResponse:
        content_type = upstream.headers.get("Content-Type", "")
        if d.stream and upstream.status == 200 and content_type.startswith("text/event-stream"):
            return await self._relay_stream(request, d, target, upstream)
        try:
            body = await upstream.read()
        except _MIDSTREAM_ERRORS as exc:
            self._failed(target, "midstream")
            raise ApiError(
                502,
                f"The engine failed while answering: {type(exc).__name__}",
                type="upstream_error",
                code="upstream_failed",
            ) from None
        status = upstream.status
        now = time.monotonic()
        usage = _usage_of(body) if status == 200 else None
        if d.operation is Operation.GENERATE and status == 200:
            with contextlib.suppress(ValueError):
                body = legacy_response(d.prompt, json.loads(body))
            content_type = "application/json"
        self._record(d, target, status, now, usage, None, 0)
        headers = {BACKEND_HEADER: target.url}
        if content_type:
            headers["Content-Type"] = content_type
        return web.Response(status=status, body=body, headers=headers)

    async def _relay_stream(
        self,
        request: web.Request,
        d: Dispatch,
        target: Target,
        upstream: aiohttp.ClientResponse,
    ) -> web.StreamResponse:
        headers = dict(_SSE_HEADERS)
        headers[BACKEND_HEADER] = target.url
        legacy = LegacyStream(d.prompt) if d.operation is Operation.GENERATE else None
        if legacy is not None:
            headers["Content-Type"] = "application/json"
        out = web.StreamResponse(status=200, headers=headers)
        await out.prepare(request)
        first_mono_s: float | None = None
        events = 0
        usage: dict[str, Any] | None = None
        error_type: str | None = None
        content = upstream.content
        while True:
            try:
                chunk = await content.readany()
            except _MIDSTREAM_ERRORS as exc:
                error_type = "upstream_died"
                self._failed(target, "midstream")
                log.warning("router: %s died mid-stream: %r", target.url, exc)
                if not await self._write_stream_error(out, exc, legacy is not None):
                    error_type = "client_disconnected"
                break
            if not chunk:
                break
            if first_mono_s is None:
                first_mono_s = time.monotonic()
                self.fleet.on_first_token(target, d.prefill_tokens)
                d.prefill_tokens = 0.0
            events += chunk.count(b"data:")
            if b'"usage"' in chunk:
                usage = _stream_usage(chunk) or usage
            try:
                await out.write(legacy.feed(chunk) if legacy is not None else chunk)
            except (ConnectionResetError, RuntimeError):
                # The client went away: drop the upstream connection so the engine
                # aborts the request instead of generating for nobody.
                error_type = "client_disconnected"
                upstream.close()
                break
        now = time.monotonic()
        tokens = events - 1 if events > 1 else events  # minus the [DONE] sentinel
        self._record(d, target, 200, now, usage, first_mono_s, tokens, error_type)
        if error_type != "client_disconnected":
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await out.write_eof()
        return out

    async def _write_stream_error(
        self, out: web.StreamResponse, exc: BaseException, legacy: bool
    ) -> bool:
        """Terminate the client's stream with an error event; False if the client is gone."""
        message = f"The engine serving this request failed mid-stream ({type(exc).__name__})."
        event = json.dumps(
            {"error": {"message": message, "type": "upstream_error", "code": "upstream_failed"}}
        ).encode()
        try:
            await out.write(event + b"\0" if legacy else b"data: " + event + b"\n\n")
        except (ConnectionResetError, RuntimeError):
            return False
        return True

    def _record(
        self,
        d: Dispatch,
        target: Target,
        status: int,
        now_mono_s: float,
        usage: dict[str, Any] | None,
        first_mono_s: float | None,
        stream_events: int,
        error_type: str | None = None,
    ) -> None:
        m, op, model = self.metrics, d.operation.value, d.model
        if error_type is None and status >= 400:
            error_type = str(status)
        m.child(m.requests, model, op, target.url, str(status)).inc()
        duration_s = now_mono_s - d.started_mono_s
        m.child(m.duration, model, op, error_type or "").observe(duration_s)
        stats = self.stats
        stats.observe_duration(duration_s)
        output_tokens = None
        if usage is not None:
            prompt_tokens = usage.get("prompt_tokens")
            output_tokens = usage.get("completion_tokens")
            if type(prompt_tokens) is int:
                m.child(m.tokens, model, op, "input").observe(prompt_tokens)
            if type(output_tokens) is int:
                m.child(m.tokens, model, op, "output").observe(output_tokens)
            else:
                output_tokens = None
        if first_mono_s is not None:
            ttft_s = first_mono_s - d.started_mono_s
            m.child(m.ttft, model, op).observe(ttft_s)
            stats.observe_ttft(ttft_s)
            n = output_tokens if output_tokens is not None else stream_events
            if n > 1:
                tpot_s = (now_mono_s - first_mono_s) / (n - 1)
                m.child(m.tpot, model, op).observe(tpot_s)
                stats.observe_tpot(tpot_s)


def _usage_of(body: bytes) -> dict[str, Any] | None:
    if b'"usage"' not in body or len(body) > 4 * 1024 * 1024:
        return None
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    return usage if isinstance(usage, dict) else None


def _stream_usage(chunk: bytes) -> dict[str, Any] | None:
    """Usage from the last ``data:`` event in ``chunk`` that carries one."""
    for line in reversed(chunk.split(b"\n")):
        if line.startswith(b"data:") and b'"usage"' in line:
            usage = _usage_of(line[5:].strip())
            if usage is not None:
                return usage
    return None
