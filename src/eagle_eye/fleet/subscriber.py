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
from typing import Any

from nats.aio.client import Client as NatsClient

from eagle_eye import subjects
from eagle_eye.bus.connection import Connection
from eagle_eye.fleet.view import FleetView
from eagle_eye.settings import DEFAULT_FORGET_AFTER_S, NatsSettings
from eagle_eye.snapshot import Snapshot

log = logging.getLogger(__name__)


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
        role: str = "router",
        meanwhile: str = "serving static backends, retrying in the background",
    ) -> None:
        self.settings = settings
        self.fleet = fleet
        self.base_subject = base_subject
        self.forget_after_s = forget_after_s
        self.role = role
        self.listeners: list[SnapshotListener] = []
        self.listener_errors = 0
        self.syncs_sent = 0
        self.connection = Connection(
            settings,
            name=client_name,
            role=role,
            on_connect=self._on_connect,
            on_disconnect=self._on_disconnect,
            meanwhile=meanwhile,
        )
        self._janitor: asyncio.Task[None] | None = None
        self._connected_since_mono_s: float | None = None

    @property
    def connected(self) -> bool:
        return self.connection.connected

    @property
    def connects(self) -> int:
        return self.connection.connects

    async def start(self, *, wait_s: float = 0.0) -> FleetSubscriber:
        """Begin connecting in the background; optionally wait up to ``wait_s`` for the
        subscription and the first sync. Never raises on an unreachable NATS."""
        self.connection.start()
        self._janitor = asyncio.create_task(self._forget_loop())
        if wait_s > 0:
            await self.connection.wait_connected(wait_s)
        return self

    async def close(self) -> None:
        janitor, self._janitor = self._janitor, None
        if janitor is not None:
            janitor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await janitor
        await self.connection.close()

    async def __aenter__(self) -> FleetSubscriber:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def sync(self) -> None:
        """Ask every publisher to re-send its newest snapshot now."""
        nc = self.connection.client
        if nc is None or not nc.is_connected:
            return
        try:
            await nc.publish(subjects.SYNC, b"")
            await nc.flush(timeout=2)
            self.syncs_sent += 1
        except Exception as exc:  # noqa: BLE001 - best effort; publishers heartbeat anyway
            log.warning("%s: sync request failed: %r", self.role, exc)

    async def _on_connect(self, nc: NatsClient, first: bool) -> None:
        """Subscribe (first connect only: nats-py restores subscriptions on reconnect),
        then ask the fleet to re-send, so the view is whole within one round trip."""
        self._connected_since_mono_s = time.monotonic()
        if first:
            for subject in subjects.consumer_subjects(self.base_subject):
                await nc.subscribe(subject, cb=self._on_message)
            log.info(
                "%s: subscribed to %s.> at %s",
                self.role,
                self.base_subject,
                self.settings.display_url,
            )
        else:
            log.info("%s: reconnected to NATS; asking the fleet to re-send", self.role)
        await self.sync()

    async def _on_disconnect(self) -> None:
        self._connected_since_mono_s = None
        log.warning("%s: lost NATS; the last snapshots go stale until it is back", self.role)

    async def _on_message(self, msg: Any) -> None:
        snapshot = self.fleet.ingest(msg.data, time.monotonic())
        if snapshot is None or not self.listeners:
            return
        for listener in self.listeners:
            try:
                listener(snapshot)
            except Exception:
                self.listener_errors += 1
                log.exception("%s: snapshot listener failed", self.role)

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
                    log.info("%s: forgot %d silent instance ranks", self.role, dropped)
