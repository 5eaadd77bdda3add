"""The building blocks of the HTML reports: formatting, palette, summary cards and the SVG charts
(grouped vertical bars, horizontal bars, the status bar), drawn here in Python so that every page
is self-contained. Every string that comes from the data is HTML-escaped (``_e``). Charts
aggregate (histograms, top-N) rather than drawing one element per node or pod."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

#: Unschedulable / error pods listed in the table; the rest are counted.
MAX_FAILED_ROWS = 200
#: Nodes listed in the "top nodes by utilisation" table.
MAX_NODE_ROWS = 25
#: Reasons drawn in the reasons chart; the rest are folded into one "other" bar.
MAX_REASONS = 15

RESOURCES = ("cpu", "memory", "pods")

# Palette (Tailwind-ish, AA contrast on white for text colours).
C_BEFORE = "#94a3b8"  # slate-400
C_AFTER = "#4f46e5"  # indigo-600
C_SCORE = "#0d9488"  # teal-600
C_PLUGIN = "#7c3aed"  # violet-600
C_REASON = "#e11d48"  # rose-600
C_TEXT = "#1e293b"
C_MUTED = "#64748b"
C_GRID = "#e2e8f0"
STATUS_COLOURS = {
    "Scheduled": "#16a34a",
    "PreBound": "#64748b",
    "Unschedulable": "#e11d48",
    "Error": "#9f1239",
    "Waiting": "#0ea5e9",
    "Pending": "#d97706",
    "Gated": "#a16207",
}

Fmt = Callable[[float], str]


# --- formatting -------------------------------------------------------------------------------------
def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _int(v: float) -> str:
    return f"{round(v):,}"


def _pct(v: float) -> str:
    return f"{v * 100:.1f}%"


def _pct0(v: float) -> str:
    return f"{v:g}%"


def _num(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms" if seconds else "0 s"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 120:
        return f"{minutes} min {sec} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _trunc(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _wrap(text: str, width: int, lines: int) -> list[str]:
    """Greedy word wrap into at most ``lines`` lines; the last one is truncated with an ellipsis."""
    out: list[str] = []
    rest = text.strip()
    while rest and len(out) < lines - 1:
        if len(rest) <= width:
            break
        cut = rest.rfind(" ", 0, width + 1)
        if cut <= width // 3:
            cut = width
        out.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest or not out:
        out.append(_trunc(rest, width))
    return out


def _nice_step(span: float, target: int) -> float:
    if span <= 0:
        return 1.0
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _ticks(vmax: float, target: int = 5, integer: bool = False) -> tuple[float, list[float]]:
    step = _nice_step(vmax, target)
    if integer:
        step = max(1.0, math.ceil(step))
    top = step * max(1, math.ceil(vmax / step - 1e-9))
    n = round(top / step)
    return top, [i * step for i in range(n + 1)]


def _f(v: float) -> str:
    """Compact SVG coordinate."""
    return f"{v:.1f}".rstrip("0").rstrip(".")


# --- SVG charts -------------------------------------------------------------------------------------
def _svg_open(chart: str, width: int, height: int, title: str, extra: str = "") -> list[str]:
    return [
        f'<svg class="chart" data-chart="{_e(chart)}"{extra} viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{_e(title)}" preserveAspectRatio="xMidYMid meet">',
        f"<title>{_e(title)}</title>",
        f'<text class="t" x="0" y="18">{_e(title)}</text>',
    ]


def _legend(items: Sequence[tuple[str, str]], right: float, y: float) -> list[str]:
    out: list[str] = []
    x = right
    for name, colour in reversed(items):
        w = 7 * len(name) + 22
        x -= w
        out.append(f'<rect x="{_f(x)}" y="{_f(y - 9)}" width="11" height="11" rx="2" fill="{colour}"/>')
        out.append(f'<text class="lg" x="{_f(x + 16)}" y="{_f(y)}">{_e(name)}</text>')
    return out


def _empty(chart: str, title: str, message: str, width: int = 600, height: int = 150, extra: str = "") -> str:
    parts = _svg_open(chart, width, height, title, extra)
    parts.append(
        f'<rect x="0.5" y="34.5" width="{width - 1}" height="{height - 40}" rx="8" fill="#f8fafc" '
        f'stroke="{C_GRID}" stroke-dasharray="4 4"/>'
    )
    parts.append(f'<text class="empty" x="{width / 2}" y="{(height + 34) / 2 + 5}" text-anchor="middle">')
    parts.append(f"{_e(message)}</text></svg>")
    return "".join(parts)


def _vbars(
    chart: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    *,
    x_label: str,
    y_label: str,
    y_fmt: Fmt = _int,
    tip_fmt: Fmt = _int,
    y_max: float | None = None,
    integer: bool = True,
    value_labels: bool = False,
    width: int = 600,
    height: int = 320,
    extra: str = "",
) -> str:
    """Grouped vertical bars: one band per category, one bar per series (zero bars are omitted)."""
    ml, mr, mt, mb = 62.0, 12.0, 50.0, 54.0
    pw, ph = width - ml - mr, height - mt - mb
    vmax = max((v for _, _, vals in series for v in vals), default=0.0)
    top, ticks = _ticks(y_max if y_max is not None else max(vmax, 1e-9), 5, integer)
    if y_max is not None:
        top = max(top, y_max)
    parts = _svg_open(chart, width, height, title, extra)
    if len(series) > 1:
        parts += _legend([(name, colour) for name, colour, _ in series], width - mr, 40)
    for t in ticks:
        y = mt + ph - ph * t / top
        parts.append(f'<line class="g" x1="{_f(ml)}" x2="{_f(ml + pw)}" y1="{_f(y)}" y2="{_f(y)}"/>')
        parts.append(f'<text class="tk" x="{_f(ml - 6)}" y="{_f(y + 4)}" text-anchor="end">{_e(y_fmt(t))}</text>')
    n = max(len(categories), 1)
    band = pw / n
    group = band * (0.72 if len(series) > 1 else 0.8)
    bw = group / max(len(series), 1)
    for i, cat in enumerate(categories):
        x0 = ml + band * i + (band - group) / 2
        for s, (name, colour, vals) in enumerate(series):
            v = vals[i]
            if v <= 0:
                continue
            h = max(ph * min(v, top) / top, 1.0)
            x = x0 + s * bw
            parts.append(
                f'<rect x="{_f(x)}" y="{_f(mt + ph - h)}" width="{_f(max(bw - 1, 1))}" height="{_f(h)}" '
                f'fill="{colour}"><title>{_e(cat)} · {_e(name)}: {_e(tip_fmt(v))}</title></rect>'
            )
            if value_labels:
                parts.append(
                    f'<text class="vl" x="{_f(x + bw / 2)}" y="{_f(mt + ph - h - 5)}" text-anchor="middle">'
                    f"{_e(tip_fmt(v))}</text>"
                )
    longest = max((len(c) for c in categories), default=1)
    every = max(1, math.ceil(n * (longest * 6.4 + 8) / pw))
    for i, cat in enumerate(categories):
        if i % every:
            continue
        x = ml + band * (i + 0.5)
        parts.append(f'<text class="tk" x="{_f(x)}" y="{_f(mt + ph + 16)}" text-anchor="middle">{_e(cat)}</text>')
    parts.append(f'<line class="ax" x1="{_f(ml)}" x2="{_f(ml + pw)}" y1="{_f(mt + ph)}" y2="{_f(mt + ph)}"/>')
    parts.append(f'<text class="al" x="{_f(ml + pw / 2)}" y="{height - 8}" text-anchor="middle">{_e(x_label)}</text>')
    cy = mt + ph / 2
    parts.append(
        f'<text class="al" x="14" y="{_f(cy)}" text-anchor="middle" transform="rotate(-90 14 {_f(cy)})">'
        f"{_e(y_label)}</text></svg>"
    )
    return "".join(parts)


def _hbars(
    chart: str,
    title: str,
    rows: Sequence[tuple[str, float]],
    *,
    colour: str,
    x_label: str,
    value_fmt: Fmt = _int,
    label_chars: int = 44,
    width: int = 600,
    extra: str = "",
) -> str:
    """Horizontal bars, one per (label, value) row in the given order; long labels wrap to two lines
    and are truncated, the full text is in each bar's <title>."""
    wrapped = [_wrap(label, label_chars, 2) for label, _ in rows]
    two = any(len(w) > 1 for w in wrapped)
    row_h = 36.0 if two else 24.0
    longest = max((len(line) for lines in wrapped for line in lines), default=8)
    ml = min(longest * 6.4 + 16, width * 0.55)
    mr, mt, mb = 56.0, 34.0, 44.0
    pw = width - ml - mr
    height = round(mt + row_h * len(rows) + mb)
    vmax = max((v for _, v in rows), default=0.0)
    top, ticks = _ticks(max(vmax, 1e-9), 4, integer=value_fmt is _int)
    parts = _svg_open(chart, width, height, title, extra)
    base = mt + row_h * len(rows)
    for t in ticks:
        x = ml + pw * t / top
        parts.append(f'<line class="g" x1="{_f(x)}" x2="{_f(x)}" y1="{_f(mt)}" y2="{_f(base)}"/>')
        parts.append(f'<text class="tk" x="{_f(x)}" y="{_f(base + 15)}" text-anchor="middle">{_e(value_fmt(t))}</text>')
    for i, ((label, v), lines) in enumerate(zip(rows, wrapped, strict=True)):
        y = mt + row_h * i
        w = max(pw * v / top, 1.5) if v > 0 else 0
        parts.append(f"<g><title>{_e(label)}: {_e(value_fmt(v))}</title>")
        parts.append(
            f'<rect x="{_f(ml)}" y="{_f(y + 4)}" width="{_f(w)}" height="{_f(row_h - 8)}" rx="2" fill="{colour}"/>'
        )
        ty = y + row_h / 2 + 4 - (len(lines) - 1) * 7
        for j, line in enumerate(lines):
            parts.append(f'<text class="rl" x="{_f(ml - 8)}" y="{_f(ty + j * 14)}" text-anchor="end">{_e(line)}</text>')
        parts.append(f'<text class="vl" x="{_f(ml + w + 5)}" y="{_f(y + row_h / 2 + 4)}">{_e(value_fmt(v))}</text>')
        parts.append("</g>")
    parts.append(f'<line class="ax" x1="{_f(ml)}" x2="{_f(ml)}" y1="{_f(mt)}" y2="{_f(base)}"/>')
    parts.append(f'<text class="al" x="{_f(ml + pw / 2)}" y="{height - 6}" text-anchor="middle">{_e(x_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _status_bar(counts: Sequence[tuple[str, int]]) -> str:
    total = sum(c for _, c in counts)
    width, height = 1000, 28
    parts = [
        f'<svg class="chart status" data-chart="status" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Pods by outcome" preserveAspectRatio="none">'
    ]
    if total == 0:
        parts.append(f'<rect width="{width}" height="{height}" rx="6" fill="{C_GRID}"/></svg>')
        return "".join(parts)
    x = 0.0
    for name, c in counts:
        if not c:
            continue
        w = width * c / total
        parts.append(
            f'<rect x="{_f(x)}" y="0" width="{_f(w)}" height="{height}" fill="{STATUS_COLOURS.get(name, C_MUTED)}">'
            f"<title>{_e(name)}: {c:,} ({_e(_pct(c / total))})</title></rect>"
        )
        x += w
    parts.append("</svg>")
    return "".join(parts)


# --- derived data -----------------------------------------------------------------------------------
def _node_util(node: Mapping[str, Any], key: str, resource: str) -> float | None:
    alloc = _num((node.get("allocatable") or {}).get(resource))
    if alloc <= 0:
        return None
    req = node.get(key) or {}
    if resource == "pods" and resource not in req:
        used = _num(node.get("podsBefore" if key == "requestedBefore" else "podsAfter"))
    else:
        used = _num(req.get(resource))
    return used / alloc


_UTIL_EDGES = [i / 10 for i in range(11)]
_UTIL_LABELS = [f"{i * 10}–{i * 10 + 10}" for i in range(10)] + [">100"]


def _util_histogram(values: Iterable[float | None]) -> list[float]:
    counts = [0.0] * 11
    for v in values:
        if v is None:
            continue
        if v > 1.0 + 1e-9:
            counts[10] += 1
        else:
            counts[min(int(v * 10 + 1e-9), 9)] += 1
    return counts


def _int_bins(
    values_a: Sequence[int], values_b: Sequence[int], max_bins: int = 24
) -> tuple[list[str], list[float], list[float]]:
    vmax = max([*values_a, *values_b, 0])
    width = 1 if vmax + 1 <= max_bins else max(1, math.ceil(_nice_step(vmax + 1, max_bins)))
    nbins = vmax // width + 1
    a = [0.0] * nbins
    b = [0.0] * nbins
    for v in values_a:
        a[max(v, 0) // width] += 1
    for v in values_b:
        b[max(v, 0) // width] += 1
    labels = [str(i * width) if width == 1 else f"{i * width}–{i * width + width - 1}" for i in range(nbins)]
    return labels, a, b


def _winning_score(p: Mapping[str, Any]) -> Mapping[str, Any] | None:
    score = p.get("score")
    return score if isinstance(score, Mapping) else None



def _card(label: str, value: str, sub: str = "", cls: str = "") -> str:
    sub_html = f'<div class="sub">{sub}</div>' if sub else ""
    return (
        f'<div class="card {cls}"><div class="lbl">{_e(label)}</div><div class="val">{_e(value)}</div>{sub_html}</div>'
    )
