"""Sending one client request to an engine and relaying the answer: the HTTP half.

The hot path: the dispatch core (``dispatch.py``) picks a target and does the accounting;
this module POSTs the client's original bytes (no re-serialisation) over a pooled
keep-alive connection, and relays the answer. Streams are relayed chunk by chunk
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
import time
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
from aiohttp import web

from eagle_eye.route.answers import AnswerDetail, stream_usage, usage_of
from eagle_eye.route.config import BACKEND_HEADER, RouterConfig
from eagle_eye.route.dispatch import Attempt, Dispatcher
from eagle_eye.route.features import RequestFeatures
from eagle_eye.route.generate import LegacyStream, legacy_response
from eagle_eye.route.observers import Outcome, RequestContext
from eagle_eye.route.policies import Policy
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


class ClientCall:
    """Everything one client request needs besides the target: kept in one object to keep
    the hot path free of long argument lists."""

    __slots__ = (
        "context",
        "features",
        "headers",
        "model",
        "operation",
        "path",
        "payload",
        "policy",
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
        context: RequestContext | None = None,
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
        self.context = context
        """The observers' view of this request (None: nobody asked)."""


class Proxy:
    """Sends requests where the dispatcher says and relays the answers; owns the upstream
    connection pool."""

    def __init__(self, config: RouterConfig, dispatcher: Dispatcher) -> None:
        self.config = config
        self.dispatcher = dispatcher
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

    async def handle(self, request: web.Request, call: ClientCall) -> web.StreamResponse:
        """Route ``call`` with retries and relay the answer."""
        assert self.session is not None
        dispatcher = self.dispatcher
        tried: set[str] = set()
        attempts = 1 + max(0, self.config.retries)
        last_error = "no instance could be reached"
        for number in range(attempts):
            attempt = dispatcher.dispatch(
                call.features, call.policy, tried=tried, number=number, context=call.context
            )
            if attempt is None:
                break
            target = attempt.target
            try:
                try:
                    upstream = await self.session.post(
                        target.url + call.path, data=call.payload, headers=call.headers
                    )
                except _CONNECT_ERRORS as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
                    dispatcher.failed(attempt, "connect")
                    tried.add(target.url)
                    continue
                if upstream.status >= 500 and number + 1 < attempts:
                    last_error = f"HTTP {upstream.status}"
                    upstream.release()
                    dispatcher.failed(attempt, "status_5xx")
                    tried.add(target.url)
                    continue
                if upstream.status >= 500:
                    dispatcher.failed(attempt, "status_5xx")
                else:
                    dispatcher.succeeded(attempt)
                try:
                    return await self._relay(request, call, attempt, upstream)
                finally:
                    upstream.release()
            finally:
                dispatcher.finished(attempt)
        dispatcher.reject("upstream_unreachable")
        raise ApiError(
            502,
            f"No instance of '{call.model}' answered ({last_error}).",
            type="upstream_error",
            code="upstream_unreachable",
        )

    # -- relaying ------------------------------------------------------------------------

    async def _relay(
        self,
        request: web.Request,
        call: ClientCall,
        attempt: Attempt,
        upstream: aiohttp.ClientResponse,
    ) -> web.StreamResponse:
        content_type = upstream.headers.get("Content-Type", "")
        if call.stream and upstream.status == 200 and content_type.startswith("text/event-stream"):
            return await self._relay_stream(request, call, attempt, upstream)
        target = attempt.target
        try:
            body = await upstream.read()
        except _MIDSTREAM_ERRORS as exc:
            self.dispatcher.failed(attempt, "midstream")
            raise ApiError(
                502,
                f"The engine failed while answering: {type(exc).__name__}",
                type="upstream_error",
                code="upstream_failed",
            ) from None
        status = upstream.status
        now = time.monotonic()
        usage = usage_of(body) if status == 200 else None
        detail = None
        if call.context is not None and call.context.detail:
            detail = AnswerDetail()
            detail.read_body(body)
        if call.operation is Operation.GENERATE and status == 200:
            with contextlib.suppress(ValueError):
                body = legacy_response(call.prompt, json.loads(body))
            content_type = "application/json"
        self._complete(call, attempt, status, now, usage, None, 0, detail=detail)
        headers = {BACKEND_HEADER: target.url}
        if content_type:
            headers["Content-Type"] = content_type
        return web.Response(status=status, body=body, headers=headers)

    async def _relay_stream(
        self,
        request: web.Request,
        call: ClientCall,
        attempt: Attempt,
        upstream: aiohttp.ClientResponse,
    ) -> web.StreamResponse:
        target = attempt.target
        headers = dict(_SSE_HEADERS)
        headers[BACKEND_HEADER] = target.url
        legacy = LegacyStream(call.prompt) if call.operation is Operation.GENERATE else None
        if legacy is not None:
            headers["Content-Type"] = "application/json"
        out = web.StreamResponse(status=200, headers=headers)
        await out.prepare(request)
        first_mono_s: float | None = None
        events = 0
        usage: dict[str, Any] | None = None
        error_type: str | None = None
        detail = AnswerDetail() if call.context is not None and call.context.detail else None
        content = upstream.content
        while True:
            try:
                chunk = await content.readany()
            except _MIDSTREAM_ERRORS as exc:
                error_type = "upstream_died"
                self.dispatcher.failed(attempt, "midstream")
                log.warning("router: %s died mid-stream: %r", target.url, exc)
                if not await self._write_stream_error(out, exc, legacy is not None):
                    error_type = "client_disconnected"
                break
            if not chunk:
                break
            if first_mono_s is None:
                first_mono_s = time.monotonic()
                self.dispatcher.first_token(attempt)
            events += chunk.count(b"data:")
            if b'"usage"' in chunk:
                usage = stream_usage(chunk) or usage
            if detail is not None:
                detail.read_chunk(chunk)
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
        self._complete(
            call, attempt, 200, now, usage, first_mono_s, tokens, error_type, detail=detail
        )
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

    def _complete(
        self,
        call: ClientCall,
        attempt: Attempt,
        status: int,
        now_mono_s: float,
        usage: dict[str, Any] | None,
        first_mono_s: float | None,
        stream_events: int,
        error_type: str | None = None,
        *,
        detail: AnswerDetail | None = None,
    ) -> None:
        """Report the finished request to the dispatcher's observers."""
        if error_type is None and status >= 400:
            error_type = str(status)
        input_tokens = output_tokens = None
        if usage is not None:
            prompt_tokens, completion_tokens = (
                usage.get("prompt_tokens"),
                usage.get("completion_tokens"),
            )
            input_tokens = prompt_tokens if type(prompt_tokens) is int else None
            output_tokens = completion_tokens if type(completion_tokens) is int else None
        ttft_s = tpot_s = None
        if first_mono_s is not None:
            ttft_s = first_mono_s - call.started_mono_s
            n = output_tokens if output_tokens is not None else stream_events
            if n > 1:
                tpot_s = (now_mono_s - first_mono_s) / (n - 1)
        outcome = Outcome(
            model=call.model,
            operation=call.operation.value,
            instance=attempt.target.url,
            status=status,
            error_type=error_type,
            duration_s=now_mono_s - call.started_mono_s,
            ttft_s=ttft_s,
            tpot_s=tpot_s,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            stream_events=stream_events,
            response_model=detail.model if detail is not None else None,
            response_id=detail.id if detail is not None else None,
            finish_reasons=tuple(detail.finish_reasons) if detail is not None else (),
        )
        self.dispatcher.complete(attempt, outcome)
