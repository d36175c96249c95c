"""``eagle-eye dashboard``: the live dashboard on its own, fed straight from NATS.

The router serves the same page at ``/dashboard`` with its routing figures; this
standalone mode is for an operator who wants to watch a fleet without (or beside) a
router: it holds its own ``FleetView`` through a ``FleetSubscriber`` (which asks every
publisher to re-send on connect, so the page is complete at once), and shows no router
latency figures. Bound to 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import click
from aiohttp import web

from eagle_eye.fleet.subscriber import FleetSubscriber
from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.dashboard.app import MOUNT_PREFIX, create_dashboard_app, mount_dashboard
from eagle_eye.observe.dashboard.state import DashboardConfig, DashboardState
from eagle_eye.settings import NatsSettings, SettingsError, nats_from_env

DEFAULT_PORT = 8050


def build_root_app(dashboard: web.Application) -> web.Application:
    """A root app with the dashboard mounted and ``/`` redirecting to it."""
    root = web.Application()

    async def index(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(MOUNT_PREFIX + "/")

    root.router.add_get("/", index)
    mount_dashboard(root, dashboard)
    return root


async def serve(
    nats: NatsSettings,
    *,
    host: str,
    port: int,
    prometheus_url: str | None,
    config: DashboardConfig,
    stop: asyncio.Event,
) -> None:
    """Run until ``stop`` is set; prints the URL once listening."""
    fleet = FleetView(stale_after_s=config.stale_after_s)
    subscriber = FleetSubscriber(
        nats, fleet, client_name="eagle-eye-dashboard", role="dashboard", meanwhile="retrying"
    )
    state = DashboardState(fleet, config=config)
    app = build_root_app(create_dashboard_app(state, prometheus_url=prometheus_url))
    runner = web.AppRunner(app, shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        url_host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        click.echo(f"dashboard: http://{url_host}:{bound[1]}{MOUNT_PREFIX}/", err=False)
        click.echo(f"dashboard: reading snapshots from NATS at {nats.display_url}")
        await subscriber.start()
        await stop.wait()
    finally:
        await subscriber.close()
        await runner.cleanup()


@click.command("dashboard")
@click.option("--nats", "nats_url", envvar="EAGLE_EYE_NATS_URL", help="NATS server URL(s).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="0 picks one.")
@click.option(
    "--prometheus",
    "prometheus_url",
    envvar="EAGLE_EYE_PROMETHEUS_URL",
    help="Prometheus base URL for history beyond the in-memory minutes.",
)
@click.option("--history-s", default=300.0, show_default=True, help="In-memory history, seconds.")
def dashboard(
    nats_url: str | None, host: str, port: int, prometheus_url: str | None, history_s: float
) -> None:
    """Serve the live web dashboard standalone, fed from NATS."""
    try:
        nats = nats_from_env(os.environ, nats_url)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    if nats is None:
        raise click.UsageError("give the NATS URL: --nats nats://HOST:4222 (or EAGLE_EYE_NATS_URL)")
    if not 10 <= history_s <= 86400:
        raise click.UsageError("--history-s must be between 10 and 86400")
    config = DashboardConfig(history_s=history_s)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await serve(
            nats, host=host, port=port, prometheus_url=prometheus_url, config=config, stop=stop
        )

    asyncio.run(main())
