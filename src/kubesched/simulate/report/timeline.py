"""The "Over time" section of the HTML report: the metrics a scenario replay sampled
(``timeline.samples`` of the document, engine/timeline.py) as line charts — allocation per
resource, pending and bound pods, idle and fragmented GPU milli over virtual time, and the GPU
allocation against the arrived GPU demand (the FGD paper's figure 7 axes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.simulate.report.charts import (
    C_AFTER,
    C_BEFORE,
    C_REASON,
    C_SCORE,
    Fmt,
    _card,
    _duration,
    _e,
    _f,
    _int,
    _legend,
    _num,
    _pct,
    _svg_open,
    _ticks,
)

#: Points drawn per line: longer series are thinned (every k-th sample, the last one kept).
MAX_POINTS = 600
C_GPU = "#d97706"  # amber-600


def _thin(n: int) -> list[int]:
    if n <= MAX_POINTS:
        return list(range(n))
    step = n / MAX_POINTS
    idx = sorted({int(i * step) for i in range(MAX_POINTS)} | {n - 1})
    return idx


def _lines(
    chart: str, title: str, xs: Sequence[float], series: Sequence[tuple[str, str, Sequence[float]]], *,
    x_label: str, y_label: str, x_fmt: Fmt, y_fmt: Fmt, y_max: float | None = None,
    width: int = 600, height: int = 300,
) -> str:
    """Lines over a shared x axis (steps: a metric holds its value until the next sample)."""
    ml, mr, mt, mb = 62.0, 14.0, 50.0, 46.0
    pw, ph = width - ml - mr, height - mt - mb
    idx = _thin(len(xs))
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    span = (x1 - x0) or 1.0
    vmax = max((_num(v) for _, _, vals in series for v in vals), default=0.0)
    top, ticks = _ticks(y_max if y_max is not None else max(vmax, 1e-9), 5)
    parts = _svg_open(chart, width, height, title)
    parts += _legend([(name, colour) for name, colour, _ in series], width - mr, 40)
    for t in ticks:
        y = mt + ph - ph * t / top
        parts.append(f'<line class="g" x1="{_f(ml)}" x2="{_f(ml + pw)}" y1="{_f(y)}" y2="{_f(y)}"/>')
        parts.append(f'<text class="tk" x="{_f(ml - 6)}" y="{_f(y + 4)}" text-anchor="end">{_e(y_fmt(t))}</text>')
    for k in range(5):
        xv = x0 + span * k / 4
        x = ml + pw * k / 4
        parts.append(f'<text class="tk" x="{_f(x)}" y="{_f(mt + ph + 16)}" text-anchor="middle">{_e(x_fmt(xv))}</text>')

    def px(v: float) -> float:
        return ml + pw * (v - x0) / span

    def py(v: float) -> float:
        return mt + ph - ph * min(_num(v), top) / top

    for name, colour, vals in series:
        pts: list[str] = []
        for j, i in enumerate(idx):
            if j:
                pts.append(f"{_f(px(xs[i]))},{_f(py(vals[idx[j - 1]]))}")
            pts.append(f"{_f(px(xs[i]))},{_f(py(vals[i]))}")
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(pts)}">'
                     f"<title>{_e(name)}</title></polyline>")
    parts.append(f'<line class="ax" x1="{_f(ml)}" x2="{_f(ml + pw)}" y1="{_f(mt + ph)}" y2="{_f(mt + ph)}"/>')
    parts.append(f'<text class="al" x="{_f(ml + pw / 2)}" y="{height - 6}" text-anchor="middle">{_e(x_label)}</text>')
    cy = mt + ph / 2
    parts.append(f'<text class="al" x="14" y="{_f(cy)}" text-anchor="middle" transform="rotate(-90 14 {_f(cy)})">'
                 f"{_e(y_label)}</text></svg>")
    return "".join(parts)


def _pct_axis(v: float) -> str:
    return f"{v:g}%"


def timeline_section(data: Mapping[str, Any]) -> str:
    """The section, or "" when the document has no timeline."""
    timeline = data.get("timeline")
    if not isinstance(timeline, Mapping):
        return ""
    cols: Mapping[str, Sequence[float]] = timeline.get("samples") or {}
    ts = [_num(v) for v in cols.get("t") or []]
    if not ts:
        return ""
    sequential = bool(timeline.get("sequential"))
    xs = [_num(v) for v in cols.get("arrivedPods") or []] if sequential else ts
    x_label = "pods arrived" if sequential else "virtual time"
    x_fmt: Fmt = _int if sequential else _duration

    def pct(col: str) -> list[float]:
        return [_num(v) * 100 for v in cols.get(col) or []]

    alloc = _lines("timeline-allocation", "Allocation", xs, [
        ("cpu", C_AFTER, pct("cpuAllocation")), ("memory", C_SCORE, pct("memoryAllocation")),
        ("GPU", C_GPU, pct("gpuAllocation")),
    ], x_label=x_label, y_label="allocated (% of allocatable)", x_fmt=x_fmt, y_fmt=_pct_axis, y_max=100)
    pods = _lines("timeline-pods", "Pods", xs, [
        ("bound", C_AFTER, [_num(v) for v in cols.get("boundPods") or []]),
        ("pending", C_REASON, [_num(v) for v in cols.get("pendingPods") or []]),
    ], x_label=x_label, y_label="pods", x_fmt=x_fmt, y_fmt=_int)
    frag = _lines("timeline-fragmentation", "Idle and fragmented GPU", xs, [
        ("idle", C_BEFORE, [_num(v) / 1000 for v in cols.get("idleGpuMilli") or []]),
        ("fragmented", C_REASON, [_num(v) / 1000 for v in cols.get("fragmentedGpuMilli") or []]),
    ], x_label=x_label, y_label="GPUs (1000 milli)", x_fmt=x_fmt, y_fmt=_int)
    capacity = [_num(v) for v in cols.get("gpuMilliCapacity") or []]
    demand = [(_num(a) / c * 100 if c else 0.0) for a, c in zip(cols.get("arrivedGpuMilli") or [], capacity,
                                                                   strict=False)]
    by_demand = _lines("timeline-demand", "GPU allocation against arrived GPU demand", demand, [
        ("GPU allocated", C_GPU, pct("gpuAllocation")), ("ideal", C_BEFORE, [min(d, 100.0) for d in demand]),
    ], x_label="arrived GPU demand (% of capacity)", y_label="allocated (%)", x_fmt=_pct_axis, y_fmt=_pct_axis,
        y_max=100)
    at = timeline.get("gpuAllocationAtArrivedDemand") or {}
    cards = [
        _card("Arrived", f"{_int(_num(timeline.get('arrived')))}", f"of {_int(_num(timeline.get('arrivals')))} pods"),
        _card("Departed", _int(_num(timeline.get("departed"))),
              f"{_int(_num(timeline.get('deletedWithNode')))} with their node"),
        *(_card(f"GPU allocated at {k} % demand", f"{v:.2f}%" if isinstance(v, int | float) else "—",
                "as the ATC '23 simulator's expected results") for k, v in at.items()),
        _card("Fragmented GPU at the end", _pct(_num((timeline.get("final") or {}).get("fragmentedGpuMilli"))
                                                / max(_num((timeline.get("final") or {}).get("idleGpuMilli")), 1)),
              "of the idle GPU milli"),
    ]
    return (
        '<section id="timeline"><h2>Over time</h2>'
        f'<div class="cards">{"".join(cards)}</div>'
        f'<div class="grid two"><figure>{alloc}</figure><figure>{pods}</figure>'
        f'<figure>{frag}</figure><figure>{by_demand}</figure></div></section>'
    )
