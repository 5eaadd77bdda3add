"""A replay sweep (``kubesched sweep --trace/--scenario``) on the terminal and as an HTML page: per
configuration (a policy), the GPU allocation against the arrived GPU demand and the fragmentation
ratio, mean and spread over the seeds — the axes of the ATC '23 "Beware of Fragmentation" paper's
allocation figure (the reference's ``experiments/analysis/merge_alloc_discrete.py`` curves).

Everything here reads the sweep document (``summary[].curves``, simulate/whatif/sweep.py
``aggregate``), so the page and the table show exactly what ``--output json`` holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from kubesched.simulate.report.charts import C_BEFORE, _e, _f, _legend, _num, _svg_open, _ticks
from kubesched.simulate.report.style import html_page

__all__ = ["demand_columns", "print_replay_sweep", "render_sweep_html"]

#: Arrived GPU demand (% of capacity) shown as table columns, those the runs reached.
DEMAND_POINTS = (50, 80, 100, 110, 120, 130, 150, 200)
#: One colour per configuration (report/whatif.py's series palette).
SERIES = ("#4f46e5", "#0d9488", "#d97706", "#e11d48", "#7c3aed", "#64748b", "#16a34a", "#0ea5e9")


def _curve(row: Mapping[str, Any], name: str) -> dict[int, Mapping[str, float]]:
    return {int(p): v for p, v in ((row.get("curves") or {}).get(name) or {}).items()}


def demand_columns(summary: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ``DEMAND_POINTS`` every configuration's curve reaches, and the highest demand all reach
    when it is well past the last of them."""
    reached = [set(_curve(row, "gpuAllocation")) for row in summary]
    common = set.intersection(*reached) if reached else set()
    points = [p for p in DEMAND_POINTS if p in common]
    top = max(common, default=None)
    if top is not None and (not points or top > points[-1] + 5):
        points.append(top)
    return points


def _mean_sd(v: Mapping[str, float] | None, runs: int, unit: str = "") -> str:
    """``mean ±sd``; ``*`` when fewer than ``runs`` seeds reached that demand."""
    if not v:
        return "—"
    sd = _num(v.get("sd"))
    partial = "*" if _num(v.get("runs", runs)) < runs else ""
    return f"{_num(v.get('mean')):.2f}{unit}" + (f" ±{sd:.2f}" if sd else "") + partial


def print_replay_sweep(console: Console, doc: Mapping[str, Any]) -> None:
    """The table: GPU allocation (%) at each arrived demand, the fragmentation ratio at 100 % demand
    and at the end, pods bound; mean ±sd over the seeds."""
    summary = doc.get("summary") or []
    where = f" of Dask {doc['daskScheduler']}" if doc.get("engine") == "dask" else ""
    runs = len(doc.get("results") or [])
    label = summary[0]["cluster"] if summary else ""
    t = Table(title=f"Sweep: {runs} replay(s) of {label} on {doc.get('workers')} worker(s){where}: GPU allocation "
              "(%) at the arrived GPU demand (% of capacity), mean ±sd over the seeds")
    points = demand_columns(summary)
    # The configuration names the row: never cut (the numbers wrap instead).
    t.add_column("configuration", no_wrap=True, min_width=max((len(str(r["config"])) for r in summary), default=0))
    t.add_column("seeds", justify="right")
    for p in points:
        t.add_column(f"{p} %", justify="right")
    for col in ("frag. 100 %", "frag. end", "bound"):
        t.add_column(col, justify="right")
    for row in summary:
        alloc, frag = _curve(row, "gpuAllocation"), _curve(row, "fragmentationRatio")
        n = int(row["runs"])
        end = row.get("fragmentationRatio") or {}
        end_pct = {k: _num(end.get(k)) * 100 for k in ("mean", "sd")} if end else None
        t.add_row(row["config"], str(n), *(_mean_sd(alloc.get(p), n) for p in points),
                  _mean_sd(frag.get(100), n), _mean_sd(end_pct, n),
                  f"{_num(row['scheduled']['mean']):,.0f}")
    console.print(t)
    console.print("frag.: the fragmentation ratio (%), fragmented GPU milli (the ATC '23 measure over the workload's "
                  "typical pods) of the idle GPU milli, at 100 % demand and at the end. *: not every seed's "
                  "demand came within one point of it (the mean of those that did).", style="dim")


# --- the page ----------------------------------------------------------------------------------------
Series = tuple[str, str, dict[int, Mapping[str, float]]]


