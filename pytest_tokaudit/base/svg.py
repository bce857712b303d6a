"""Static SVG charts, written with the standard library (the HTML report, pytest-html).

No script, no style sheet of their own, no request: they render the same inline in a page,
in pytest-html's extras (which run no script) and in any browser offline. Every text is
escaped here; callers pass plain strings. Marks carry class="mark" (tests count them) and a
<title> (the browser's tooltip).
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Sequence

# Okabe-Ito: told apart with every common colour blindness (its vermilion is BAD alone).
PALETTE = ("#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#F0E442", "#000000")
GOOD, BAD, BAND, GREY = "#0072B2", "#D55E00", "#d8ecd8", "#999999"


def esc(text: Any) -> str:
    return escape(str(text), quote=True)


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{esc(label)}" font-family="sans-serif" font-size="11">'
            f'<title>{esc(label)}</title>' + "".join(body) + "</svg>")


def _text(x: float, y: float, text: Any, anchor: str = "start", size: int = 11,
          extra: str = "") -> str:
    return (f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" font-size="{size}"'
            f'{extra}>{esc(text)}</text>')


def text_width(text: str, size: float) -> float:
    """About how wide `text` draws at `size` (sans-serif averages ~0.6 em a character)."""
    return len(text) * size * 0.6


def wrap(text: str, size: float, room: float) -> list[str]:
    """`text` cut at spaces into lines that fit `room` pixels at `size` (a word longer than
    the room keeps a line of its own): titles and axis labels are never clipped."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_width(lines[-1] + " " + word, size) <= room:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _title(text: str, width: int, x: float = 4) -> tuple[list[str], int]:
    """A chart's bold title, wrapped to the chart's width; and the height it takes."""
    lines = wrap(text, 12 * 1.1, width - x - 4)
    body = [_text(x, 14 + 14 * k, line, size=12, extra=' font-weight="bold"')
            for k, line in enumerate(lines)]
    return body, 14 * (len(lines) - 1)


def short(n: float) -> str:
    """1234 -> 1.2k: axis labels."""
    a = abs(n)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.3g}" if isinstance(n, float) and n != int(n) else f"{int(n)}"


def histogram(bins: Sequence[tuple[str, int]], title: str, *, band: tuple[int, int] | None = None,
              band_label: str = "", overlay: Sequence[int] | None = None,
              overlay_label: str = "", colors: Sequence[str] | None = None,
              width: int = 420, height: int = 200, xlabel: str = "") -> str:
    """Bars of counts over ordered bins (labels given), bins band[0]..band[1] shaded (the
    tolerance), an outline of another histogram's shares on top (the baseline's)."""
    left, right, top, bottom = 44, 8, 22, 34
    heading, extra = _title(title, width, left)
    xlines = wrap(xlabel, 10, width - 8) if xlabel else []
    top += extra
    bottom += 12 * max(len(xlines) - 1, 0)
    height += extra + 12 * max(len(xlines) - 1, 0)
    n = max(len(bins), 1)
    w = (width - left - right) / n
    total = sum(c for _, c in bins) or 1
    shares = [c / total for _, c in bins]
    o_total = sum(overlay) if overlay else 0
    o_shares = [c / o_total for c in overlay] if overlay and o_total else []
    peak = max([*shares, *o_shares, 1e-9])
    h = height - top - bottom
    body = heading
    if band is not None:
        x0, x1 = left + band[0] * w, left + (band[1] + 1) * w
        body.append(f'<rect class="band" x="{_num(x0)}" y="{top}" width="{_num(x1 - x0)}" '
                    f'height="{h}" fill="{BAND}"><title>{esc(band_label)}</title></rect>')
    for i, (label, count) in enumerate(bins):
        if not count:
            continue
        bh = max(shares[i] / peak * h, 1)
        color = colors[i] if colors else GOOD
        body.append(f'<rect class="mark" x="{_num(left + i * w + 0.5)}" y="{_num(top + h - bh)}" '
                    f'width="{_num(max(w - 1, 1))}" height="{_num(bh)}" fill="{color}">'
                    f'<title>{esc(label)}: {count:,} ({shares[i]:.1%})</title></rect>')
    if o_shares:
        pts = []
        for i, s in enumerate(o_shares):
            y = top + h - s / peak * h
            pts += [f"{_num(left + i * w)},{_num(y)}", f"{_num(left + (i + 1) * w)},{_num(y)}"]
        body.append(f'<polyline class="overlay" points="{" ".join(pts)}" fill="none" '
                    f'stroke="#000" stroke-width="1.5" stroke-dasharray="4 2">'
                    f'<title>{esc(overlay_label)}</title></polyline>')
        body.append(_text(width - right, top - 6, f"- - {overlay_label}", "end"))
    body.append(f'<line x1="{left}" y1="{top + h}" x2="{width - right}" y2="{top + h}" '
                f'stroke="#333"/>')
    body.append(_text(left - 4, top + 8, f"{peak:.0%}", "end", 10))
    # Ticks far enough apart for the widest label; the first and the last bin are always
    # labelled, so every bar lies within the labelled range.
    widest = max((text_width(label, 9) for label, _ in bins), default=0.0)
    step = max(1, math.ceil((widest + 6) / w))
    ticks = list(range(0, n, step))
    if ticks[-1] != n - 1:
        if ticks[-1] > n - 1 - step and len(ticks) > 1:
            ticks.pop()  # too close to the last: the last one wins
        ticks.append(n - 1)
    for i in ticks:
        x, half = left + (i + 0.5) * w, text_width(bins[i][0], 9) / 2
        x = min(max(x, half + 1), width - half - 1)  # the edge labels stay on the chart
        body.append(_text(x, top + h + 12, bins[i][0], "middle", 9, ' class="tick"'))
    for k, line in enumerate(xlines):
        body.append(_text(width / 2, height - 4 - 12 * (len(xlines) - 1 - k), line, "middle", 10))
    return _svg(width, height, body, title)


