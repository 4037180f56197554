"""Inline SVG plots for the HTML report (bars with whiskers, scatter plots): no plotting library, no network; each
data mark carries ``class="mark"`` so a browser test can find it.

Example:
    >>> svg = bar_chart("scores", ["1", "2", "3"], [2, 0, 5], title="Scores")
    >>> svg.count('class="mark"'), svg.startswith('<svg class="plot" data-plot="scores"')
    (3, True)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from html import escape

MARK, ACCENT = "#2f6db5", "#d9822b"  # data marks; interval whiskers and reference lines
WIDTH, HEIGHT = 560, 300
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 58, 16, 34, 52


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi].

    >>> nice_ticks(0, 1)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    >>> nice_ticks(3, 3)
    [2.4, 2.6, 2.8, 3.0, 3.2, 3.4, 3.6]
    >>> nice_ticks(1, 5)
    [1.0, 2.0, 3.0, 4.0, 5.0]
    """
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 10) + 0.0 for k in range(first, last + 1)]


def _fmt(v: float) -> str:
    if abs(v - round(v)) < 1e-9 and abs(v) >= 1:
        return f"{v:,.0f}"
    return "0" if abs(v) < 1e-12 else f"{v:.3g}"


def log_ticks(lo: float, hi: float) -> list[float]:
    """Round values (1, 2, 5 x a power of ten; every digit on a short range) between ``lo`` and ``hi`` > 0.

    >>> log_ticks(380, 6400)
    [500.0, 1000.0, 2000.0, 5000.0]
    >>> log_ticks(12, 30)
    [20.0, 30.0]
    """
    out: list[float] = []
    for mantissas in ((1, 2, 5), tuple(range(1, 10))):
        out = [
            m * 10.0**k
            for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            for m in mantissas
            if lo <= m * 10.0**k <= hi
        ]
        if len(out) >= 3:
            return out
    return out or [lo, hi]


def _frame(name: str, title: str, x_label: str, y_label: str, body: list[str], y_ticks: list[str]) -> str:
    w, h, mid = WIDTH, HEIGHT, (HEIGHT - _PAD_B + _PAD_T) / 2
    return "\n".join(
        [
            f'<svg class="plot" data-plot="{escape(name)}" width="{w}" '
            f'height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{escape(title)}">',
            f'<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>',
            f'<text x="{w / 2:.1f}" y="20" text-anchor="middle" font-size="14" font-weight="600">'
            f"{escape(title)}</text>",
            f'<line x1="{_PAD_L}" y1="{h - _PAD_B}" x2="{w - _PAD_R}" y2="{h - _PAD_B}" stroke="#444"/>',
            f'<line x1="{_PAD_L}" y1="{_PAD_T}" x2="{_PAD_L}" y2="{h - _PAD_B}" stroke="#444"/>',
            *y_ticks,
            *body,
            f'<text x="{(_PAD_L + w - _PAD_R) / 2:.1f}" y="{h - 8}" text-anchor="middle" font-size="12">'
            f"{escape(x_label)}</text>",
            f'<text x="14" y="{mid:.1f}" text-anchor="middle" font-size="12" '
            f'transform="rotate(-90 14 {mid:.1f})">{escape(y_label)}</text>',
            "</svg>",
        ]
    )


def _y_axis(lo: float, hi: float, pad: float = 0.0) -> tuple[list[str], float, float, Callable[[float], float]]:
    ticks = nice_ticks(lo, hi)
    lo, hi = min(ticks[0], lo - pad), max(ticks[-1], hi + pad)
    top, bottom = _PAD_T, HEIGHT - _PAD_B

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    out = [
        f'<line x1="{_PAD_L - 4}" y1="{y(t):.1f}" x2="{WIDTH - _PAD_R}" y2="{y(t):.1f}" stroke="#e3e3e3"/>\n'
        f'<text x="{_PAD_L - 7}" y="{y(t) + 4:.1f}" text-anchor="end" font-size="11">{_fmt(t)}</text>'
        for t in ticks
    ]
    return out, lo, hi, y


