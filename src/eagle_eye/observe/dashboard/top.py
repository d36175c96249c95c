"""``eagle-eye top``: the fleet in a terminal, in the spirit of ``htop`` and ``nvtop``.

It keeps its own ``FleetView`` from NATS (through the router's ``FleetSubscriber``, which
asks every publisher to re-send on connect, so the screen fills at once) and samples it
with the same ``DashboardState`` as the web dashboard, so both show the same numbers.

The screen is built by pure functions (``render`` returns styled lines for a given size)
and drawn with the standard library's ``curses``; keys:

* ``<`` / ``>`` move the sort column, ``I`` inverts the order (as in htop);
* ``i`` instance, ``m`` model, ``s`` state, ``r`` running, ``w`` waiting, ``k`` KV
  cache, ``t`` tokens/s, ``f`` TTFT, ``l`` ITL, ``h`` prefix hits, ``e`` preemptions,
  ``a`` snapshot age: sort by that column (the same key again inverts);
* ``p`` pauses the display, ``q`` (or Ctrl-C) quits.
"""

from __future__ import annotations

import asyncio
import contextlib
import curses
import locale
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

import click

from eagle_eye.fleet.subscriber import FleetSubscriber
from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.dashboard.state import DashboardConfig, DashboardState, Frame, InstanceRow
from eagle_eye.settings import NatsSettings, SettingsError, nats_from_env


class Style(str, Enum):
    """How a span is drawn; the curses layer maps each to colours."""

    NORMAL = "normal"
    TITLE = "title"
    HEADER = "header"
    DIM = "dim"
    GOOD = "good"
    WARN = "warn"
    BAD = "bad"
    BAR_GOOD = "bar_good"
    BAR_WARN = "bar_warn"
    BAR_BAD = "bar_bad"
    KEY = "key"


Span = tuple[str, Style]
Line = list[Span]


@dataclass(frozen=True, slots=True)
class Column:
    title: str
    width: int
    key: str
    """The ``InstanceRow`` attribute sorted on."""
    shortcut: str
    left: bool = False


COLUMNS: Final = (
    Column("INSTANCE", 22, "key", "i", left=True),
    Column("MODEL", 16, "model", "m", left=True),
    Column("STATE", 11, "state", "s", left=True),
    Column("RUN", 5, "running", "r"),
    Column("WAIT", 5, "waiting", "w"),
    Column("KV%", 6, "kv_usage", "k"),
    Column("TOK/S", 7, "tokens_per_s", "t"),
    Column("TTFT", 8, "ttft_recent_s", "f"),
    Column("ITL", 7, "itl_recent_s", "l"),
    Column("HIT%", 6, "prefix_hit_rate", "h"),
    Column("PREEMPT", 8, "preemptions_total", "e"),
    Column("AGE", 6, "age_s", "a"),
)
_BY_SHORTCUT: Final = {c.shortcut: i for i, c in enumerate(COLUMNS)}
_TEXT_KEYS: Final = {"key", "model", "state"}


@dataclass(slots=True)
class View:
    """What the user chose: sort column, order, pause."""

    sort_index: int = 0
    descending: bool = False
    paused: bool = False

    def handle_key(self, key: str) -> bool:
        """Apply one key press; False means quit."""
        if key in ("q", "Q"):
            return False
        if key == ">":
            self._sort(min(len(COLUMNS) - 1, self.sort_index + 1))
        elif key == "<":
            self._sort(max(0, self.sort_index - 1))
        elif key == "I":
            self.descending = not self.descending
        elif key == "p":
            self.paused = not self.paused
        elif key in _BY_SHORTCUT:
            index = _BY_SHORTCUT[key]
            if index == self.sort_index:
                self.descending = not self.descending
            else:
                self._sort(index)
        return True

    def _sort(self, index: int) -> None:
        self.sort_index = index
        # Numbers read best largest first (the busiest engine on top), names A-Z.
        self.descending = COLUMNS[index].key not in _TEXT_KEYS


