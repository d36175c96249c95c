"""A targeted reader for the Prometheus text exposition format.

Why not ``prometheus_client.parser``: the agent scrapes an engine's ``/metrics`` every
100 ms and needs perhaps a dozen series out of a page of hundreds of lines, most of them
histogram buckets it never looks at. A general parser tokenises every line into Python
objects; this one asks the page for the exact sample names it wants (``str.find`` runs
in C over the whole text) and parses only those lines. ``eagle-eye bench agent``
measures the difference on a captured vLLM page.

Pure functions over ``str``; no I/O. What counts as broken:

* a page that does not end with a newline (a truncated read: the last number might be
  cut short, so no value on it can be trusted) raises ``PromParseError``;
* a wanted line whose labels or value do not parse raises ``PromParseError`` naming it;
* lines nobody asked for are never looked at, so garbage there costs nothing and is not
  an error; a page that has none of the wanted series simply yields nothing and the
  caller decides (the engine mappings treat "no queue gauges" as an error).

The text format allows ``NaN``, ``+Inf``, ``-Inf``, an optional integer timestamp in
milliseconds, ``#`` comment lines, and the escapes ``\\\\``, ``\\"`` and ``\\n`` in
label values; all are handled. The newer quoted-name form (``{"a.b", x="y"}``) is not
used by any engine we read and is not supported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from eagle_eye.errors import EagleEyeError

MAX_LINE_CHARS: Final = 64 * 1024
"""A longer sample line is treated as broken rather than parsed."""

_LABEL_RE: Final = re.compile(
    r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(,|$)'
)
_ESCAPE_RE: Final = re.compile(r"\\(.)")
_ESCAPES: Final = {"n": "\n", "\\": "\\", '"': '"'}


class PromParseError(EagleEyeError, ValueError):
    """The page (or one wanted line on it) is not valid exposition text."""

    def __init__(self, reason: str, line: str | None = None) -> None:
        shown = "" if line is None else f": {line[:120]!r}"
        super().__init__(f"{reason}{shown}")
        self.reason = reason
        self.line = line


@dataclass(frozen=True, slots=True)
class PromSample:
    """One sample line: its labels (unescaped), value and optional timestamp."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None = None


Page = dict[str, list[PromSample]]
"""Sample name -> every sample of that name on the page, in page order."""


def scan(text: str, names: Iterable[str]) -> Page:
    """Return the samples of ``names`` found in ``text`` (exact sample names).

    Ask for histogram parts by their sample names (``x_sum``, ``x_count``,
    ``x_bucket``) and for counters by their exported name (``x_total``). Names absent
    from the page are absent from the result.
    """
    if text and not text.endswith("\n"):
        raise PromParseError("page does not end with a newline (truncated?)")
    page: Page = {}
    for name in names:
        found = _scan_one(text, name)
        if found:
            page[name] = found
    return page


def _scan_one(text: str, name: str) -> list[PromSample]:
    out: list[PromSample] = []
    needle = "\n" + name
    name_len = len(name)
    # A match at offset 0 has no newline before it.
    pos = 0 if text.startswith(name) else text.find(needle)
    start_skip = 0 if pos == 0 else 1
    while pos >= 0:
        begin = pos + start_skip
        after = begin + name_len
        nxt = text[after : after + 1]
        end = text.find("\n", after)
        if nxt in ("{", " ", "\t"):
            line = text[begin:end]
            out.append(parse_line(line, name_len))
        pos = text.find(needle, end)
        start_skip = 1
    return out


def parse_line(line: str, name_len: int | None = None) -> PromSample:
    """Parse one sample line; ``name_len`` is the metric name's length when known."""
    if len(line) > MAX_LINE_CHARS:
        raise PromParseError(f"line longer than {MAX_LINE_CHARS} characters", line)
    line = line.rstrip("\r")
    if name_len is None:
        name_len = _name_length(line)
    name = line[:name_len]
    rest = line[name_len:]
    labels: dict[str, str] = {}
    if rest.startswith("{"):
        close = rest.rfind("}")
        if close < 0:
            raise PromParseError("unterminated label set", line)
        labels = parse_labels(rest[1:close], line)
        rest = rest[close + 1 :]
    parts = rest.split()
    if not parts or len(parts) > 2:
        raise PromParseError("expected a value and an optional timestamp", line)
    try:
        value = float(parts[0])
    except ValueError:
        raise PromParseError("value is not a number", line) from None
    timestamp_ms = None
    if len(parts) == 2:
        try:
            timestamp_ms = int(parts[1])
        except ValueError:
            raise PromParseError("timestamp is not an integer", line) from None
    return PromSample(name, labels, value, timestamp_ms)


def parse_labels(body: str, line: str | None = None) -> dict[str, str]:
    """Parse ``a="x",b="y"`` (the part between the braces), undoing escapes."""
    labels: dict[str, str] = {}
    pos, end = 0, len(body)
    while pos < end:
        if body[pos:].strip() == "":
            break
        match = _LABEL_RE.match(body, pos)
        if match is None:
            raise PromParseError("malformed labels", line if line is not None else body)
        key, value, sep = match.group(1, 2, 3)
        if "\\" in value:
            value = _ESCAPE_RE.sub(_unescape, value)
        labels[key] = value
        pos = match.end()
        if not sep:
            break
    return labels


def _unescape(match: re.Match[str]) -> str:
    char = match.group(1)
    return _ESCAPES.get(char, "\\" + char)


def _name_length(line: str) -> int:
    for i, char in enumerate(line):
        if char in "{ \t":
            return i
    raise PromParseError("no value after the metric name", line)


def family_prefixes(text: str, prefixes: Iterable[str]) -> set[str]:
    """Which of ``prefixes`` start at least one sample line (for engine detection)."""
    present = set()
    for prefix in prefixes:
        if text.startswith(prefix) or ("\n" + prefix) in text:
            present.add(prefix)
    return present


def finite(value: float | None) -> float | None:
    """``value`` if it is a finite number, else None (NaN/Inf carry no reading)."""
    if value is None or not math.isfinite(value):
        return None
    return value