def bar_chart(
    name: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    *,
    title: str,
    x_label: str = "",
    y_label: str = "",
    intervals: Sequence[Sequence[float] | None] | None = None,
    y_range: tuple[float, float] | None = None,
    reference: float | None = None,
) -> str:
    """Vertical bars (a None value draws no bar), optional ``intervals`` (lo, hi) whiskers and a dashed
    ``reference`` line (e.g. chance)."""
    vals = [v for v in values if v is not None]
    ends = [x for iv in (intervals or []) if iv for x in iv]
    lo, hi = y_range or (min([0.0, *vals, *ends]), max([0.0, *vals, *ends]) or 1.0)
    grid, lo, hi, y = _y_axis(lo, hi)
    slot = (WIDTH - _PAD_L - _PAD_R) / max(len(labels), 1)
    bar = slot * 0.62
    tilt = any(len(label) * 6.2 > slot for label in labels)  # slanted labels where they would overlap
    body = []
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        cx = _PAD_L + slot * (i + 0.5)
        if v is not None:
            y0, y1 = sorted((y(0.0 if lo <= 0 <= hi else lo), y(v)))
            body.append(
                f'<rect class="mark" x="{cx - bar / 2:.1f}" y="{y0:.1f}" width="{bar:.1f}" '
                f'height="{max(y1 - y0, 1.5):.1f}" fill="{MARK}"><title>{escape(label)}: {_fmt(v)}</title>'
                "</rect>"
            )
        whisker = intervals[i] if intervals else None
        if whisker:  # the interval's line, then a cap at each end
            a, b = whisker
            for x1, x2, v1, v2 in ((cx, cx, a, b), (cx - 6, cx + 6, a, a), (cx - 6, cx + 6, b, b)):
                body.append(
                    f'<line x1="{x1:.1f}" y1="{y(v1):.1f}" x2="{x2:.1f}" y2="{y(v2):.1f}" '
                    f'stroke="{ACCENT}" stroke-width="2"/>'
                )
        short = label if len(label) <= 18 else label[:17] + "…"
        ly = HEIGHT - _PAD_B + 15
        slant = f' transform="rotate(-22 {cx:.1f} {ly})"' if tilt else ""
        body.append(
            f'<text x="{cx:.1f}" y="{ly}" text-anchor="{"end" if tilt else "middle"}" font-size="11"'
            f"{slant}>{escape(short)}</text>"
        )
    if reference is not None and lo <= reference <= hi:
        body.append(
            f'<line x1="{_PAD_L}" y1="{y(reference):.1f}" x2="{WIDTH - _PAD_R}" y2="{y(reference):.1f}" '
            f'stroke="{ACCENT}" stroke-dasharray="5 4"/>'
        )
    return _frame(name, title, x_label, y_label, body, grid)


def scatter(
    name: str,
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    title: str,
    x_label: str = "",
    y_label: str = "",
    log_x: bool = False,
    jitter: float = 0.0,
    max_points: int = 2000,
    seed: int = 0,
) -> str:
    """Points (x, y); ``log_x`` plots log10(x) (x > 0) with the tick labels in x's units; ``jitter`` spreads
    tied y values vertically by up to that much (seeded) so they stay visible; at most ``max_points`` (a seeded
    sample) are drawn."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if not log_x or x > 0]
    rng = random.Random(seed)
    if len(pts) > max_points:
        pts = rng.sample(pts, max_points)
    px = [math.log10(x) if log_x else x for x, _ in pts]
    py = [y for _, y in pts]
    grid, lo, hi, y = _y_axis(min(py, default=0.0), max(py, default=1.0), pad=jitter)
    if log_x and pts:
        raw = [x for x, _ in pts]
        x_ticks = [math.log10(t) for t in log_ticks(min(raw), max(raw))]
        xlo, xhi = min(px) - 0.02, max(px) + 0.02
    else:
        x_ticks = nice_ticks(min(px, default=0.0), max(px, default=1.0))
        xlo, xhi = min(x_ticks[0], min(px, default=0.0)), max(x_ticks[-1], max(px, default=1.0))

    def x(v: float) -> float:
        return _PAD_L + 6 + (v - xlo) / (xhi - xlo) * (WIDTH - _PAD_L - _PAD_R - 12)

    body = []
    for t in x_ticks:
        label = _fmt(round(10**t, 6)) if log_x else _fmt(t)
        body.append(
            f'<text x="{x(t):.1f}" y="{HEIGHT - _PAD_B + 15}" text-anchor="middle" font-size="11">{label}</text>'
        )
    for vx, vy in zip(px, py, strict=True):
        jy = vy + (rng.uniform(-jitter, jitter) if jitter else 0.0)
        body.append(
            f'<circle class="mark" cx="{x(vx):.1f}" cy="{y(jy):.1f}" r="3.2" fill="{MARK}" fill-opacity="0.55"/>'
        )
    return _frame(name, title, x_label, y_label, body, grid)
