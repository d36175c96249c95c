"""The screen of ``eagle-eye top`` as pure functions: a ``Frame`` in, styled lines out.

``render`` lays out the title, fleet totals, KV meters (as htop's CPU bars), the sortable
table and the key line for a given terminal size; ``View`` is what the user chose (sort
column, order, pause) and ``View.handle_key`` applies one key press. Nothing here draws:
``top.py`` maps each ``Style`` to curses colours and writes the lines, so every layout
rule is unit-testable without a terminal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum
from typing import Final

from eagle_eye.observe.dashboard.frame import Frame, InstanceRow


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
    lines: list[Line] = [_title_line(view, width, source, connected, now_wall_s)]
    if frame is None:
        lines.append([(" waiting for the first snapshot", Style.DIM)])
        return _clip(lines, width, height)
    lines.append(_totals_line(frame))
    rows = sort_rows(frame.instances, view)
    _add_meters(lines, rows, width, height)
    lines.append([("", Style.NORMAL)])
    lines.append(_header_line(view, width, unicode))
    for row in rows:
        lines.append(_row_line(row))
    keys = " q quit  </> sort  I invert  i s r w k t f a: sort by column  p pause"
    if message:
        keys += "  | " + message
    body = _clip(lines, width, height - 1)
    body.extend([[("", Style.NORMAL)]] * max(0, height - 1 - len(body)))
    body.append([(_fit(keys, width).ljust(width), Style.KEY)])
    return body


def _title_line(view: View, width: int, source: str, connected: bool, now_wall_s: float) -> Line:
    """Source, connection and pause on the left, the wall clock on the right."""
    clock = time.strftime("%H:%M:%S", time.localtime(now_wall_s))
    status = "connected" if connected else "connecting"
    title = f" Eagle Eye top  {source} ({status})"
    if view.paused:
        title += "  [paused]"
    room = max(0, width - len(clock) - 1)
    return [(_fit(title, room).ljust(room) + clock + " ", Style.TITLE)]


def _totals_line(frame: Frame) -> Line:
    f = frame.fleet
    kv = "-" if f.kv_usage is None else f"{f.kv_usage * 100:.0f}%"
    others = [f"{n} {s}" for s, n in f.by_state.items() if n and s != "ready"]
    return [
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


def _add_meters(lines: list[Line], rows: list[InstanceRow], width: int, height: int) -> None:
    """KV meters, two per line, as htop's CPU bars, until a third of the screen is used."""
    meter_w = max(20, (width - 2) // 2)
    for i in range(0, len(rows), 2):
        line: Line = []
        for row in rows[i : i + 2]:
            line.extend(_meter(row, meter_w))
        lines.append(line)
        if len(lines) >= max(4, height // 3):
            break


def _header_line(view: View, width: int, unicode: bool) -> Line:
    """Column titles; the sort column carries an arrow for its order."""
    header = ""
    for i, col in enumerate(COLUMNS):
        down, up = ("▼", "▲") if unicode else ("v", "^")
        mark = (down if view.descending else up) if i == view.sort_index else ""
        text = col.title + mark
        header += (text.ljust(col.width) if col.left else text.rjust(col.width)) + " "
    return [(header.ljust(width), Style.HEADER)]


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
