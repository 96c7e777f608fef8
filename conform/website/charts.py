"""Small SVG charts drawn at build time: no chart library, nothing to load in the browser."""

from __future__ import annotations

import math

from markupsafe import Markup, escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def _fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s:.2g} s"


def line_chart(
    series: list[tuple[str, list[float | None]]],
    x_labels: list[str],
    *,
    title: str,
    width: int = 520,
    height: int = 240,
) -> Markup:
    """Lines of values (seconds, log scale) over categorical x positions; None leaves a gap."""
    values = [v for _, ys in series for v in ys if v]
    if not values:
        return Markup("")
    left, right, top, bottom = 64, 170, 24, 36
    pw, ph = width - left - right, height - top - bottom
    lo, hi = math.log10(min(values)), math.log10(max(values))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    lo, hi = math.floor(lo), math.ceil(hi)

    def x(i):
        return left + (pw * (i + 0.5) / max(len(x_labels), 1))

    def y(v):
        return top + ph - ph * (math.log10(v) - lo) / (hi - lo)

    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    out.append(f"<title>{escape(title)}</title>")
    out.append(f'<text x="{left}" y="14" class="chart-title">{escape(title)}</text>')
    for p in range(lo, hi + 1):
        yy = y(10**p)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>')
        out.append(
            f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{escape(_fmt_seconds(10**p))}</text>'
        )
    for i, lab in enumerate(x_labels):
        out.append(f'<text x="{x(i):.1f}" y="{top + ph + 18}" text-anchor="middle" class="tick">{escape(lab)}</text>')
    for k, (name, ys) in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        pts = [(x(i), y(v), v) for i, v in enumerate(ys) if v]
        if len(pts) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for px, py, v in pts:
            out.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{color}"><title>{escape(name)}: {escape(_fmt_seconds(v))}</title></circle>'
            )
        ly = top + 12 + 16 * k
        out.append(f'<rect x="{left + pw + 12}" y="{ly - 9}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{left + pw + 26}" y="{ly}" class="legend">{escape(name[:26])}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def count_chart(
    series: list[tuple[str, list[int | None], bool]],
    x_labels: list[str],
    *,
    title: str,
    width: int = 760,
    height: int = 330,
) -> Markup:
    """Counts (linear axis from 0) over categorical x positions, one line per (name, values,
    dashed); lines sharing a name's first word share a colour, so "MPS" and "MPS incl.
    composite" read as a pair."""
    values = [v for _, ys, _ in series for v in ys if v is not None]
    if not values or not x_labels:
        return Markup("")
    left, right, top, bottom = 56, 190, 24, 56
    pw, ph = width - left - right, height - top - bottom
    step = _nice_step(max(values) / 5 or 1)
    hi = step * math.ceil(max(values) / step) or step

    def x(i):
        return left + pw * (i + 0.5) / len(x_labels)

    def y(v):
        return top + ph - ph * v / hi

    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    out.append(f'<title>{escape(title)}</title><text x="{left}" y="14" class="chart-title">{escape(title)}</text>')
    for k in range(int(round(hi / step)) + 1):
        yy = y(k * step)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{k * step:,.0f}</text>')
    slanted = len(x_labels) > 8
    for i, lab in enumerate(x_labels):
        xx, yy = x(i), top + ph + 16
        rot = f' transform="rotate(-40 {xx:.1f} {yy})"' if slanted else ""
        out.append(
            f'<text x="{xx:.1f}" y="{yy}" text-anchor="{"end" if slanted else "middle"}" class="tick"{rot}>{escape(lab)}</text>'
        )
    colours: dict[str, str] = {}
    for k, (name, ys, dashed) in enumerate(series):
        color = colours.setdefault(name.split()[0], PALETTE[len(colours) % len(PALETTE)])
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        pts = [(x(i), y(v), v, x_labels[i]) for i, v in enumerate(ys) if v is not None]
        if len(pts) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for px, py, v, lab in pts:
            out.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{2.5 if dashed else 3.5}" fill="{color}">'
                f"<title>{escape(name)}, torch {escape(lab)}: {v:,}</title></circle>"
            )
        ly = top + 12 + 18 * k
        out.append(
            f'<line x1="{left + pw + 12}" x2="{left + pw + 30}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{left + pw + 36}" y="{ly}" class="legend">{escape(name[:28])}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten, at least raw."""
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def histogram(values: list[float], *, title: str, width: int = 520, height: int = 200) -> Markup:
    """Distribution of speedups on a log2 axis (bins of a factor of 2; 1x in the middle)."""
    values = [v for v in values if v and v > 0]
    if not values:
        return Markup("")
    logs = [math.log2(v) for v in values]
    lo, hi = math.floor(min(logs)), math.ceil(max(logs))
    lo, hi = min(lo, -1), max(hi, 1)
    bins = [0] * (hi - lo)
    for v in logs:
        bins[min(int(math.floor(v - lo)), len(bins) - 1)] += 1
    left, top, bottom = 40, 24, 36
    pw, ph = width - left - 12, height - top - bottom
    bw = pw / len(bins)
    peak = max(bins)
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    out.append(f'<title>{escape(title)}</title><text x="{left}" y="14" class="chart-title">{escape(title)}</text>')
    for i, n in enumerate(bins):
        h = ph * n / peak
        a, b = lo + i, lo + i + 1
        cls = "bar slow" if b <= 0 else "bar"
        label = f"{_ratio(2.0**a)} – {_ratio(2.0**b)}: {n} ops"
        out.append(
            f'<rect x="{left + i * bw + 1:.1f}" y="{top + ph - h:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" '
            f'class="{cls}"><title>{escape(label)}</title></rect>'
        )
    for i in range(len(bins) + 1):
        if len(bins) <= 12 or i % 2 == 0:
            out.append(
                f'<text x="{left + i * bw:.1f}" y="{top + ph + 16}" text-anchor="middle" class="tick">{escape(_ratio(2.0 ** (lo + i)))}</text>'
            )
    xo = left + (-lo) * bw
    out.append(f'<line x1="{xo:.1f}" x2="{xo:.1f}" y1="{top}" y2="{top + ph}" class="axis-one"/>')
    out.append(
        f'<text x="{left}" y="{height - 4}" class="tick">speedup = CPU time / device time (left of the line: slower than the CPU)</text>'
    )
    out.append("</svg>")
    return Markup("".join(out))


def _ratio(v: float) -> str:
    return f"{v:g}x" if v >= 1 else f"1/{1 / v:g}x"


fmt_seconds = _fmt_seconds