def sort_rows(rows: list[InstanceRow], view: View) -> list[InstanceRow]:
    """Rows in display order; missing values always sort last, ties by instance key."""
    key = COLUMNS[view.sort_index].key
    present = [r for r in rows if getattr(r, key) is not None]
    missing = [r for r in rows if getattr(r, key) is None]
    present.sort(key=lambda r: r.key)
    present.sort(key=lambda r: getattr(r, key), reverse=view.descending)
    missing.sort(key=lambda r: r.key)
    return present + missing


def render(
    frame: Frame | None,
    view: View,
    *,
    width: int,
    height: int,
    source: str,
    connected: bool,
    now_wall_s: float,
    unicode: bool = True,
    message: str | None = None,
) -> list[Line]:
    """The whole screen as styled lines (at most ``height``, each at most ``width``).

    ``unicode`` False keeps to ASCII (terminals without a UTF-8 locale)."""
    clock = time.strftime("%H:%M:%S", time.localtime(now_wall_s))
    status = "connected" if connected else "connecting"
    title = f" Eagle Eye top  {source} ({status})"
    if view.paused:
        title += "  [paused]"
    room = max(0, width - len(clock) - 1)
    lines: list[Line] = [[(_fit(title, room).ljust(room) + clock + " ", Style.TITLE)]]
    if frame is None:
        lines.append([(" waiting for the first snapshot", Style.DIM)])
        return _clip(lines, width, height)
    f = frame.fleet
    kv = "-" if f.kv_usage is None else f"{f.kv_usage * 100:.0f}%"
    others = [f"{n} {s}" for s, n in f.by_state.items() if n and s != "ready"]
    lines.append(
        [
            (" Instances ", Style.DIM),
            (f"{f.by_state.get('ready', 0)}/{f.instances} ready", Style.NORMAL),
            (f" ({', '.join(others)})" if others else "", Style.WARN),
            ("  Running ", Style.DIM),
            (str(f.running), Style.NORMAL),
            ("  Waiting ", Style.DIM),
            (str(f.waiting), Style.WARN if f.waiting else Style.NORMAL),
            ("  Tokens/s ", Style.DIM),
            (f"{f.tokens_per_s:.0f}", Style.NORMAL),
            ("  KV mean ", Style.DIM),
            (kv, Style.NORMAL),
        ]
    )
    rows = sort_rows(frame.instances, view)
    # KV meters, two per line, as htop's CPU bars.
    meter_w = max(20, (width - 2) // 2)
    for i in range(0, len(rows), 2):
        line: Line = []
        for row in rows[i : i + 2]:
            line.extend(_meter(row, meter_w))
        lines.append(line)
        if len(lines) >= max(4, height // 3):
            break
    lines.append([("", Style.NORMAL)])
    header = ""
    for i, col in enumerate(COLUMNS):
        down, up = ("▼", "▲") if unicode else ("v", "^")
        mark = (down if view.descending else up) if i == view.sort_index else ""
        text = col.title + mark
        header += (text.ljust(col.width) if col.left else text.rjust(col.width)) + " "
    lines.append([(header.ljust(width), Style.HEADER)])
    for row in rows:
        lines.append(_row_line(row))
    keys = " q quit  </> sort  I invert  i s r w k t f a: sort by column  p pause"
    if message:
        keys += "  | " + message
    body = _clip(lines, width, height - 1)
    body.extend([[("", Style.NORMAL)]] * max(0, height - 1 - len(body)))
    body.append([(_fit(keys, width).ljust(width), Style.KEY)])
    return body


def _meter(row: InstanceRow, width: int) -> Line:
    label = _fit(row.key, 14).ljust(14)
    inner = width - len(label) - 10
    value = row.kv_usage
    if value is None:
        return [(f" {label} ", Style.NORMAL), ("[" + " " * inner + "]  n/a ", Style.DIM)]
    filled = round(inner * value)
    style = Style.BAR_BAD if value > 0.9 else Style.BAR_WARN if value > 0.7 else Style.BAR_GOOD
    return [
        (f" {label} ", Style.NORMAL),
        ("[", Style.DIM),
        ("|" * filled, style),
        (" " * (inner - filled), Style.NORMAL),
        ("]", Style.DIM),
        (f"{value * 100:5.1f}% ", Style.NORMAL),
    ]


def _row_line(row: InstanceRow) -> Line:
    state_style = {
        "ready": Style.GOOD,
        "loading": Style.WARN,
        "draining": Style.WARN,
        "stopping": Style.WARN,
        "unreachable": Style.BAD,
    }.get(row.state, Style.NORMAL)
    values: list[tuple[str, Style]] = [
        (row.key, Style.NORMAL),
        (row.model, Style.NORMAL),
        (row.state, state_style),
        (str(row.running), Style.NORMAL),
        (str(row.waiting), Style.WARN if row.waiting else Style.NORMAL),
        (_pct(row.kv_usage), Style.NORMAL),
        (_num(row.tokens_per_s), Style.NORMAL),
        (_ms(row.ttft_recent_s), Style.NORMAL),
        (_ms(row.itl_recent_s), Style.NORMAL),
        (_pct(row.prefix_hit_rate), Style.NORMAL),
        ("-" if row.preemptions_total is None else str(row.preemptions_total), Style.NORMAL),
        (f"{row.age_s:.1f}s", Style.BAD if row.stale else Style.NORMAL),
    ]
    line: Line = []
    for col, (text, style) in zip(COLUMNS, values, strict=True):
        text = _fit(text, col.width)
        line.append(((text.ljust(col.width) if col.left else text.rjust(col.width)) + " ", style))
    return line


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}ms"


def _fit(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "~"


def _clip(lines: list[Line], width: int, height: int) -> list[Line]:
    out: list[Line] = []
    for line in lines[: max(0, height)]:
        room = width
        clipped: Line = []
        for text, style in line:
            if room <= 0:
                break
            clipped.append((text[:room], style))
            room -= len(text[:room])
        out.append(clipped)
    return out


# -- the curses shell ------------------------------------------------------------------

_CURSES_STYLES: Final = {
    # style -> (foreground, background, extra attribute)
    Style.TITLE: (curses.COLOR_BLACK, curses.COLOR_CYAN, 0),
    Style.HEADER: (curses.COLOR_BLACK, curses.COLOR_GREEN, 0),
    Style.DIM: (curses.COLOR_CYAN, -1, 0),
    Style.GOOD: (curses.COLOR_GREEN, -1, curses.A_BOLD),
    Style.WARN: (curses.COLOR_YELLOW, -1, curses.A_BOLD),
    Style.BAD: (curses.COLOR_RED, -1, curses.A_BOLD),
    Style.BAR_GOOD: (curses.COLOR_GREEN, -1, curses.A_BOLD),
    Style.BAR_WARN: (curses.COLOR_YELLOW, -1, curses.A_BOLD),
    Style.BAR_BAD: (curses.COLOR_RED, -1, curses.A_BOLD),
    Style.KEY: (curses.COLOR_BLACK, curses.COLOR_CYAN, 0),
}


class _LogTail(logging.Handler):
    """Keeps the newest log message for the status line: anything written to the terminal
    behind curses' back would corrupt the screen."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.last = f"{record.levelname.lower()}: {record.getMessage()}"


@contextlib.contextmanager
def _logs_captured() -> Iterator[_LogTail]:
    root = logging.getLogger()
    saved = root.handlers[:]
    tail = _LogTail()
    root.handlers[:] = [tail]
    try:
        yield tail
    finally:
        root.handlers[:] = saved


def _init_colors() -> dict[Style, int]:
    attrs = {style: 0 for style in Style}
    attrs[Style.TITLE] = attrs[Style.HEADER] = attrs[Style.KEY] = curses.A_REVERSE
    if not curses.has_colors():
        return attrs
    curses.start_color()
    with contextlib.suppress(curses.error):
        curses.use_default_colors()
    for n, (style, (fg, bg, extra)) in enumerate(_CURSES_STYLES.items(), start=1):
        try:
            curses.init_pair(n, fg, bg)
        except curses.error:
            curses.init_pair(n, fg, curses.COLOR_BLACK if bg == -1 else bg)
        attrs[style] = curses.color_pair(n) | extra
    return attrs


def _draw(stdscr: Any, lines: list[Line], attrs: dict[Style, int]) -> None:
    stdscr.erase()
    height, width = stdscr.getmaxyx()
    for y, line in enumerate(lines[:height]):
        x = 0
        for text, style in line:
            if x >= width:
                break
            with contextlib.suppress(curses.error):  # writing the last cell raises
                stdscr.addstr(y, x, text[: width - x], attrs[style])
            x += len(text)
    stdscr.refresh()


async def run_top(
    stdscr: Any,
    nats: NatsSettings,
    *,
    interval_s: float,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Draw until the user quits. Keys are polled every 50 ms so sorting feels instant."""
    with contextlib.suppress(curses.error):
        curses.curs_set(0)
    stdscr.nodelay(True)
    fleet = FleetView()
    state = DashboardState(fleet, config=DashboardConfig(tick_s=interval_s, history_s=60.0))
    with _logs_captured() as log_tail:
        async with FleetSubscriber(
            nats, fleet, client_name="eagle-eye-top", role="top", meanwhile="retrying"
        ) as subscriber:
            screen = _Screen(stdscr, source=nats.display_url, log_tail=log_tail)
            await screen.run(state, subscriber, interval_s, stop)


class _Screen:
    """The curses loop: sample on the tick, poll keys every 50 ms, redraw when needed."""

    def __init__(self, stdscr: Any, *, source: str, log_tail: _LogTail) -> None:
        self.stdscr = stdscr
        self.source = source
        self.log_tail = log_tail
        self.view = View()
        self.attrs = _init_colors()
        self.unicode = locale.getpreferredencoding(False).lower().replace("-", "") == "utf8"

    async def run(
        self,
        state: DashboardState,
        subscriber: FleetSubscriber,
        interval_s: float,
        stop: Callable[[], bool],
    ) -> None:
        frame: Frame | None = None
        next_sample = 0.0
        dirty = True
        while not stop():
            now = time.monotonic()
            if now >= next_sample:
                next_sample = now + interval_s
                if not self.view.paused:
                    frame = state.sample(now, time.time())
                dirty = True
            keys_ok, changed = self._read_keys()
            if not keys_ok:
                return
            if dirty or changed:
                height, width = self.stdscr.getmaxyx()
                lines = render(
                    frame,
                    self.view,
                    width=width,
                    height=height,
                    source=self.source,
                    connected=subscriber.connected,
                    now_wall_s=time.time(),
                    unicode=self.unicode,
                    message=self.log_tail.last,
                )
                _draw(self.stdscr, lines, self.attrs)
                dirty = False
            await asyncio.sleep(0.05)

    def _read_keys(self) -> tuple[bool, bool]:
        """(keep running, screen needs redrawing)."""
        changed = False
        key = self.stdscr.getch()
        while key != -1:
            if key == curses.KEY_RESIZE:
                changed = True
            elif 0 <= key < 256:
                if not self.view.handle_key(chr(key)):
                    return False, changed
                changed = True
            key = self.stdscr.getch()
        return True, changed


@click.command("top")
@click.option("--nats", "nats_url", envvar="EAGLE_EYE_NATS_URL", help="NATS server URL(s).")
@click.option(
    "--interval", "interval_s", default=0.5, show_default=True, help="Refresh period, seconds."
)
def top(nats_url: str | None, interval_s: float) -> None:
    """Terminal view of the fleet, like htop: sortable, refreshing from NATS."""
    try:
        nats = nats_from_env(os.environ, nats_url)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    if nats is None:
        raise click.UsageError("give the NATS URL: --nats nats://HOST:4222 (or EAGLE_EYE_NATS_URL)")
    if not 0.05 <= interval_s <= 60:
        raise click.UsageError("--interval must be between 0.05 and 60 seconds")

    def main(stdscr: Any) -> None:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_top(stdscr, nats, interval_s=interval_s))

    locale.setlocale(locale.LC_ALL, "")  # curses writes UTF-8 only when the locale says so
    curses.wrapper(main)
