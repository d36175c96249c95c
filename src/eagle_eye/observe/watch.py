"""``eagle-eye watch``: see the live snapshot feed before any router exists.

It subscribes to the flat and the hierarchical snapshot subjects, asks every publisher
for its current state (``SYNC``) so the view is complete within a round trip, and prints
either a refreshing table (one row per instance rank) or one JSON object per message.

Dependency-light on purpose: nats-py and the standard library, so it runs in a vLLM
image that holds only the engine-side install. With no NATS URL it starts an embedded
``nats-server`` (that binary comes with the ``server`` extra) and says where.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import click
import nats
from nats.aio.client import Client as NatsClient

from eagle_eye import subjects
from eagle_eye.bus.connect import connect_options
from eagle_eye.settings import NatsSettings, SettingsError, nats_from_env
from eagle_eye.snapshot import Snapshot, SnapshotError, decode, to_dict

_CLEAR_SCREEN = "\x1b[H\x1b[2J"


@dataclass(slots=True)
class FleetTable:
    """The newest snapshot of every instance rank, plus what was dropped (pure)."""

    forget_after_s: float = 60.0
    """Rows silent for this long disappear (a crashed engine never says ``stopping``)."""
    latest: dict[tuple[str, int], tuple[Snapshot, float]] = field(default_factory=dict)
    received: int = 0
    invalid: int = 0
    last_error: str | None = None

    def add(self, data: bytes, received_s: float) -> Snapshot | None:
        """Decode ``data``; keep it if it is the newest for its rank. None if invalid."""
        self.received += 1
        try:
            snapshot = decode(data)
        except SnapshotError as exc:
            self.invalid += 1
            self.last_error = str(exc)
            return None
        key = (snapshot.instance_id, snapshot.dp_rank)
        previous = self.latest.get(key)
        # A lower seq from the same rank is a reordered old message, unless the engine
        # restarted (seq resets): then its timestamp is newer.
        if (
            previous is None
            or snapshot.seq > previous[0].seq
            or snapshot.timestamp_s > previous[0].timestamp_s
        ):
            self.latest[key] = (snapshot, received_s)
        return snapshot

    def expire(self, now_s: float) -> None:
        for key, (_, seen_s) in list(self.latest.items()):
            if now_s - seen_s > self.forget_after_s:
                del self.latest[key]


_COLUMNS: tuple[tuple[str, int], ...] = (
    ("INSTANCE", 28),
    ("DP", 3),
    ("MODEL", 20),
    ("STATE", 8),
    ("RUN", 5),
    ("WAIT", 5),
    ("KV%", 6),
    ("TTFT_MS", 8),
    ("ITL_MS", 7),
    ("GEN_TOK/S", 9),
    ("SEQ", 8),
    ("AGE_S", 6),
)


def render_table(table: FleetTable, now_s: float) -> str:
    """The fleet as fixed-width text, sorted by model then instance (pure)."""
    lines = ["  ".join(name.ljust(width) for name, width in _COLUMNS).rstrip()]
    rows = sorted(table.latest.values(), key=lambda r: (r[0].model, r[0].instance_id))
    for snapshot, seen_s in rows:
        cells = (
            snapshot.instance_id,
            str(snapshot.dp_rank),
            snapshot.model,
            snapshot.state.value,
            str(snapshot.running),
            str(snapshot.waiting),
            _fmt(snapshot.kv_usage, 100.0, 1),
            _fmt(snapshot.ttft_recent_s, 1000.0, 1),
            _fmt(snapshot.itl_recent_s, 1000.0, 1),
            _fmt(snapshot.generation_tokens_per_s, 1.0, 0),
            str(snapshot.seq),
            f"{max(0.0, now_s - seen_s):.1f}",
        )
        lines.append(
            "  ".join(
                _clip(cell, width).ljust(width)
                for cell, (_, width) in zip(cells, _COLUMNS, strict=True)
            ).rstrip()
        )
    if not rows:
        lines.append("(no instances yet: waiting for snapshots)")
    footer = f"{len(rows)} instance rank(s), {table.received} message(s)"
    if table.invalid:
        footer += f", {table.invalid} invalid (last: {table.last_error})"
    lines.append(footer)
    return "\n".join(lines)


def json_line(subject: str, snapshot: Snapshot) -> str:
    """One ``--json`` output line: the decoded snapshot plus the subject it came on."""
    return json.dumps({"subject": subject, **to_dict(snapshot)}, separators=(",", ":"))


def _fmt(value: float | None, scale: float, digits: int) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value * scale:.{digits}f}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions:
    """What ``run_watch`` does; the CLI flags map onto these one to one."""

    nats: NatsSettings
    subject: str = subjects.ROUTING_METRICS
    as_json: bool = False
    interval_s: float = 1.0
    count: int | None = None
    """Stop after this many valid snapshots (scripts and tests)."""
    duration_s: float | None = None
    """Stop after this many seconds."""
    forget_after_s: float = 60.0


class _Feed:
    """nats-py's callbacks for one watch: fold each message into the table (and print it
    with ``--json``), stop after ``count`` snapshots, and report trouble once per kind."""

    def __init__(
        self,
        options: WatchOptions,
        out: TextIO,
        table: FleetTable,
        stop: asyncio.Event,
        clock: Callable[[], float],
    ) -> None:
        self._options = options
        self._out = out
        self._table = table
        self._stop = stop
        self._clock = clock
        self._valid = 0
        self._announced: set[str] = set()
        self.nc: NatsClient | None = None
        """Set once connected; a reconnect re-sends SYNC on it."""

    async def on_message(self, msg: Any) -> None:
        snapshot = self._table.add(msg.data, self._clock())
        if snapshot is None:
            return
        self._valid += 1
        if self._options.as_json:
            self._out.write(json_line(msg.subject, snapshot) + "\n")
            self._out.flush()
        if self._options.count is not None and self._valid >= self._options.count:
            self._stop.set()

    def _note(self, kind: str, message: str) -> None:
        # One line per kind of trouble: nats-py would otherwise print a traceback per retry.
        if kind not in self._announced:
            self._announced.add(kind)
            print(f"eagle-eye watch: {message}", file=sys.stderr, flush=True)

    async def on_error(self, exc: Exception) -> None:
        self._note("error", f"NATS at {self._options.nats.display_url}: {exc!r} (retrying)")

    async def on_disconnected(self) -> None:
        if self._stop.is_set():
            return
        self._announced.discard("reconnected")
        self._note("disconnected", "disconnected from NATS; reconnecting")

    async def on_reconnected(self) -> None:
        self._announced.discard("disconnected")
        self._announced.discard("error")
        self._note("reconnected", "reconnected to NATS")
        if self.nc is not None:  # a reconnect comes after the first connect
            with contextlib.suppress(Exception):
                await self.nc.publish(subjects.SYNC, b"")


async def run_watch(
    options: WatchOptions,
    out: TextIO,
    *,
    stop: asyncio.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> FleetTable:
    """Subscribe, send SYNC, print until ``count``/``duration_s``/``stop``. Returns the view."""
    stop = stop or asyncio.Event()
    table = FleetTable(forget_after_s=options.forget_after_s)
    feed = _Feed(options, out, table, stop, clock)
    deadline = None if options.duration_s is None else clock() + options.duration_s
    connecting = nats.connect(
        **connect_options(options.nats, name="eagle-eye-watch"),
        error_cb=feed.on_error,
        disconnected_cb=feed.on_disconnected,
        reconnected_cb=feed.on_reconnected,
    )
    # nats-py retries an unreachable server forever; only --duration bounds the wait.
    nc = feed.nc = await asyncio.wait_for(
        connecting, None if deadline is None else deadline - clock()
    )
    try:
        for subject in subjects.consumer_subjects(options.subject):
            await nc.subscribe(subject, cb=feed.on_message)
        await nc.publish(subjects.SYNC, b"")
        await nc.flush()
        await _refresh_until_stopped(options, out, table, stop, clock, deadline)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await nc.drain()
    return table


async def _refresh_until_stopped(
    options: WatchOptions,
    out: TextIO,
    table: FleetTable,
    stop: asyncio.Event,
    clock: Callable[[], float],
    deadline: float | None,
) -> None:
    """Every ``interval_s``: forget silent rows and (without ``--json``) print the table."""
    clear = not options.as_json and out.isatty()
    while not stop.is_set():
        wait_s = options.interval_s
        if deadline is not None:
            wait_s = min(wait_s, max(0.0, deadline - clock()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)
        table.expire(clock())
        if not options.as_json:
            out.write((_CLEAR_SCREEN if clear else "") + render_table(table, clock()) + "\n")
            if not clear:
                out.write("\n")
            out.flush()
        if deadline is not None and clock() >= deadline:
            break


@click.command()
@click.option(
    "--nats",
    "nats_url",
    envvar="EAGLE_EYE_NATS_URL",
    help="NATS server URL(s), comma-separated. Default: $EAGLE_EYE_NATS_URL, "
    "else an embedded nats-server.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per snapshot.")
@click.option(
    "--subject",
    default=subjects.ROUTING_METRICS,
    show_default=True,
    help="Base snapshot subject (its hierarchical children are watched too).",
)
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Table refresh period, seconds.",
)
@click.option("--count", type=click.IntRange(min=1), help="Exit after N snapshots.")
@click.option(
    "--duration", "duration_s", type=click.FloatRange(min=0), help="Exit after N seconds."
)
def watch(
    nats_url: str | None,
    as_json: bool,
    subject: str,
    interval_s: float,
    count: int | None,
    duration_s: float | None,
) -> None:
    """Print the live snapshots of every instance: a table, or JSON lines with --json."""
    embedded = None
    try:
        settings = nats_from_env(os.environ, url=nats_url or "")
    except SettingsError as exc:
        raise click.BadParameter(str(exc), param_hint="--nats") from None
    if settings is None:
        from eagle_eye.bus.embedded import EmbeddedNats, EmbeddedNatsError

        try:
            embedded = EmbeddedNats().start()
        except EmbeddedNatsError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(
            f"eagle-eye watch: no --nats or EAGLE_EYE_NATS_URL; started an embedded NATS at "
            f"{embedded.url} (point engines at it with EAGLE_EYE_NATS_URL={embedded.url})",
            err=True,
        )
        settings = nats_from_env({}, url=embedded.url)
        assert settings is not None
    options = WatchOptions(
        nats=settings,
        subject=subject,
        as_json=as_json,
        interval_s=interval_s,
        count=count,
        duration_s=duration_s,
    )
    try:
        asyncio.run(_main(options))
    except asyncio.TimeoutError:
        raise click.ClickException(
            f"no NATS reachable at {settings.display_url} within --duration {duration_s}s"
        ) from None
    except (OSError, nats.errors.Error) as exc:
        raise click.ClickException(
            f"cannot watch NATS at {settings.display_url}: {exc or type(exc).__name__}"
        ) from None
    finally:
        if embedded is not None:
            embedded.close()


async def _main(options: WatchOptions) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await run_watch(options, sys.stdout, stop=stop)
