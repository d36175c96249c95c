"""``eagle-eye top``: the fleet in a terminal, in the spirit of ``htop`` and ``nvtop``.

It keeps its own ``FleetView`` from NATS (through the router's ``FleetSubscriber``, which
asks every publisher to re-send on connect, so the screen fills at once) and samples it
with the same ``DashboardState`` as the web dashboard, so both show the same numbers.

The screen is built by pure functions (``top_render.render`` returns styled lines for a
given size) and drawn here with the standard library's ``curses``; keys:

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
from typing import Any, Final

import click

from eagle_eye.fleet.subscriber import FleetSubscriber
from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.dashboard.frame import Frame
from eagle_eye.observe.dashboard.state import DashboardConfig, DashboardState
from eagle_eye.observe.dashboard.top_render import Line, Style, View, render
from eagle_eye.settings import NatsSettings, SettingsError, nats_from_env

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
