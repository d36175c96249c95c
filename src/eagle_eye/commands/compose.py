"""Wiring shared by the commands that run a router: the event loop, signals, the dashboard."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import click

from eagle_eye.route.gateway import Router

log = logging.getLogger(__name__)


def run_loop(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``main`` on uvloop when it is installed (faster sockets), else asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
        return
    uvloop.run(main())


def mount_dashboard(router: Router, *, prometheus_url: str | None = None) -> bool:
    """Serve the live web dashboard at ``/dashboard/`` on the router's own app, fed by the
    router's fleet view and its request statistics. Call before ``router.start()``.

    The dashboard is optional: without its module (a trimmed install) the router runs
    without it and this returns False.
    """
    try:
        from eagle_eye.observe.dashboard.app import create_dashboard_app
        from eagle_eye.observe.dashboard.app import mount_dashboard as mount
        from eagle_eye.observe.dashboard.state import DashboardConfig, DashboardState
    except ImportError as exc:
        log.info("router: dashboard not available (%s)", exc)
        return False
    state = DashboardState(
        router.fleet,
        router=router,
        config=DashboardConfig(stale_after_s=router.config.policy_config.stale_after_s),
    )
    mount(router.app, create_dashboard_app(state, prometheus_url=prometheus_url))
    return True


async def serve_until_signalled(
    router: Router, *, on_closed: Sequence[Callable[[], object]] = ()
) -> None:
    """Start ``router``, wait for SIGINT/SIGTERM, close it, then run ``on_closed`` (in a
    thread: flushing the trace exporter may block)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await router.start()
    # Move everything allocated at start-up out of the collector's way: full collections
    # then scan only what requests allocate, which keeps GC pauses out of the p99.
    gc.collect()
    gc.freeze()
    click.echo(f"eagle-eye router listening on {router.url} (policy {router.default_policy.name})")
    if router.metrics_port is not None:
        click.echo(f"metrics on port {router.metrics_port}")
    try:
        await stop.wait()
    finally:
        await router.close()
        for callback in on_closed:
            await asyncio.to_thread(callback)
