"""The OpenAI-compatible HTTP gateway: endpoints, auth, validation, lifecycle.

``Router`` wires the pieces: a ``FleetView`` fed by a ``FleetSubscriber`` (NATS), the
policies, the ``Proxy`` that talks to engines, and ``RouterMetrics``. Use it in-process::

    router = Router(RouterConfig(port=0, nats=settings))
    await router.start()      # router.url is now set
    ...
    await router.close()

``router.app`` is the aiohttp application; the composition root (``commands/``) mounts
the live dashboard on it before ``start()``: this module imports nothing of ``observe``.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``POST /generate`` (the seed's), ``GET /health`` (liveness), ``GET /ready`` (an instance
can take work), ``GET /metrics``, ``GET /fleet``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from eagle_eye.fleet.stats import RouterStats, RouterStatsRecorder
from eagle_eye.fleet.subscriber import FleetSubscriber
from eagle_eye.fleet.target import Health
from eagle_eye.fleet.view import FleetView
from eagle_eye.route.config import POLICY_HEADER, SESSION_HEADER, RouterConfig
from eagle_eye.route.dispatch import Dispatcher
from eagle_eye.route.features import request_features
from eagle_eye.route.fleet_doc import fleet_document
from eagle_eye.route.generate import to_completions_body
from eagle_eye.route.metrics import RouterMetrics
from eagle_eye.route.observers import RequestContext, StatsObserver
from eagle_eye.route.policies import POLICY_NAMES, Policy, make_policies
from eagle_eye.route.prefix import PrefixIndex
from eagle_eye.route.prober import Prober
from eagle_eye.route.proxy import ClientCall, Proxy
from eagle_eye.route.requests import ApiError, Operation, parse_body
from eagle_eye.snapshot import EngineState

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_JSON = "application/json"
_TRACE_HEADERS = ("traceparent", "tracestate")
"""Passed on as received unless a tracing observer set ``upstream_headers`` (its span)."""


def error_response(err: ApiError) -> web.Response:
    return web.Response(
        status=err.status, body=err.body(), content_type=_JSON, headers=err.headers or None
    )


@web.middleware
async def _errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as an OpenAI-style JSON body; nothing escapes as a bare 500."""
    try:
        return await handler(request)
    except ApiError as err:
        return error_response(err)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
        return error_response(ApiError(exc.status, exc.reason, type=kind))
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("router: unexpected error on %s %s", request.method, request.path)
        return error_response(ApiError(500, "Internal router error.", type="server_error"))


