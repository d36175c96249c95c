"""The live dashboard as an aiohttp sub-application, mounted at ``/dashboard``.

Routes (relative to the mount point; the page uses relative URLs, so it works under any
prefix that ends in ``/dashboard/``):

* ``/`` the page (``static/index.html``), ``/static/...`` its CSS/JS and the chart
  library (uPlot, which the package build fetches with npm, see ``setup.py``; the page
  says so when it is missing);
* ``/events`` server-sent events: one ``frame`` event per tick (4 per second) carrying
  the table, totals, router figures and the new point of every chart series;
* ``/api/frame`` the newest frame, ``/api/history`` the in-memory history (aligned
  columns), ``/api/config`` what the page needs to know;
* ``/api/range?minutes=N`` longer history from Prometheus ``query_range`` (when a
  Prometheus URL is configured), in the same column format as ``/api/history``.

One ticker task per app samples the ``DashboardState`` and serialises the frame once;
every SSE client then gets the newest frame (a slow client skips frames, it never queues
them). Use ``create_dashboard_app`` and ``mount_dashboard``; see docs/dashboard.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from eagle_eye import __version__
from eagle_eye.errors import EagleEyeError
from eagle_eye.observe.dashboard.frame import Frame
from eagle_eye.observe.dashboard.state import DashboardState

log = logging.getLogger(__name__)

STATIC_DIR: Final = Path(__file__).parent.parent / "static"
UPLOT_JS: Final = STATIC_DIR / "vendor" / "uplot" / "uPlot.iife.min.js"
MOUNT_PREFIX: Final = "/dashboard"
MAX_RANGE_MINUTES: Final = 7 * 24 * 60
RANGE_POINTS: Final = 300
"""Points per series asked of Prometheus: enough for a laptop-wide chart."""


def _quantile(q: float, metric: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket[1m])))"


PROMETHEUS_QUERIES: Final[tuple[tuple[str, str, str | None], ...]] = (
    # (series name, PromQL, label naming the instance, or None for a fleet series).
    # Engine series use vLLM's own metric names, which Prometheus scrapes from every
    # engine (and the simulator), keyed by the scrape target; router series use the
    # router's names (route/metrics.py), whose ``instance`` label (the engine URL) comes
    # back as ``exported_instance``. Keys are normalised to ``host:port`` so both meet.
    ("fleet.running", "sum(vllm:num_requests_running)", None),
    ("fleet.waiting", "sum(vllm:num_requests_waiting)", None),
    ("fleet.kv_usage", "avg(vllm:kv_cache_usage_perc)", None),
    ("fleet.tokens_per_s", "sum(rate(vllm:generation_tokens_total[1m]))", None),
    ("fleet.requests_per_s", "sum(rate(eagle_eye_router_requests_total[1m]))", None),
    ("fleet.decisions_per_s", "sum(rate(eagle_eye_router_decisions_total[1m]))", None),
    (
        "fleet.errors_per_s",
        "sum(rate(eagle_eye_router_upstream_errors_total[1m]))"
        " + sum(rate(eagle_eye_router_rejected_total[1m]))",
        None,
    ),
    ("fleet.retries_per_s", "sum(rate(eagle_eye_router_retries_total[1m]))", None),
    ("fleet.ttft_p50_s", _quantile(0.5, "gen_ai_server_time_to_first_token_seconds"), None),
    ("fleet.ttft_p99_s", _quantile(0.99, "gen_ai_server_time_to_first_token_seconds"), None),
    ("fleet.tpot_p50_s", _quantile(0.5, "gen_ai_server_time_per_output_token_seconds"), None),
    ("fleet.tpot_p99_s", _quantile(0.99, "gen_ai_server_time_per_output_token_seconds"), None),
    ("fleet.duration_p50_s", _quantile(0.5, "gen_ai_server_request_duration_seconds"), None),
    ("fleet.duration_p99_s", _quantile(0.99, "gen_ai_server_request_duration_seconds"), None),
    ("running@{}", "sum by (instance) (vllm:num_requests_running)", "instance"),
    ("waiting@{}", "sum by (instance) (vllm:num_requests_waiting)", "instance"),
    ("kv_usage@{}", "avg by (instance) (vllm:kv_cache_usage_perc)", "instance"),
    (
        "tokens_per_s@{}",
        "sum by (instance) (rate(vllm:generation_tokens_total[1m]))",
        "instance",
    ),
    (
        "decisions_per_s@{}",
        "sum by (exported_instance) (rate(eagle_eye_router_decisions_total[1m]))",
        "exported_instance",
    ),
)


MAX_LOOP_SHARE: Final = 0.1
"""The ticker stretches its period so sampling takes at most this share of the event loop
(it shares the loop with the router's request path)."""


class FrameHub:
    """The newest frame, serialised once per tick for every watcher, and a way to wait for
    the next one. With nobody watching, frames are sampled (history goes on) but not
    serialised."""

    def __init__(self) -> None:
        self.frame: Frame | None = None
        self.closing = False
        self.clients = 0
        self._data: bytes | None = None
        self._next = asyncio.Event()

    @property
    def latest(self) -> bytes | None:
        """The newest frame as JSON bytes (serialised on first use)."""
        if self._data is None and self.frame is not None:
            self._data = json.dumps(self.frame.to_json(), separators=(",", ":")).encode()
        return self._data

    def publish(self, frame: Frame) -> None:
        self.frame = frame
        self._data = None
        event, self._next = self._next, asyncio.Event()
        event.set()

    def close(self) -> None:
        self.closing = True
        self._next.set()

    async def wait_next(self, timeout_s: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._next.wait(), timeout_s)


_STATE_KEY: Final = web.AppKey("dashboard_state", DashboardState)
_HUB_KEY: Final = web.AppKey("dashboard_hub", FrameHub)


def create_dashboard_app(
    state: DashboardState,
    *,
    prometheus_url: str | None = None,
    run_ticker: bool = True,
) -> web.Application:
    """A sub-app serving the dashboard for ``state``; mount it with ``mount_dashboard``.

    ``run_ticker`` starts the sampling task with the app; turn it off only when something
    else calls ``state.sample`` (tests that drive time by hand).
    """
    app = web.Application()
    hub = FrameHub()
    app[_STATE_KEY] = state
    app[_HUB_KEY] = hub
    handlers = _Handlers(state, hub, prometheus_url)
    app.router.add_get("/", handlers.page)
    app.router.add_get("/events", handlers.events)
    app.router.add_get("/api/frame", handlers.frame)
    app.router.add_get("/api/history", handlers.history)
    app.router.add_get("/api/config", handlers.config)
    app.router.add_get("/api/range", handlers.range)
    app.router.add_static("/static", STATIC_DIR, follow_symlinks=False)

    async def ticker_ctx(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_tick_forever(state, hub)) if run_ticker else None
        yield
        hub.close()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await handlers.close()

    async def on_shutdown(_: web.Application) -> None:
        hub.close()  # lets open SSE streams end so the server can stop promptly

    app.cleanup_ctx.append(ticker_ctx)
    app.on_shutdown.append(on_shutdown)
    return app


def mount_dashboard(parent: web.Application, dashboard: web.Application) -> None:
    """Mount at ``/dashboard/`` and redirect ``/dashboard`` there (relative URLs need it)."""

    async def redirect(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(MOUNT_PREFIX + "/")

    parent.router.add_get(MOUNT_PREFIX, redirect)
    parent.add_subapp(MOUNT_PREFIX + "/", dashboard)


def charts_available() -> bool:
    """Whether the chart library was installed next to the page."""
    return UPLOT_JS.is_file()


async def _tick_forever(state: DashboardState, hub: FrameHub) -> None:
    tick_s = state.config.tick_s
    next_mono = time.monotonic()
    while True:
        started = time.monotonic()
        try:
            hub.publish(state.sample(started, time.time()))
        except Exception:  # a bad sample must not stop the live view
            log.exception("dashboard: sampling failed")
        cost_s = time.monotonic() - started
        next_mono += max(tick_s, cost_s / MAX_LOOP_SHARE)
        delay = next_mono - time.monotonic()
        if delay < 0:  # fell behind (a stalled loop): skip, do not burst
            next_mono = time.monotonic()
            delay = 0
        await asyncio.sleep(delay)


class _Handlers:
    def __init__(self, state: DashboardState, hub: FrameHub, prometheus_url: str | None) -> None:
        self.state = state
        self.hub = hub
        self.prometheus_url = prometheus_url.rstrip("/") if prometheus_url else None
        self._session: ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def page(self, _: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    async def config(self, _: web.Request) -> web.Response:
        cfg = self.state.config
        return web.json_response(
            {
                "version": __version__,
                "tick_s": cfg.tick_s,
                "history_s": cfg.history_s,
                "stale_after_s": cfg.stale_after_s,
                "charts": charts_available(),
                "prometheus": self.prometheus_url is not None,
                "router": self.state.router is not None,
            }
        )

    async def frame(self, _: web.Request) -> web.Response:
        if self.hub.latest is None:
            return web.json_response({"error": "no frame yet"}, status=503)
        return web.Response(body=self.hub.latest, content_type="application/json")

    async def history(self, _: web.Request) -> web.Response:
        return web.json_response(self.state.history.to_json(), dumps=_compact)

    async def events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        hub = self.hub
        hub.clients += 1
        sent: bytes | None = None
        try:
            await response.write(b"retry: 1000\n\n")
            while not hub.closing:
                data = hub.latest
                if data is not None and data is not sent:
                    await response.write(b"event: frame\ndata: " + data + b"\n\n")
                    sent = data
                else:
                    await response.write(b": keep-alive\n\n")
                await hub.wait_next(timeout_s=5.0)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            hub.clients -= 1
        return response

    async def range(self, request: web.Request) -> web.Response:
        if self.prometheus_url is None:
            return web.json_response(
                {"error": "no Prometheus URL configured (--prometheus URL)"}, status=404
            )
        try:
            minutes = float(request.query.get("minutes", "60"))
        except ValueError:
            minutes = math.nan
        if not math.isfinite(minutes) or not 1 <= minutes <= MAX_RANGE_MINUTES:
            return web.json_response(
                {"error": f"minutes must be a number from 1 to {MAX_RANGE_MINUTES}"}, status=400
            )
        end_s = time.time()
        step_s = max(1.0, round(minutes * 60 / RANGE_POINTS))
        start_s = math.ceil((end_s - minutes * 60) / step_s) * step_s  # on the step grid
        try:
            results = await asyncio.gather(
                *(self._query_range(q, start_s, end_s, step_s) for _, q, _ in PROMETHEUS_QUERIES)
            )
        except PrometheusError as exc:
            return web.json_response({"error": str(exc)}, status=502)
        return web.json_response(
            align_range(results, start_s, end_s, step_s), dumps=_compact, status=200
        )

    async def _query_range(
        self, query: str, start_s: float, end_s: float, step_s: float
    ) -> list[dict[str, Any]]:
        if self._session is None:
            self._session = ClientSession(timeout=ClientTimeout(total=10))
        params = {"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}"}
        params["step"] = f"{step_s:g}"
        url = f"{self.prometheus_url}/api/v1/query_range"
        try:
            async with self._session.get(url, params=params) as resp:
                body = await resp.json(content_type=None)
        except (ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise PrometheusError(f"Prometheus at {self.prometheus_url}: {exc!r}") from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else body
            raise PrometheusError(f"Prometheus rejected {query!r}: {error}")
        result = body.get("data", {}).get("result", [])
        return result if isinstance(result, list) else []


class PrometheusError(EagleEyeError, RuntimeError):
    """Prometheus could not be reached or refused a query."""


def align_range(
    results: list[list[dict[str, Any]]], start_s: float, end_s: float, step_s: float
) -> dict[str, Any]:
    """Turn ``query_range`` matrices (one per ``PROMETHEUS_QUERIES`` entry) into the
    history's column format: one ``t`` column on the step grid, one column per series."""
    first = math.ceil(start_s / step_s - 1e-9) * step_s
    ts = [first + i * step_s for i in range(int((end_s - first) // step_s) + 1)]
    index = {round(t, 3): i for i, t in enumerate(ts)}
    series: dict[str, list[float | None]] = {}
    for (name, _, label), matrix in zip(PROMETHEUS_QUERIES, results, strict=True):
        for item in matrix:
            metric = item.get("metric", {})
            key = name.format(_host_port(metric.get(label, "?"))) if label else name
            column = series.setdefault(key, [None] * len(ts))
            for t_raw, v_raw in item.get("values", []):
                i = index.get(round(float(t_raw), 3))
                try:
                    value = float(v_raw)
                except (TypeError, ValueError):
                    continue
                if i is not None and math.isfinite(value):
                    column[i] = value
    return {"t": ts, "series": series, "step_s": step_s}


def _host_port(value: str) -> str:
    """``http://10.0.0.5:8000/`` and ``10.0.0.5:8000`` name the same engine."""
    return value.split("://", 1)[-1].rstrip("/")


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