def hbars(rows: Sequence[tuple[str, float, str, str]], title: str, *, line: float | None = None,
          line_label: str = "", fmt: str = "{:.2%}", width: int = 420,
          bar: int = 16, marks: Sequence[float | None] | None = None,
          marks_label: str = "") -> str:
    """Horizontal bars (label, value, colour, tooltip) with a vertical line (one limit for
    all) or, with `marks`, a limit of each bar's own drawn across it."""
    left, right, top = 170, 60, 22
    heading, extra = _title(title, width)
    top += extra
    legend = wrap(line_label if line is not None else marks_label if marks else "", 10, width - 8)
    height = top + bar * len(rows) + 10 + 12 * len(legend)
    own = [m for m in (marks or ()) if m is not None]
    peak = max([v for _, v, _, _ in rows] + [line or 0, *own, 1e-12])
    span = width - left - right
    body = heading
    for k, (label, value, color, tip) in enumerate(rows):
        y = top + k * bar
        name = label if len(label) <= 28 else "..." + label[-25:]
        body.append(_text(left - 4, y + bar - 4, name, "end", 10))
        body.append(f'<rect class="mark" x="{left}" y="{y + 2}" width="{_num(max(value / peak * span, 1))}" '
                    f'height="{bar - 4}" fill="{color}"><title>{esc(tip)}</title></rect>')
        body.append(_text(left + value / peak * span + 3, y + bar - 4, fmt.format(value), size=10))
        limit = marks[k] if marks and k < len(marks) else None
        if limit is not None:
            x = left + limit / peak * span
            body.append(f'<line class="limit" x1="{_num(x)}" y1="{y}" x2="{_num(x)}" '
                        f'y2="{y + bar}" stroke="#000" stroke-width="2">'
                        f'<title>{esc(label)}: tolerance {fmt.format(limit)}</title></line>')
    if line is not None:
        x = left + line / peak * span
        body.append(f'<line class="limit" x1="{_num(x)}" y1="{top - 4}" x2="{_num(x)}" '
                    f'y2="{top + bar * len(rows) + 4}" stroke="{BAD}" stroke-width="2">'
                    f'<title>{esc(line_label)}</title></line>')
    for k, text in enumerate(legend):
        body.append(_text(4, top + bar * len(rows) + 20 + 12 * k, text, "start", 10))
    return _svg(width, height, body, title)


