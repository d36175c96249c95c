"""Render a ``tmux capture-pane -e`` capture (text with ANSI colours) to a PNG.

For the README's picture of ``eagle-eye top`` and for looking at a failing test's screen.
Understands the SGR codes tmux emits: reset, bold, reverse, the 8/16 basic colours and
256-colour indices; everything else is ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
from PIL import Image, ImageDraw, ImageFont

_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_PALETTE = [
    (30, 34, 40), (224, 82, 82), (98, 196, 98), (226, 192, 80),
    (90, 150, 230), (200, 110, 210), (80, 200, 210), (215, 218, 222),
    (110, 118, 128), (255, 110, 110), (130, 230, 130), (255, 225, 110),
    (130, 180, 255), (230, 140, 240), (120, 230, 240), (255, 255, 255),
]  # fmt: skip
BACKGROUND = (18, 21, 26)
FOREGROUND = (215, 218, 222)


def _xterm256(n: int) -> tuple[int, int, int]:
    if n < 16:
        return _PALETTE[n]
    if n < 232:
        n -= 16
        steps = (0, 95, 135, 175, 215, 255)
        return steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    level = 8 + (n - 232) * 10
    return level, level, level


def render_capture(capture: str, path: Path, *, font_size: int = 15) -> None:
    """Draw ``capture`` (one terminal line per text line) into ``path``."""
    font_dir = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    font = ImageFont.truetype(str(font_dir / "DejaVuSansMono.ttf"), font_size)
    bold = ImageFont.truetype(str(font_dir / "DejaVuSansMono-Bold.ttf"), font_size)
    cell_w = round(font.getlength("M"))
    cell_h = round(font_size * 1.35)
    lines = capture.rstrip("\n").split("\n")
    cols = max((len(_SGR.sub("", line)) for line in lines), default=80)
    pad = 12
    image = Image.new("RGB", (cols * cell_w + 2 * pad, len(lines) * cell_h + 2 * pad), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        fg: tuple[int, int, int] | None = None
        bg: tuple[int, int, int] | None = None
        is_bold = reverse = False
        col = 0
        pos = 0
        for match in [*_SGR.finditer(line), None]:
            text = line[pos : match.start() if match else len(line)]
            for ch in text:
                x, y = pad + col * cell_w, pad + row * cell_h
                f, b = fg or FOREGROUND, bg
                if reverse:
                    f, b = (bg or BACKGROUND), (fg or FOREGROUND)
                if b is not None:
                    draw.rectangle([x, y, x + cell_w, y + cell_h], fill=b)
                if not ch.isspace():
                    draw.text((x, y + 2), ch, font=bold if is_bold else font, fill=f)
                col += 1
            if match is None:
                break
            pos = match.end()
            codes = [int(c) for c in match.group(1).split(";") if c] or [0]
            i = 0
            while i < len(codes):
                c = codes[i]
                if c == 0:
                    fg = bg = None
                    is_bold = reverse = False
                elif c == 1:
                    is_bold = True
                elif c == 7:
                    reverse = True
                elif c == 22:
                    is_bold = False
                elif c == 27:
                    reverse = False
                elif 30 <= c <= 37:
                    fg = _PALETTE[c - 30 + (8 if is_bold else 0)]
                elif c == 39:
                    fg = None
                elif 40 <= c <= 47:
                    bg = _PALETTE[c - 40]
                elif c == 49:
                    bg = None
                elif 90 <= c <= 97:
                    fg = _PALETTE[c - 90 + 8]
                elif 100 <= c <= 107:
                    bg = _PALETTE[c - 100 + 8]
                elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                    color = _xterm256(codes[i + 2])
                    if c == 38:
                        fg = color
                    else:
                        bg = color
                    i += 2
                i += 1
    image.save(path)
