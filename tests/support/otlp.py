"""A small OTLP trace receiver for tests: the seam where a collector would be.

No OpenTelemetry Collector runs on the test machines, so tests point exporters (the
router's, the simulator's, vLLM's) at this one. It serves OTLP/HTTP (``POST /v1/traces``,
binary protobuf, gzip or not) and, optionally, OTLP/gRPC, decodes each request with
``opentelemetry-proto`` (the Collector's own message definitions) and keeps the spans as
plain ``ReceivedSpan`` values. It runs on its own thread and event loop, so a test may
block on ``provider.shutdown()`` (which waits for the export) without deadlocking::

    with OtlpReceiver() as receiver:
        settings = TracingSettings(endpoint=receiver.traces_url)
        ...
        spans = receiver.wait_for(lambda spans: len(spans) >= 2, timeout_s=10)
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

KIND_NAMES = {v: k.removeprefix("SPAN_KIND_") for k, v in trace_pb2.Span.SpanKind.items()}
STATUS_NAMES = {v: k.removeprefix("STATUS_CODE_") for k, v in trace_pb2.Status.StatusCode.items()}


@dataclass(frozen=True)
class ReceivedEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as a collector received it (ids in lowercase hex, as trace UIs show)."""

    service: str
    resource: dict[str, Any]
    scope: str
    name: str
    kind: str
    """``SERVER``, ``CLIENT``, ``INTERNAL``, ..."""
    trace_id: str
    span_id: str
    parent_span_id: str
    """Empty for a root span."""
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[ReceivedEvent] = field(default_factory=list)
    status: str = "UNSET"
    status_message: str = ""

    def event(self, name: str) -> ReceivedEvent:
        found = [e for e in self.events if e.name == name]
        assert found, f"{self.name}: no event {name!r} among {[e.name for e in self.events]}"
        return found[0]

    def events_named(self, name: str) -> list[ReceivedEvent]:
        return [e for e in self.events if e.name == name]


def any_value(value: common_pb2.AnyValue) -> Any:
    """An OTLP ``AnyValue`` as the Python value it encodes."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, kind)


def attributes_of(pairs: Iterable[common_pb2.KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in pairs}


def decode_spans(payload: bytes) -> list[ReceivedSpan]:
    """Every span in one ``ExportTraceServiceRequest``."""
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(payload)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        service=str(resource.get("service.name", "")),
                        resource=resource,
                        scope=scope_spans.scope.name,
                        name=s.name,
                        kind=KIND_NAMES.get(s.kind, str(s.kind)),
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=attributes_of(s.attributes),
                        events=[
                            ReceivedEvent(e.name, e.time_unix_nano, attributes_of(e.attributes))
                            for e in s.events
                        ],
                        status=STATUS_NAMES.get(s.status.code, str(s.status.code)),
                        status_message=s.status.message,
                    )
                )
    return spans


class OtlpReceiver:
    """OTLP/HTTP (and, with ``grpc=True``, OTLP/gRPC) on 127.0.0.1, kernel-chosen ports."""

    def __init__(self, *, grpc: bool = False) -> None:
        self._want_grpc = grpc
        self._spans: list[ReceivedSpan] = []
        self._cond = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._grpc_server: Any = None
        self.port = 0
        self.grpc_port = 0
        self.requests = 0
        """Export requests received (both transports)."""

    @property
    def traces_url(self) -> str:
        """What an OTLP/HTTP exporter posts to."""
        return f"http://127.0.0.1:{self.port}/v1/traces"

    @property
    def base_url(self) -> str:
        """``OTEL_EXPORTER_OTLP_ENDPOINT``-style base (``/v1/traces`` appended by clients)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def grpc_url(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    def spans(self) -> list[ReceivedSpan]:
        with self._cond:
            return list(self._spans)

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout_s: float
    ) -> list[ReceivedSpan]:
        """The spans once ``predicate`` holds for them; raises AssertionError at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self._spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = [(s.service, s.name) for s in self._spans]
                    raise AssertionError(f"spans received so far do not satisfy it: {names}")
                self._cond.wait(left)
            return list(self._spans)

    def _add(self, spans: list[ReceivedSpan]) -> None:
        with self._cond:
            self._spans.extend(spans)
            self.requests += 1
            self._cond.notify_all()

    # -- servers ---------------------------------------------------------------------------

    async def _post(self, request: web.Request) -> web.Response:
        payload = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            payload = gzip.decompress(payload)
        if request.content_type != "application/x-protobuf":
            return web.Response(status=415, text="OTLP/HTTP binary protobuf only")
        self._add(decode_spans(payload))
        body = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def _start_http(self) -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/traces", self._post)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    def _start_grpc(self) -> None:
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        receiver = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add(decode_spans(request.SerializeToString()))
                return trace_service_pb2.ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
        self.grpc_port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc_server = server

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start_http(), self._loop).result(10)
        if self._want_grpc:
            self._start_grpc()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=None)
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def by_name(spans: Iterable[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def one(spans: Iterable[ReceivedSpan], name: str) -> ReceivedSpan:
    found = by_name(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r}"
    return found[0]
