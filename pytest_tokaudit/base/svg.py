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
    n = max(len(bins), 1)
    w = (width - left - right) / n
    total = sum(c for _, c in bins) or 1
    shares = [c / total for _, c in bins]
    o_total = sum(overlay) if overlay else 0
    o_shares = [c / o_total for c in overlay] if overlay and o_total else []
    peak = max([*shares, *o_shares, 1e-9])
    h = height - top - bottom
    body = [_text(left, 14, title, size=12, extra=' font-weight="bold"')]
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
        body.append(_text(width - right, 14, f"- - {overlay_label}", "end"))
    body.append(f'<line x1="{left}" y1="{top + h}" x2="{width - right}" y2="{top + h}" '
                f'stroke="#333"/>')
    body.append(_text(left - 4, top + 8, f"{peak:.0%}", "end", 10))
    step = max(1, math.ceil(n / 8))
    for i in range(0, n, step):
        body.append(_text(left + (i + 0.5) * w, top + h + 12, bins[i][0], "middle", 9))
    if xlabel:
        body.append(_text(left + (width - left - right) / 2, height - 4, xlabel, "middle", 10))
    return _svg(width, height, body, title)


def hbars(rows: Sequence[tuple[str, float, str, str]], title: str, *, line: float | None = None,
          line_label: str = "", fmt: str = "{:.2%}", width: int = 420,
          bar: int = 16) -> str:
    """Horizontal bars (label, value, colour, tooltip) with a vertical line (a limit)."""
    left, right, top = 170, 60, 22
    height = top + bar * len(rows) + 22
    peak = max([v for _, v, _, _ in rows] + [line or 0, 1e-12])
    span = width - left - right
    body = [_text(4, 14, title, size=12, extra=' font-weight="bold"')]
    for k, (label, value, color, tip) in enumerate(rows):
        y = top + k * bar
        name = label if len(label) <= 28 else "..." + label[-25:]
        body.append(_text(left - 4, y + bar - 4, name, "end", 10))
        body.append(f'<rect class="mark" x="{left}" y="{y + 2}" width="{_num(max(value / peak * span, 1))}" '
                    f'height="{bar - 4}" fill="{color}"><title>{esc(tip)}</title></rect>')
        body.append(_text(left + value / peak * span + 3, y + bar - 4, fmt.format(value), size=10))
    if line is not None:
        x = left + line / peak * span
        body.append(f'<line class="limit" x1="{_num(x)}" y1="{top - 4}" x2="{_num(x)}" '
                    f'y2="{height - 18}" stroke="{BAD}" stroke-width="2">'
                    f'<title>{esc(line_label)}</title></line>')
        anchor = "end" if x > left + span * 0.7 else "start" if x < left + span * 0.3 else "middle"
        body.append(_text(x, height - 6, line_label, anchor, 10))
    return _svg(width, height, body, title)


def scatter(points: Sequence[tuple[float, float, str, str]], title: str, *,
            tolerance: Any = None, width: int = 420, height: int = 320,
            xlabel: str = "", ylabel: str = "", legend: Sequence[tuple[str, str]] = ()) -> str:
    """Points (x, y, colour, tooltip) on square axes with the line y = x and, given
    `tolerance(x) -> half-width`, the band around it."""
    left, right, top, bottom = 48, 10, 22, 34
    hi = max([max(x, y) for x, y, _, _ in points] + [1]) * 1.05
    sx = (width - left - right) / hi
    sy = (height - top - bottom) / hi

    def px(x: float) -> float:
        return left + x * sx

    def py(y: float) -> float:
        return height - bottom - y * sy

    body = [_text(left, 14, title, size=12, extra=' font-weight="bold"')]
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
    legend = 14 * math.ceil(len(keys) / 3)
    height = top + bar * len(rows) + legend + 8
    span = width - left - right
    body = [_text(4, 14, title, size=12, extra=' font-weight="bold"')]
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
