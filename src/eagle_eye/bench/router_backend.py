"""A fast fake OpenAI backend for the router-overhead benchmark (nothing else).

It answers ``/v1/chat/completions`` and ``/v1/completions`` at once with a fixed body
(or ``--stream-chunks`` SSE chunks), so what a benchmark measures in front of it is the
router, not the engine. Run it in its own process: ``python -m
eagle_eye.bench.router_backend --port P``. Tests and demos use the simulator instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Final

from aiohttp import web

MODEL: Final = "fake-model"


def _completion(chat: bool) -> bytes:
    choice: dict[str, object] = {"index": 0, "finish_reason": "length", "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": "hello from the fake backend"}
    else:
        choice["text"] = "hello from the fake backend"
    return json.dumps(
        {
            "id": "cmpl-fake",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": MODEL,
            "choices": [choice],
            "usage": {"prompt_tokens": 8, "completion_tokens": 6, "total_tokens": 14},
        }
    ).encode()


def _chunks(chat: bool, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        delta: dict[str, object] = {"index": 0, "finish_reason": None}
        if chat:
            delta["delta"] = {"content": f"tok{i} "}
        else:
            delta["text"] = f"tok{i} "
        obj = {"id": "cmpl-fake", "object": "chunk", "model": MODEL, "choices": [delta]}
        out.append(b"data: " + json.dumps(obj).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def make_app(stream_chunks: int = 16) -> web.Application:
    bodies = {True: _completion(True), False: _completion(False)}
    streams = {True: _chunks(True, stream_chunks), False: _chunks(False, stream_chunks)}
    models = json.dumps(
        {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "fake"}]}
    ).encode()

    async def infer(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        chat = request.path.endswith("chat/completions")
        if b'"stream":true' not in raw.replace(b" ", b""):
            return web.Response(body=bodies[chat], content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for chunk in streams[chat]:
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    async def list_models(_: web.Request) -> web.Response:
        return web.Response(body=models, content_type="application/json")

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def traces(request: web.Request) -> web.Response:
        """An OTLP/HTTP sink: the tracing-overhead runs export here (and it is dropped).
        An empty body is an empty ``ExportTraceServiceResponse``: full success."""
        await request.read()
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", infer)
    app.router.add_post("/v1/completions", infer)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/health", health)
    app.router.add_post("/v1/traces", traces)
    return app


async def _serve(host: str, port: int, stream_chunks: int) -> None:
    runner = web.AppRunner(make_app(stream_chunks), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=2048).start()
    print(f"fake backend on http://{host}:{port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stream-chunks", type=int, default=16)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(_serve(args.host, args.port, args.stream_chunks))
    except ImportError:
        asyncio.run(_serve(args.host, args.port, args.stream_chunks))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
