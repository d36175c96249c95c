"""The I/O edge that keeps a ``FleetView`` current from NATS.

The seed's ``RouterSubscriber`` had to subscribe before the engines started or it missed
their first messages. This one publishes on ``eagle_eye.control.sync`` as soon as it is
subscribed (and after every reconnect); every publisher answers with its newest snapshot,
so a router that starts late, or comes back from a NATS outage, holds the whole fleet
within one round trip.

During an outage nothing here fails: the view keeps its last snapshots (which go stale,
so routing falls back to the router's own accounting) and nats-py reconnects forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Final

import nats
from nats.aio.client import Client as NatsClient

from eagle_eye import subjects
from eagle_eye.bus.connect import connect_options
from eagle_eye.route.fleet import FleetView
from eagle_eye.settings import NatsSettings
from eagle_eye.snapshot import Snapshot

log = logging.getLogger(__name__)

DEFAULT_FORGET_AFTER_S: Final = 300.0
"""Ranks silent this long while NATS is up are dropped (they vanished without ``stopping``)."""

SnapshotListener = Callable[[Snapshot], None]


class FleetSubscriber:
    """Subscribe to every snapshot subject and feed ``fleet``.

    Use ``async with FleetSubscriber(settings, fleet): ...`` or ``start()``/``close()``.
    ``listeners`` are called with each accepted snapshot (dashboards); they must be fast
    and must not raise (exceptions are logged and counted, never propagated).
    """

    def __init__(
        self,
        settings: NatsSettings,
        fleet: FleetView,
        *,
        base_subject: str = subjects.ROUTING_METRICS,
        client_name: str = "eagle-eye-router",
        forget_after_s: float = DEFAULT_FORGET_AFTER_S,
    ) -> None:
        self.settings = settings
        self.fleet = fleet
        self.base_subject = base_subject
        self.client_name = client_name
        self.forget_after_s = forget_after_s
        self.listeners: list[SnapshotListener] = []
        self.listener_errors = 0
        self.syncs_sent = 0
        self.connects = 0
        self._nc: NatsClient | None = None
        self._connector: asyncio.Task[None] | None = None
        self._janitor: asyncio.Task[None] | None = None
        self._connected_since_mono_s: float | None = None
        self._closing = False
        self._subscribed = asyncio.Event()

    @property
    def connected(self) -> bool:
        nc = self._nc
        return nc is not None and nc.is_connected

    async def start(self, *, wait_s: float = 0.0) -> FleetSubscriber:
        """Begin connecting in the background; optionally wait up to ``wait_s`` for it.

        Never raises on an unreachable NATS: the router serves static backends meanwhile.
        """
        self._connector = asyncio.create_task(self._connect_forever())
        self._janitor = asyncio.create_task(self._forget_loop())
        if wait_s > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._subscribed.wait(), wait_s)
        return self

    async def close(self) -> None:
        self._closing = True
        for task in (self._connector, self._janitor):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()

    async def __aenter__(self) -> FleetSubscriber:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def sync(self) -> None:
        """Ask every publisher to re-send its newest snapshot now."""
        nc = self._nc
        if nc is None or not nc.is_connected:
            return
        try:
            await nc.publish(subjects.SYNC, b"")
            await nc.flush(timeout=2)
            self.syncs_sent += 1
        except Exception as exc:  # noqa: BLE001 - best effort; publishers heartbeat anyway
            log.warning("router: sync request failed: %r", exc)

    async def _connect_forever(self) -> None:
        delay_s = 0.25
        warned = False
        while not self._closing:
            try:
                nc = await nats.connect(
                    **connect_options(self.settings, name=self.client_name),
                    reconnected_cb=self._on_reconnected,
                    disconnected_cb=self._on_disconnected,
                    error_cb=self._on_error,
                )
            except Exception as exc:  # noqa: BLE001 - any failure: log and retry forever
                level = logging.DEBUG if warned else logging.WARNING
                log.log(
                    level,
                    "router: NATS unreachable at %s (%s); serving static backends, retrying",
                    self.settings.display_url,
                    exc or type(exc).__name__,
                )
                warned = True
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 5.0)
                continue
            self._nc = nc
            for subject in subjects.consumer_subjects(self.base_subject):
                await nc.subscribe(subject, cb=self._on_message)
            self.connects += 1
            self._connected_since_mono_s = time.monotonic()
            log.info(
                "router: subscribed to %s.> at %s", self.base_subject, self.settings.display_url
            )
            await self.sync()
            self._subscribed.set()
            return

    async def _on_message(self, msg: Any) -> None:
        snapshot = self.fleet.ingest(msg.data, time.monotonic())
        if snapshot is None or not self.listeners:
            return
        for listener in self.listeners:
            try:
                listener(snapshot)
            except Exception:
                self.listener_errors += 1
                log.exception("router: snapshot listener failed")

    async def _on_reconnected(self) -> None:
        self.connects += 1
        self._connected_since_mono_s = time.monotonic()
        log.info("router: reconnected to NATS; asking the fleet to re-send")
        await self.sync()

    async def _on_disconnected(self) -> None:
        self._connected_since_mono_s = None
        if not self._closing:
            log.warning("router: lost NATS; routing on local accounting until it is back")

    async def _on_error(self, exc: Exception) -> None:
        log.debug("router: NATS error: %r", exc)

    async def _forget_loop(self) -> None:
        """Drop silent ranks, but only after NATS has been up long enough to have heard
        from every live publisher (heartbeats), so an outage never empties the fleet."""
        interval_s = max(1.0, min(30.0, self.forget_after_s / 4))
        while True:
            await asyncio.sleep(interval_s)
            since = self._connected_since_mono_s
            now = time.monotonic()
            if since is not None and self.connected and now - since > self.forget_after_s:
                dropped = self.fleet.forget_older_than(now, self.forget_after_s)
                if dropped:
                    log.info("router: forgot %d silent instance ranks", dropped)