class Router:
    """The gateway and everything it owns."""

    def __init__(self, config: RouterConfig, *, fleet: FleetView | None = None) -> None:
        self.config = config
        self.fleet = fleet or FleetView(
            stale_after_s=config.policy_config.stale_after_s,
            failures_to_eject=config.failures_to_eject,
            eject_s=config.eject_s,
        )
        for url in config.backends:
            self.fleet.add_static(url)
        self.index = PrefixIndex()
        # A restarted engine has an empty prefix cache: stop sending prefixes there.
        self.fleet.on_restart = self.index.forget
        self.policies: dict[str, Policy] = make_policies(
            config.policy_config, self.index, config.profiles
        )
        if config.policy not in self.policies:
            names = ", ".join(sorted(self.policies))
            raise ValueError(f"unknown policy {config.policy!r}; choose from {names}")
        self.default_policy = self.policies[config.policy]
        self.metrics = RouterMetrics(self.fleet)
        self.stats = RouterStatsRecorder(policy=config.policy)
        """Cumulative counters and fine-grained latency histograms for the dashboard."""
        self.rng = random.Random(config.rng_seed)
        self.dispatcher = Dispatcher(
            self.fleet,
            self.index,
            block_chars=config.policy_config.block_chars,
            rng=self.rng,
            observers=[self.metrics, StatsObserver(self.stats)],
            max_inflight_per_instance=config.max_inflight_per_instance,
            max_inflight_total=config.max_inflight_total,
            retry_after_s=config.retry_after_s,
        )
        self.proxy = Proxy(config, self.dispatcher)
        self.prober = Prober(
            self.fleet, lambda: self.proxy.session, interval_s=config.probe_interval_s
        )
        self.subscriber = (
            FleetSubscriber(config.nats, self.fleet, forget_after_s=config.forget_after_s)
            if config.nats is not None
            else None
        )
        self._auth_values = frozenset(f"Bearer {k}" for k in config.api_keys)
        self.app = self._build_app()
        self._runners: list[web.AppRunner] = []
        self.port: int | None = None
        self.metrics_port: int | None = None

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("router not started")
        host = self.config.host
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    async def start(self, *, nats_wait_s: float = 2.0) -> Router:
        """Bind, connect to NATS (waits up to ``nats_wait_s`` for the first fleet sync,
        then keeps trying in the background) and start recovery probing."""
        await self.proxy.start()
        if self.subscriber is not None:
            await self.subscriber.start(wait_s=nats_wait_s)
        self.port = await self._serve(self.app, self.config.port)
        if self.config.metrics_port is not None:
            metrics_app = web.Application()
            metrics_app.router.add_get("/metrics", self.handle_metrics)
            self.metrics_port = await self._serve(metrics_app, self.config.metrics_port)
        await self.prober.start()
        return self

    async def _serve(self, app: web.Application, port: int) -> int:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, port, backlog=1024, reuse_address=True)
        await site.start()
        self._runners.append(runner)
        return int(runner.addresses[-1][1])

    async def close(self) -> None:
        await self.prober.close()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        if self.subscriber is not None:
            await self.subscriber.close()
        await self.proxy.close()

    async def __aenter__(self) -> Router:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _build_app(self) -> web.Application:
        app = web.Application(
            middlewares=[_errors_middleware], client_max_size=self.config.max_body_bytes
        )
        app.router.add_post("/v1/chat/completions", self.handle_chat)
        app.router.add_post("/v1/completions", self.handle_completions)
        app.router.add_post("/generate", self.handle_generate)
        app.router.add_get("/v1/models", self.handle_models)
        app.router.add_get("/health", self.handle_health)
        app.router.add_get("/ready", self.handle_ready)
        app.router.add_get("/metrics", self.handle_metrics)
        app.router.add_get("/fleet", self.handle_fleet)
        return app

    def router_stats(self) -> RouterStats:
        """Cumulative request counters and latency histograms (the dashboard's seam)."""
        return self.stats.router_stats()

    # -- inference endpoints -------------------------------------------------------------

    async def handle_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._inference(request, Operation.CHAT, "/v1/chat/completions")

    async def handle_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._inference(request, Operation.COMPLETION, "/v1/completions")

    async def handle_generate(self, request: web.Request) -> web.StreamResponse:
        return await self._inference(request, Operation.GENERATE, "/v1/completions")

    async def _inference(
        self, request: web.Request, operation: Operation, path: str
    ) -> web.StreamResponse:
        observers = self.dispatcher.observers
        context = RequestContext(
            operation=operation.value, path=request.path, client_headers=request.headers
        )
        for o in observers:
            o.on_request(context)
        try:
            return await self._route(request, operation, path, context)
        except ApiError as err:
            context.status, context.error_type = err.status, err.code or err.type
            for o in observers:
                o.on_api_error(context.error_type)
            raise
        except BaseException as exc:  # a 500 from the middleware, or the client left
            context.error_type = type(exc).__name__
            raise
        finally:
            for o in observers:
                o.on_request_end(context)

    async def _route(
        self, request: web.Request, operation: Operation, path: str, context: RequestContext
    ) -> web.StreamResponse:
        started = time.monotonic()
        self._check_auth(request)
        raw = await self._read_body(request)
        parsed = parse_body(raw, operation)
        model = self._resolve_model(parsed.model)
        body = parsed.body
        prompt = ""
        if operation is Operation.GENERATE:
            prompt = str(body.get("prompt", ""))
            body = to_completions_body(body, model)
            raw = json.dumps(body).encode()
        elif parsed.model is None and model:
            body = dict(body, model=model)
            raw = json.dumps(body).encode()
        context.model, context.body = model, body
        policy = self._policy_for(request)
        self.dispatcher.admit()
        features = request_features(
            body,
            model=model,
            session_key=request.headers.get(SESSION_HEADER),
            now_mono_s=started,
            block_chars=self.config.policy_config.block_chars,
        )
        call = ClientCall(
            operation=operation,
            path=path,
            payload=raw,
            model=model,
            stream=parsed.stream,
            policy=policy,
            features=features,
            headers=self._upstream_headers(request, context),
            started_mono_s=started,
            prompt=prompt,
            context=context,
        )
        return await self.proxy.handle(request, call)

    def _check_auth(self, request: web.Request) -> None:
        if self._auth_values and request.headers.get("Authorization") not in self._auth_values:
            self.dispatcher.reject("unauthorized")
            raise ApiError(
                401,
                "Missing or invalid API key: send 'Authorization: Bearer <key>'.",
                type="authentication_error",
                code="invalid_api_key",
            )

    async def _read_body(self, request: web.Request) -> bytes:
        limit = self.config.max_body_bytes
        length = request.content_length
        if length is not None and length > limit:
            self.dispatcher.reject("too_large")
            raise ApiError(413, f"Request body exceeds {limit} bytes.", code="request_too_large")
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            self.dispatcher.reject("too_large")
            raise ApiError(
                413, f"Request body exceeds {limit} bytes.", code="request_too_large"
            ) from None

    def _resolve_model(self, model: str | None) -> str:
        if model is not None:
            return model
        if self.config.default_model:
            return self.config.default_model
        models = self.fleet.models()
        if len(models) == 1:
            return next(iter(models))
        if not models and any(t.model is None for t in self.fleet.targets()):
            return ""  # static backends of unknown model: let the engine decide
        raise ApiError(
            400,
            "'model' is required: this fleet serves "
            + (", ".join(sorted(models)) or "no model yet"),
            param="model",
        )

    def _policy_for(self, request: web.Request) -> Policy:
        name = request.headers.get(POLICY_HEADER) if self.config.allow_policy_header else None
        if name is None:
            return self.default_policy
        policy = self.policies.get(name)
        if policy is None:
            raise ApiError(
                400,
                f"Unknown routing policy '{name}' in {POLICY_HEADER}; "
                f"choose from {', '.join(POLICY_NAMES)}.",
                param=POLICY_HEADER,
            )
        return policy

    def _upstream_headers(self, request: web.Request, context: RequestContext) -> dict[str, str]:
        headers = {"Content-Type": _JSON}
        if self.config.upstream_api_key:
            headers["Authorization"] = f"Bearer {self.config.upstream_api_key}"
        elif not self._auth_values:
            auth = request.headers.get("Authorization")
            if auth:
                headers["Authorization"] = auth
        request_id = request.headers.get("X-Request-Id")
        if request_id:
            headers["X-Request-Id"] = request_id
        if context.upstream_headers is not None:
            headers.update(context.upstream_headers)
        else:
            for name in _TRACE_HEADERS:
                value = request.headers.get(name)
                if value:
                    headers[name] = value
        return headers

    # -- other endpoints -----------------------------------------------------------------

    async def handle_models(self, request: web.Request) -> web.Response:
        self._check_auth(request)
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": ",".join(sorted(kinds))}
            for name, kinds in sorted(self.fleet.models().items())
        ]
        return web.json_response({"object": "list", "data": data})

    async def handle_health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def handle_ready(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        ready = [
            t
            for t in self.fleet.targets()
            if t.state is EngineState.READY and t.health is not Health.EJECTED
        ]
        ok = bool(ready)
        body = {
            "ready": ok,
            "instances_ready": len(ready),
            "nats_connected": self.subscriber.connected if self.subscriber else None,
            "checked_mono_s": now,
        }
        return web.json_response(body, status=200 if ok else 503)

    async def handle_metrics(self, request: web.Request) -> web.Response:
        """Text format, or OpenMetrics (with trace-id exemplars) when the scraper asks."""
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def handle_fleet(self, request: web.Request) -> web.Response:
        self._check_auth(request)
        return web.json_response(self.fleet_json())

    def fleet_json(self) -> dict[str, Any]:
        """The ``/fleet`` document (``fleet_doc.py``)."""
        return fleet_document(
            self.fleet,
            now_mono_s=time.monotonic(),
            policy=self.default_policy.name,
            stale_after_s=self.config.policy_config.stale_after_s,
            nats_connected=self.subscriber.connected if self.subscriber else None,
            inflight_total=self.dispatcher.inflight_total,
        )