def scatter(points: Sequence[tuple[float, float, str, str]], title: str, *,
            tolerance: Any = None, width: int = 420, height: int = 320,
            xlabel: str = "", ylabel: str = "", legend: Sequence[tuple[str, str]] = ()) -> str:
    """Points (x, y, colour, tooltip) on square axes with the line y = x and, given
    `tolerance(x) -> half-width`, the band around it."""
    left, right, top, bottom = 48, 10, 22, 34
    heading, extra = _title(title, width, left)
    top += extra
    height += extra
    hi = max([max(x, y) for x, y, _, _ in points] + [1]) * 1.05
    sx = (width - left - right) / hi
    sy = (height - top - bottom) / hi

    def px(x: float) -> float:
        return left + x * sx

    def py(y: float) -> float:
        return height - bottom - y * sy

    body = heading
    if tolerance is not None:
        xs = [hi * k / 40 for k in range(41)]
        upper = [f"{_num(px(x))},{_num(py(min(x + tolerance(x), hi)))}" for x in xs]
        lower = [f"{_num(px(x))},{_num(py(max(x - tolerance(x), 0)))}" for x in reversed(xs)]
        body.append(f'<polygon class="band" points="{" ".join(upper + lower)}" fill="{BAND}"/>')
    body.append(f'<line x1="{_num(px(0))}" y1="{_num(py(0))}" x2="{_num(px(hi))}" '
                f'y2="{_num(py(hi))}" stroke="#666" stroke-dasharray="3 3"/>')
    for x, y, color, tip in points:  # BAD (outliers): larger, outlined, drawn last
        ring = ' r="3.5" stroke="#000" stroke-width="0.8"' if color == BAD else ' r="2.5"'
        body.append(f'<circle class="mark" cx="{_num(px(x))}" cy="{_num(py(y))}"{ring} '
                    f'fill="{color}" fill-opacity="0.75"><title>{esc(tip)}</title></circle>')
    body.append(f'<path d="M{left},{top} V{height - bottom} H{width - right}" fill="none" '
                f'stroke="#333"/>')
    for k in range(5):
        v = hi * k / 4
        body.append(_text(px(v), height - bottom + 12, short(round(v)), "middle", 9))
        body.append(_text(left - 3, py(v) + 3, short(round(v)), "end", 9))
    body.append(_text(left + (width - left - right) / 2, height - 4, xlabel, "middle", 10))
    body.append(_text(12, top + (height - top - bottom) / 2, ylabel, "middle", 10,
                      f' transform="rotate(-90 12 {_num(top + (height - top - bottom) / 2)})"'))
    for k, (name, color) in enumerate(legend[:8]):
        y = top + 12 * k + 6
        ring = ' stroke="#000"' if color == BAD else ""
        body.append(f'<circle cx="{left + 10}" cy="{y}" r="4" fill="{color}"{ring}/>')
        body.append(_text(left + 18, y + 4, name, size=10))
    return _svg(width, height, body, title)


def stacked(rows: Sequence[tuple[str, dict[str, int]]], keys: Sequence[str], title: str,
            *, colors: dict[str, str], width: int = 420, bar: int = 18) -> str:
    """One 100% bar per row (label, counts by key): shares of each key."""
    left, right, top = 150, 10, 22
    heading, extra = _title(title, width)
    top += extra
    legend = 14 * math.ceil(len(keys) / 3)
    height = top + bar * len(rows) + legend + 8
    span = width - left - right
    body = heading
    for k, (label, counts) in enumerate(rows):
        y = top + k * bar
        total = sum(counts.values()) or 1
        name = label if len(label) <= 24 else "..." + label[-21:]
        body.append(_text(left - 4, y + bar - 5, name, "end", 10))
        x = float(left)
        for key in keys:
            n = counts.get(key, 0)
            if not n:
                continue
            w = n / total * span
            body.append(f'<rect class="mark" x="{_num(x)}" y="{y + 2}" width="{_num(max(w, 0.5))}" '
                        f'height="{bar - 4}" fill="{colors[key]}"><title>{esc(label)}: '
                        f'{esc(key)} {n:,} ({n / total:.1%})</title></rect>')
            x += w
    y = top + bar * len(rows) + 10
    for k, key in enumerate(keys):
        cx = left + (k % 3) * (span / 3)
        cy = y + 14 * (k // 3)
        body.append(f'<rect x="{_num(cx)}" y="{cy}" width="10" height="10" fill="{colors[key]}"/>')
        body.append(_text(cx + 14, cy + 9, key if len(key) <= 20 else key[:19] + "...", size=10))
    return _svg(width, height, body, title)
