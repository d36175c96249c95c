"""``eagle-eye exporter``: subscribe to the fleet's snapshots and serve them on /metrics.

The I/O shell around ``exporter.FleetCollector``: a ``FleetSubscriber`` (both snapshot
subjects, plus a SYNC so the whole fleet is known at once) feeds a ``FleetView``, and an
aiohttp server renders the private registry on each scrape.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time

import click
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from eagle_eye.fleet.subscriber import FleetSubscriber
from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.exporter.families import ExporterMemory, FleetCollector, new_registry
from eagle_eye.settings import (
    DEFAULT_FORGET_AFTER_S,
    DEFAULT_READY_STALE_AFTER_S,
    NatsSettings,
    SettingsError,
    nats_from_env,
)
from eagle_eye.snapshot import Snapshot

log = logging.getLogger(__name__)

DEFAULT_PORT = 9464


class Exporter:
    """Subscriber + HTTP server. ``await start()``, read ``port``, ``await close()``."""

    def __init__(
        self,
        settings: NatsSettings,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        stale_after_s: float = DEFAULT_READY_STALE_AFTER_S,
        forget_after_s: float = DEFAULT_FORGET_AFTER_S,
    ) -> None:
        self.fleet = FleetView(stale_after_s=stale_after_s)
        self.memory = ExporterMemory()
        self.subscriber = FleetSubscriber(
            settings,
            self.fleet,
            client_name="eagle-eye-exporter",
            forget_after_s=forget_after_s,
            role="exporter",
            meanwhile="serving the last snapshots, retrying in the background",
        )
        self.subscriber.listeners.append(self._on_snapshot)
        self.registry = new_registry(
            [
                FleetCollector(
                    self.fleet,
                    self.memory,
                    connected=lambda: self.subscriber.connected,
                    stale_after_s=stale_after_s,
                )
            ]
        )
        self._host = host
        self._requested_port = port
        self._runner: web.AppRunner | None = None
        self.port = port

    def _on_snapshot(self, snapshot: Snapshot) -> None:
        self.memory.observe(snapshot, time.monotonic())

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {"nats_connected": self.subscriber.connected, "instances": len(self.fleet)}
        )

    async def start(self, *, wait_for_nats_s: float = 0.0) -> Exporter:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        # Bind the socket ourselves so port 0 works and the chosen port is known.
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._requested_port))
        self.port = int(sock.getsockname()[1])
        await web.SockSite(self._runner, sock).start()
        await self.subscriber.start(wait_s=wait_for_nats_s)
        return self

    async def close(self) -> None:
        await self.subscriber.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def _serve(exporter: Exporter) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await exporter.start()
    click.echo(f"eagle-eye exporter serving /metrics on port {exporter.port}")
    try:
        await stop.wait()
    finally:
        await exporter.close()


@click.command("exporter")
@click.option("--nats", "nats_url", envvar="EAGLE_EYE_NATS_URL", help="NATS server URL(s).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="0: any.")
@click.option(
    "--stale-after-s",
    default=DEFAULT_READY_STALE_AFTER_S,
    show_default=True,
    type=float,
    help="A ready rank with an older snapshot is not counted as a ready backend.",
)
@click.option(
    "--forget-after-s",
    default=300.0,
    show_default=True,
    type=float,
    help="Drop ranks silent this long (they vanished without saying stopping).",
)
def exporter(
    nats_url: str | None, host: str, port: int, stale_after_s: float, forget_after_s: float
) -> None:
    """Expose the NATS snapshots as Prometheus metrics (eagle_eye_*) on /metrics."""
    try:
        settings = nats_from_env(os.environ, nats_url)
    except SettingsError as exc:
        raise click.BadParameter(str(exc), param_hint="--nats") from None
    if settings is None:
        raise click.UsageError("give --nats URL (or set EAGLE_EYE_NATS_URL)")
    asyncio.run(
        _serve(
            Exporter(
                settings,
                host=host,
                port=port,
                stale_after_s=stale_after_s,
                forget_after_s=forget_after_s,
            )
        )
    )
