"""The engine-side publisher: hand it a sample per step, it keeps NATS up to date.

Why it is shaped like this: ``offer()`` runs on the engine's step path (vLLM's output
handler), so it only stores a reference and, at most once per send, pokes a background
thread. Everything slow (building the snapshot, JSON, the socket, reconnecting) happens
on that thread's own event loop. Only the newest sample per instance matters to a
router, so samples that arrive faster than they can be sent are coalesced, not queued:
memory stays constant through any NATS outage.

One ``Publisher`` holds one NATS connection and serves any number of ``Channel``s (one
per engine rank: vLLM's data-parallel ranks in one process, or the simulator's engines).
This module is the sender thread and its loop; what the step path touches
(``InstanceIdentity``, ``Sample``, ``Channel``, ``ewma``) is in ``publish/channel.py`` and
re-exported here, so ``eagle_eye.publish.publisher`` stays the one import for both.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import math
import threading
import time
import weakref
from dataclasses import dataclass, replace
from typing import Any, Final

from nats.aio.client import Client as NatsClient

from eagle_eye import subjects
from eagle_eye.bus.connection import Connection
from eagle_eye.publish.channel import PAUSE_S, Channel, InstanceIdentity
from eagle_eye.settings import NatsSettings
from eagle_eye.snapshot import EngineState, SnapshotError, encode

log = logging.getLogger(__name__)

_POLL_MIN_S: Final = 0.0002
_POLL_MAX_S: Final = 0.004
_WAKE_MARGIN_S: Final = 0.0003
"""While samples keep coming, the sender wakes by itself instead of being woken per
sample: just after the next step is expected (the step period measured from the samples,
plus a margin for jitter), but never more than 4 ms later, so a step that comes early
or an engine stepping irregularly waits at most that long. A step later than expected is
looked for again after 0.2 ms, doubling up to 4 ms. So engines stepping every few
milliseconds get one message per step for about one wake-up per step, and nothing waits
longer than 4 ms. A wake-up from the engine's step path would be a socket write, which
releases the GIL in the middle of ``record()``: the sender thread then takes it for its
whole send (~100 us), which showed as record() p99 of 100-250 us. Polling costs the
engine nothing."""
_BUSY_LINGER_S: Final = PAUSE_S
"""Keep polling this long after the last sample before going back to wake-ups, so an
engine stepping steadily, even slowly, never pays for a wake-up."""


@dataclass(slots=True)
class PublisherStats:
    """Counters a publisher keeps about itself (exposed in logs, ``bench`` and tests)."""

    sent: int = 0
    """Snapshots handed to the NATS connection."""
    coalesced: int = 0
    """Samples replaced by a newer one before they were sent."""
    dropped: int = 0
    """Send attempts skipped because NATS was not connected (the newest is sent later)."""
    failed: int = 0
    """Snapshots that could not be encoded or published."""
    offer_errors: int = 0
    """Exceptions caught on the engine side (never propagated into the engine)."""
    connects: int = 0
    syncs: int = 0
    wakeups: int = 0
    """Times the sender thread woke up (each costs CPU: the benchmark reports per step)."""


class Publisher:
    """Background NATS sender shared by the channels of one process.

    ``settings`` None makes an inert publisher: channels accept samples and nothing is
    sent (the plugin uses this when no NATS URL is configured).
    """

    def __init__(
        self,
        settings: NatsSettings | None,
        *,
        subject: str = subjects.ROUTING_METRICS,
        subject_mode: subjects.SubjectMode = subjects.SubjectMode.FLAT,
        heartbeat_s: float = 1.0,
        client_name: str = "eagle-eye-publisher",
    ) -> None:
        self._settings = settings
        self._subject = subject
        self._subject_mode = subject_mode
        self._heartbeat_s = heartbeat_s
        self._client_name = client_name
        self._channels: list[Channel] = []
        self._channels_lock = threading.Lock()
        self.stats = PublisherStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._wake_pending = False
        self._sender_idle = True
        """True while the sender waits for a wake-up; False while it polls (busy engine)."""
        self._shutdown_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None
        self._connected = threading.Event()
        self._stopped = threading.Event()
        if settings is not None:
            self._start_thread()
            _LIVE_PUBLISHERS.add(self)

    # -- engine side -------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self._settings is not None

    @property
    def stopping(self) -> bool:
        """True once ``close()`` began."""
        return self._stopping

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and conn.connected

    def wait_connected(self, timeout_s: float) -> bool:
        """Block until the first connection is up (for tools and tests, not the engine)."""
        return self._connected.wait(timeout_s)

    def channel(self, identity: InstanceIdentity) -> Channel:
        """A new lane for one engine rank; its first message says ``loading``."""
        subject = subjects.snapshot_subject(
            self._subject,
            self._subject_mode,
            model=identity.model,
            instance_id=identity.instance_id,
            dp_rank=identity.dp_rank,
        )
        channel = Channel(self, identity, subject)
        with self._channels_lock:
            self._channels.append(channel)
        self._wake_threadsafe()
        return channel

    def remove(self, channel: Channel, *, final_state: EngineState = EngineState.STOPPING) -> None:
        """Send ``final_state`` for ``channel`` (best effort), then forget it."""
        channel.offer(replace(channel.latest, state=final_state, monotonic_s=time.monotonic()))
        loop = self._loop
        if loop is not None and not self._stopping and loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self._send_one(channel), loop)
            try:
                future.result(timeout=1.0)
            except Exception:  # noqa: BLE001 - best effort on the way out
                log.debug("final snapshot for %s not sent", channel.identity.instance_id)
        with self._channels_lock:
            if channel in self._channels:
                self._channels.remove(channel)

    def _wake_threadsafe(self) -> None:
        # A busy sender wakes by itself within _POLL_MAX_S.
        if self._wake_pending or not self._sender_idle or self._loop is None:
            return
        if not self.connected:  # nothing can go out; the reconnect wakes the sender
            return
        self._wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._set_wake)
        except RuntimeError:  # loop closed during shutdown
            self._wake_pending = False

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # -- lifecycle ---------------------------------------------------------------------

    def _start_thread(self) -> None:
        started = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._wake = asyncio.Event()
            started.set()
            try:
                loop.run_until_complete(self._run())
            except Exception:
                log.exception("eagle-eye publisher stopped on an unexpected error")
            finally:
                _cancel_leftover_tasks(loop)
                self._stopped.set()
                loop.close()

        self._thread = threading.Thread(target=main, name="eagle-eye-publisher", daemon=True)
        self._thread.start()
        started.wait(5.0)

    def close(self, timeout_s: float = 2.0) -> None:
        """Publish ``stopping`` for every channel, flush, disconnect. Idempotent."""
        if self._stopping or self._loop is None:
            return
        loop = self._loop
        try:
            future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            future.result(timeout=timeout_s)
        except Exception:
            log.debug("eagle-eye publisher did not shut down cleanly", exc_info=True)
        self._stopping = True
        if loop.is_running():
            loop.call_soon_threadsafe(self._set_wake)
        if self._thread is not None:
            self._thread.join(timeout_s)
        _LIVE_PUBLISHERS.discard(self)

    async def _shutdown(self) -> None:
        self._shutdown_task = asyncio.current_task()
        now = time.monotonic()
        for channel in self._snapshot_channels():
            channel._latest = replace(channel.latest, state=EngineState.STOPPING, monotonic_s=now)
            channel._unsent = True
        await self._send_due(force_all=True)
        self._stopping = True
        if self._conn is not None:
            await self._conn.flush(timeout_s=1)
            await self._conn.close()
        self._set_wake()

    # -- sender thread -----------------------------------------------------------------

    def _snapshot_channels(self) -> list[Channel]:
        with self._channels_lock:
            return list(self._channels)

    async def _run(self) -> None:
        assert self._wake is not None and self._settings is not None
        self._conn = Connection(
            self._settings,
            name=self._client_name,
            role="eagle-eye",
            on_connect=self._on_connect,
            meanwhile="the engine keeps serving, retrying in the background",
        )
        self._conn.start()
        last_fresh_mono = -math.inf
        delay_s = _POLL_MIN_S
        misses = 0
        while not self._stopping:
            if self._sender_idle:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._heartbeat_s / 4)
            else:
                await asyncio.sleep(delay_s)
            self._wake.clear()
            self._wake_pending = False
            self.stats.wakeups += 1
            if self.stopping:
                break
            await self._send_due(force_all=False)
            now_mono = time.monotonic()
            if not self.connected:
                # Nothing can go out: sleep until the reconnect (or a heartbeat) wakes
                # us, instead of polling through the outage.
                self._sender_idle, last_fresh_mono = True, -math.inf
                continue
            if now_mono - last_fresh_mono < _BUSY_LINGER_S:
                self._sender_idle = False
                fresh, due_mono = self._look(now_mono)
                if fresh:
                    last_fresh_mono, misses = now_mono, 0
                else:
                    misses += 1
                if due_mono is None:  # a step is late, or its period not known yet
                    delay_s = min(_POLL_MAX_S, _POLL_MIN_S * 2**misses)
                else:
                    delay_s = due_mono + _WAKE_MARGIN_S - now_mono
                    delay_s = min(_POLL_MAX_S, max(_POLL_MIN_S, delay_s))
                continue
            # Say "idle" first, then look: an offer() that saw "busy" and skipped the
            # wake-up is caught by this look; a later one sees "idle".
            self._sender_idle = True
            if self._look(now_mono)[0]:
                self._sender_idle = False
                last_fresh_mono, delay_s, misses = now_mono, _POLL_MIN_S, 0
        # _shutdown() sets _stopping before it closes the connection; the loop above
        # sees that first. Let the close finish before the loop is torn down.
        if self._shutdown_task is not None:  # bounded: a dead NATS must not hang us
            await asyncio.wait({self._shutdown_task}, timeout=2.0)

    def _look(self, now_mono_s: float) -> tuple[bool, float | None]:
        """Whether any channel got a sample since the last look, and when the next one is
        due: the earliest upcoming step of any channel, or None when a channel's step is
        overdue (or no period is known yet), so the caller polls for it instead."""
        fresh = False
        due: float | None = None
        for channel in self._snapshot_channels():
            fresh = channel.look(now_mono_s) or fresh
            next_s = channel.next_sample_due_s
            if next_s is None:
                continue
            if next_s + _WAKE_MARGIN_S < now_mono_s:
                if now_mono_s - next_s < _BUSY_LINGER_S:  # late: poll for it
                    return fresh, None
                continue  # quiet for a while: the linger timeout covers it
            due = next_s if due is None else min(due, next_s)
        return fresh, due

    async def _send_due(self, *, force_all: bool) -> None:
        now_mono = time.monotonic()
        for channel in self._snapshot_channels():
            heartbeat_due = now_mono - channel._last_sent_mono >= self._heartbeat_s
            if force_all or channel._unsent or channel._force or heartbeat_due:
                await self._send_one(channel, now_mono)

    async def _send_one(self, channel: Channel, now_mono: float | None = None) -> None:
        nc = self._conn.client if self._conn is not None else None
        now_mono = time.monotonic() if now_mono is None else now_mono
        if nc is None or not nc.is_connected:
            if channel._unsent:
                self.stats.dropped += 1
            return
        channel._unsent = False
        channel._force = False
        try:
            data = encode(channel.build_snapshot(time.time(), now_mono))
            await nc.publish(channel.subject, data)
        except (SnapshotError, ValueError, TypeError) as exc:
            self.stats.failed += 1
            _log_limited(f"eagle-eye: snapshot for {channel.identity.instance_id} invalid: {exc}")
        except Exception as exc:  # noqa: BLE001 - connection errors; the next send retries
            self.stats.failed += 1
            channel._unsent = True  # the next send retries
            _log_limited(f"eagle-eye: publish failed: {exc!r}")
        else:
            self.stats.sent += 1
        channel.mark_sent(now_mono)

    async def _on_connect(self, nc: NatsClient, first: bool) -> None:
        """Answer sync requests from now on and re-send every channel's state."""
        self.stats.connects += 1
        if first:
            await nc.subscribe(subjects.SYNC, cb=self._on_sync)
            assert self._settings is not None
            log.info("eagle-eye: publishing to NATS at %s", self._settings.display_url)
            self._connected.set()
        else:
            log.info("eagle-eye: reconnected to NATS")
        self._mark_all_unsent()

    def _mark_all_unsent(self) -> None:
        for channel in self._snapshot_channels():
            channel._force = True
        self._set_wake()

    async def _on_sync(self, _msg: Any) -> None:
        self.stats.syncs += 1
        self._mark_all_unsent()


def _cancel_leftover_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still running (a shutdown stuck on a dead NATS, nats-py's own
    tasks) and let it unwind, so closing the loop prints no "Task was destroyed" errors."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    with contextlib.suppress(Exception):
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


_LIVE_PUBLISHERS: weakref.WeakSet[Publisher] = weakref.WeakSet()
_last_log_s = 0.0


def _log_limited(message: str, every_s: float = 30.0) -> None:
    """Log at most one warning per ``every_s`` so a broken bus cannot flood engine logs."""
    global _last_log_s
    now = time.monotonic()
    if now - _last_log_s >= every_s:
        _last_log_s = now
        log.warning(message)
    else:
        log.debug(message)


@atexit.register
def _close_all() -> None:
    for publisher in list(_LIVE_PUBLISHERS):
        publisher.close(timeout_s=1.0)
