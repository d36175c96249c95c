"""The OpenAI API as vLLM serves it: completions and chat (whole or SSE), models.

Request bodies are parsed by ``eagle_eye.sim.protocol``; response bodies and SSE chunks
are built there too. Streaming follows vLLM: ``data: {...}`` events, a first chat chunk
carrying the role, ``usage: null`` on every chunk and a final usage chunk with empty
``choices`` when ``stream_options.include_usage`` is set, then ``data: [DONE]``. A
stream whose engine dies is dropped without ``[DONE]``, as a crashed server would.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from eagle_eye.sim import protocol
from eagle_eye.sim.request import RequestStatus, SimRequest
from eagle_eye.sim.server.api.common import ServedEngine, check_model, read_json_object

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


@dataclass(frozen=True, slots=True)
class _Reply:
    """What every chunk or body of one response repeats."""

    rid: str
    model: str
    created: int
    chat: bool


def usage_of(req: SimRequest) -> dict[str, Any]:
    """The OpenAI ``usage`` object of ``req`` so far, with its cached prompt tokens."""
    return protocol.usage(req.prompt_tokens, req.output_tokens, max(0, req.num_cached_tokens))


class OpenAIRoutes:
    """``/v1/completions``, ``/v1/chat/completions`` and ``/v1/models``."""

    def __init__(self, engine: ServedEngine) -> None:
        self.engine = engine

    async def completions(self, request: web.Request) -> web.StreamResponse:
        spec = self.engine.spec
        body = await read_json_object(request)
        check_model(body, spec.model)
        order = protocol.parse_completion(body, block_size=spec.profile.block_size, seed=spec.seed)
        return await self._serve(request, order, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        spec = self.engine.spec
        body = await read_json_object(request)
        check_model(body, spec.model)
        order = protocol.parse_chat(body, block_size=spec.profile.block_size, seed=spec.seed)
        return await self._serve(request, order, chat=True)

    async def models(self, request: web.Request) -> web.StreamResponse:
        engine = self.engine
        return web.json_response(protocol.models_body(engine.spec.model, engine.core.max_model_len))

    async def _serve(
        self, request: web.Request, order: protocol.WorkOrder, *, chat: bool
    ) -> web.StreamResponse:
        req = self.engine.admit(order, request.headers)
        reply = _Reply(
            model=self.engine.spec.model,
            created=int(time.time()),
            rid=protocol.new_id("chatcmpl" if chat else "cmpl"),
            chat=chat,
        )
        if not order.stream:
            return await self._whole(req, reply)
        return await self._stream(request, req, reply, include_usage=order.include_usage)

    async def _whole(self, req: SimRequest, reply: _Reply) -> web.StreamResponse:
        """Wait for the whole text; 503 if the engine stopped before it finished."""
        text = "".join([t async for t in self.engine.tokens(req)])
        if req.finish_reason is None or req.finish_reason.value == "abort":
            raise protocol.BadRequest(
                "the engine stopped", status=503, type_="ServiceUnavailableError"
            )
        r = reply
        return web.json_response(
            protocol.completion_body(
                r.rid,
                r.model,
                r.created,
                text,
                req.finish_reason.value,
                usage_of(req),
                chat=r.chat,
            )
        )

    async def _stream(
        self, request: web.Request, req: SimRequest, reply: _Reply, *, include_usage: bool
    ) -> web.StreamResponse:
        """One SSE event per step that produced text for ``req``."""
        r = reply
        response = web.StreamResponse(headers=_SSE_HEADERS)
        await response.prepare(request)
        usage_null = {"usage": None} if include_usage else {}

        async def send(obj: dict[str, Any]) -> None:
            await response.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        if r.chat:
            first = protocol.completion_chunk(
                r.rid, r.model, r.created, "", None, chat=True, first=True
            )
            await send({**first, **usage_null})
        async for text in self.engine.tokens(req):
            finish = None
            if req.status is RequestStatus.FINISHED and req.finish_reason is not None:
                finish = req.finish_reason.value
            chunk = protocol.completion_chunk(r.rid, r.model, r.created, text, finish, chat=r.chat)
            await send({**chunk, **usage_null})
        if req.finish_reason is not None and req.finish_reason.value == "abort":
            raise ConnectionResetError("engine stopped")  # drop the stream without [DONE]
        if include_usage:
            await send(protocol.usage_chunk(r.rid, r.model, r.created, usage_of(req), chat=r.chat))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
