"""One NATS connection that never gives up, shared by every component that talks to NATS.

Engines, routers and observers all outlive NATS outages, so they all need the same
behaviour, and it used to be written twice (publisher and fleet subscriber) with small
differences. ``Connection`` owns it once:

* connect in the background, forever, with exponential backoff for the errors nats-py
  does not retry itself (a bad TLS set-up, a missing credentials file);
* while NATS has never been reached, warn once (then DEBUG), so a broken bus cannot flood
  an engine's log, and say what the component does meanwhile;
* after the first connect and after every reconnect, call the component's ``on_connect``
  hook (subscribe, ask the fleet to sync, re-send state); on a disconnect, its
  ``on_disconnect`` hook;
* errors on a live connection are logged at most once per ``error_log_every_s``.

The component supplies only what it does on connect. Use it from a running event loop::

    conn = Connection(settings, name="eagle-eye-router", role="router", on_connect=hook)
    conn.start()
    ...
    await conn.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

import nats
from nats.aio.client import Client as NatsClient

from eagle_eye.bus.connect import connect_options
from eagle_eye.settings import NatsSettings

log = logging.getLogger(__name__)

BACKOFF_START_S: Final = 0.25
BACKOFF_MAX_S: Final = 5.0
ERROR_LOG_EVERY_S: Final = 30.0

ConnectHook = Callable[[NatsClient, bool], Awaitable[None]]
"""Called with the client and ``True`` after the first connect, ``False`` after a reconnect."""
DisconnectHook = Callable[[], Awaitable[None]]


class Connection:
    """A NATS client that connects forever and tells its owner when it is (re)connected."""

    def __init__(
        self,
        settings: NatsSettings,
        *,
        name: str,
        role: str,
        on_connect: ConnectHook,
        on_disconnect: DisconnectHook | None = None,
        meanwhile: str = "retrying in the background",
        error_log_every_s: float = ERROR_LOG_EVERY_S,
    ) -> None:
        """``name`` shows in nats-server's connection list; ``role`` prefixes log lines;
        ``meanwhile`` says what the component does while NATS is unreachable."""
        self.settings = settings
        self.name = name
        self.role = role
        self.meanwhile = meanwhile
        self.connects = 0
        """Successful connects and reconnects."""
        self._on_connect = on_connect
        self._on_disconnect = on_disconnect
        self._error_log_every_s = error_log_every_s
        self._nc: NatsClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._warned_unreachable = False
        self._last_error_log_mono_s = -float("inf")

    @property
    def client(self) -> NatsClient | None:
        """The live client once connected (it may be reconnecting), else None."""
        return self._nc

    @property
    def connected(self) -> bool:
        nc = self._nc
        return nc is not None and nc.is_connected

    def start(self) -> None:
        """Begin connecting in the background. Never raises on an unreachable NATS."""
        if self._task is None:
            self._task = asyncio.create_task(self._connect_forever(), name=f"{self.name}-connect")

    async def wait_connected(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the first connect (and its hook) to finish."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._connected.wait(), timeout_s)
        return self._connected.is_set()

    async def flush(self, timeout_s: int) -> None:
        """Flush pending publishes if connected (best effort)."""
        nc = self._nc
        if nc is not None and nc.is_connected:
            with contextlib.suppress(Exception):
                await nc.flush(timeout=timeout_s)

    async def close(self) -> None:
        """Stop connecting and close the client. Idempotent."""
        self._closing = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()

    async def _connect_forever(self) -> None:
        """Connect once; nats-py then retries and reconnects forever by itself (it also
        retries a first connect that fails, reporting each failure to ``_on_error``). The
        loop only matters for errors nats-py raises instead of retrying."""
        delay_s = BACKOFF_START_S
        while not self._closing:
            try:
                nc = await nats.connect(
                    **connect_options(self.settings, name=self.name),
                    reconnected_cb=self._on_reconnected,
                    disconnected_cb=self._on_disconnected,
                    error_cb=self._on_error,
                )
            except Exception as exc:  # noqa: BLE001 - any failure means "try again later"
                await self._on_error(exc)
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, BACKOFF_MAX_S)
                continue
            self._nc = nc
            self.connects += 1
            await self._on_connect(nc, True)
            self._connected.set()
            return

    async def _on_reconnected(self) -> None:
        self.connects += 1
        nc = self._nc
        if nc is not None:
            await self._on_connect(nc, False)

    async def _on_disconnected(self) -> None:
        if not self._closing and self._on_disconnect is not None:
            await self._on_disconnect()

    async def _on_error(self, exc: Exception) -> None:
        if self._connected.is_set():
            now = time.monotonic()
            if now - self._last_error_log_mono_s >= self._error_log_every_s:
                self._last_error_log_mono_s = now
                log.warning("%s: NATS error: %r", self.role, exc)
            else:
                log.debug("%s: NATS error: %r", self.role, exc)
            return
        level = logging.DEBUG if self._warned_unreachable else logging.WARNING
        self._warned_unreachable = True
        log.log(
            level,
            "%s: NATS unreachable at %s (%s); %s",
            self.role,
            self.settings.display_url,
            exc or type(exc).__name__,
            self.meanwhile,
        )