def _curve_chart(chart: str, title: str, series: Sequence[Series], *, y_label: str, ideal: bool = False,
                 width: int = 760, height: int = 380) -> str:
    """Each configuration's mean as a line over the arrived GPU demand, its min–max over the
    seeds as a band; ``ideal``: the allocation if every arrived milli were placed (capped at 100)."""
    ml, mr, mt, mb = 62.0, 14.0, 56.0, 46.0
    pw, ph = width - ml - mr, height - mt - mb
    xs = sorted({p for _, _, curve in series for p in curve})
    x1 = float(max(xs, default=100))
    top, ticks = _ticks(max([_num(v["max"]) for _, _, c in series for v in c.values()] + [1.0]), 5)
    if ideal:
        top, ticks = _ticks(100.0, 5)
    parts = _svg_open(chart, width, height, title)
    legend = [(name, colour) for name, colour, _ in series] + ([("ideal", C_BEFORE)] if ideal else [])
    parts += _legend(legend, width - mr, 40)

    def px(v: float) -> float:
        return ml + pw * v / x1

    def py(v: float) -> float:
        return mt + ph - ph * min(_num(v), top) / top

    for t in ticks:
        parts.append(f'<line class="g" x1="{_f(ml)}" x2="{_f(ml + pw)}" y1="{_f(py(t))}" y2="{_f(py(t))}"/>')
        parts.append(f'<text class="tk" x="{_f(ml - 6)}" y="{_f(py(t) + 4)}" text-anchor="end">{t:g}%</text>')
    _, x_ticks = _ticks(x1, 6)
    for xv in (x for x in x_ticks if x <= x1):
        parts.append(f'<text class="tk" x="{_f(px(xv))}" y="{_f(mt + ph + 16)}" text-anchor="middle">{xv:g}%</text>')
    if ideal:
        pts = " ".join(f"{_f(px(x))},{_f(py(min(x, 100)))}" for x in (0.0, min(100.0, x1), x1))
        parts.append(f'<polyline fill="none" stroke="{C_BEFORE}" stroke-width="1.5" stroke-dasharray="5 4" '
                     f'points="{pts}"><title>ideal</title></polyline>')
    for name, colour, curve in series:
        ps = sorted(curve)
        if not ps:
            continue
        band = [f"{_f(px(p))},{_f(py(curve[p]['max']))}" for p in ps]
        band += [f"{_f(px(p))},{_f(py(curve[p]['min']))}" for p in reversed(ps)]
        parts.append(f'<polygon fill="{colour}" fill-opacity="0.15" stroke="none" points="{" ".join(band)}">'
                     f"<title>{_e(name)}: min–max over the seeds</title></polygon>")
        line = " ".join(f"{_f(px(p))},{_f(py(curve[p]['mean']))}" for p in ps)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{line}">'
                     f"<title>{_e(name)}: mean over the seeds</title></polyline>")
    parts.append(f'<line class="ax" x1="{_f(ml)}" x2="{_f(ml + pw)}" y1="{_f(mt + ph)}" y2="{_f(mt + ph)}"/>')
    parts.append(f'<text class="al" x="{_f(ml + pw / 2)}" y="{height - 6}" text-anchor="middle">'
                 "arrived GPU demand (% of GPU capacity)</text>")
    cy = mt + ph / 2
    parts.append(f'<text class="al" x="14" y="{_f(cy)}" text-anchor="middle" transform="rotate(-90 14 {_f(cy)})">'
                 f"{_e(y_label)}</text></svg>")
    return "".join(parts)


def _table(summary: Sequence[Mapping[str, Any]]) -> str:
    points = demand_columns(summary)
    head = "".join(f"<th>GPU allocated at {p} % demand</th>" for p in points)
    body = []
    for row in summary:
        alloc, frag = _curve(row, "gpuAllocation"), _curve(row, "fragmentationRatio")

        def cell(v: Mapping[str, float] | None) -> str:
            if not v:
                return "<td>—</td>"
            return (f'<td data-v="{_num(v["mean"])}">{_num(v["mean"]):.2f} %<br><small>sd {_num(v["sd"]):.2f}, '
                    f'{_num(v["min"]):.2f}–{_num(v["max"]):.2f}</small></td>')

        body.append(f'<tr><td class="name">{_e(row["config"])}</td><td>{row["runs"]}</td>'
                    + "".join(cell(alloc.get(p)) for p in points) + cell(frag.get(100)) + "</tr>")
    return ('<table class="sortable"><thead><tr><th>configuration</th><th>seeds</th>' + head
            + "<th>fragmentation ratio at 100 % demand</th></tr></thead><tbody>" + "".join(body)
            + "</tbody></table>")


def render_sweep_html(doc: Mapping[str, Any]) -> str:
    """The replay sweep document as one self-contained page."""
    summary = [row for row in doc.get("summary") or [] if isinstance(row, Mapping)]
    label = summary[0]["cluster"] if summary else ""
    series = [(str(row["config"]), SERIES[i % len(SERIES)]) for i, row in enumerate(summary)]
    alloc = _curve_chart("sweep-allocation", "GPU allocation against arrived GPU demand",
                         [(n, c, _curve(row, "gpuAllocation")) for (n, c), row in zip(series, summary, strict=True)],
                         y_label="GPU allocated (% of capacity)", ideal=True)
    frag = _curve_chart("sweep-fragmentation", "Fragmentation ratio against arrived GPU demand",
                        [(n, c, _curve(row, "fragmentationRatio")) for (n, c), row in zip(series, summary,
                                                                                           strict=True)],
                        y_label="fragmented (% of idle GPU milli)")
    seeds = sorted({r.get("seed") for r in doc.get("results") or []})
    intro = (f"<p>{len(doc.get('results') or [])} replay(s) of {_e(label)}: {len(summary)} configuration(s) × "
             f"seeds {_e(', '.join(str(s) for s in seeds))}. Lines: the mean over the seeds; bands: their min–max. "
             "Fragmentation ratio: the fragmented GPU milli (the ATC '23 measure over the workload's typical pods) of "
             "the idle GPU milli.</p>")
    return html_page(f"kubesched sweep: {label}", [
        f'<section id="sweep"><h1>Sweep: {_e(label)}</h1>{intro}'
        f'<div class="grid"><figure>{alloc}</figure><figure>{frag}</figure></div>{_table(summary)}</section>',
    ])
