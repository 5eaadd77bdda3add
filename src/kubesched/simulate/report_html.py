"""The simulation result as one self-contained HTML page (``--report report.html``).

Rendered from the JSON document of :func:`kubesched.simulate.report_json.result_to_json`, so the
report, ``--output json`` and the terminal summary never disagree. Everything is inline: CSS, a few
lines of optional JS (table filter/sort) and the charts, which are SVG drawn here in Python — the
page opens offline, has no external URL in it, and still reads fine with scripts disabled.

Charts aggregate (histograms, top-N) rather than drawing one element per node or pod, so a
5,000-node / 10,000-pod run renders in well under a second into a file of a few hundred KB.
Every string that comes from the data (pod and node names, labels, messages) is HTML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["render_html"]

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


def _quantity(resource: str, v: float) -> str:
    if resource == "cpu":
        return f"{v / 1000:.2f}".rstrip("0").rstrip(".")
    if resource in ("memory", "ephemeral-storage"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if v >= size:
                return f"{v / size:.1f}{unit}"
        return f"{v:.0f}"
    return _int(v)


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


# --- sections ---------------------------------------------------------------------------------------
def _card(label: str, value: str, sub: str = "", cls: str = "") -> str:
    sub_html = f'<div class="sub">{sub}</div>' if sub else ""
    return (
        f'<div class="card {cls}"><div class="lbl">{_e(label)}</div><div class="val">{_e(value)}</div>{sub_html}</div>'
    )


def _summary(summary: Mapping[str, Any], profiles: Sequence[Any]) -> str:
    g = summary.get
    pods = int(_num(g("pods")))
    simulated = int(_num(g("simulated")))
    counts = [
        ("Scheduled", int(_num(g("scheduled")))),
        ("PreBound", int(_num(g("preBound")))),
        ("Unschedulable", int(_num(g("unschedulable")))),
        ("Error", int(_num(g("errors")))),
        ("Waiting", int(_num(g("waiting")))),
        ("Pending", int(_num(g("pending")))),
        ("Gated", int(_num(g("gated")))),
    ]
    c = dict(counts)

    def share(n: int, of: int) -> str:
        return _e(f"{_pct(n / of)} of simulated") if of else ""

    cards = [
        _card("Scheduled", f"{c['Scheduled']:,}", share(c["Scheduled"], simulated), "ok"),
        _card("Unschedulable", f"{c['Unschedulable']:,}", share(c["Unschedulable"], simulated), "bad"),
        _card("Pre-bound", f"{c['PreBound']:,}", "already on a node"),
        _card("Pending", f"{c['Pending']:,}", "not attempted", "warn" if c["Pending"] else ""),
        _card("Nodes", f"{int(_num(g('nodes'))):,}", f"{pods:,} pods in total"),
        _card("Throughput", f"{_num(g('podsPerSecond')):,.1f}", "pods / s (wall clock)"),
        _card("Virtual time", _duration(_num(g("virtualSeconds"))), _e(f"wall {_duration(_num(g('wallSeconds')))}")),
        _card("Attempts", f"{int(_num(g('attempts'))):,}", _e(f"for {simulated:,} simulated pods")),
    ]
    if c["Error"]:
        cards.insert(2, _card("Errors", f"{c['Error']:,}", "plugin / bind errors", "bad"))
    if c["Waiting"]:
        cards.insert(3, _card("Waiting", f"{c['Waiting']:,}", "held at Permit", "warn"))
    if c["Gated"]:
        cards.insert(4, _card("Gated", f"{c['Gated']:,}", "held by PreEnqueue (scheduling gates)", "warn"))
    legend = "".join(
        f'<span><i style="background:{STATUS_COLOURS[n]}"></i>{_e(n)} {v:,}</span>' for n, v in counts if v
    )
    return (
        '<section id="summary"><div class="cards">' + "".join(cards) + "</div>"
        f'<div class="statusbar">{_status_bar(counts)}<div class="slegend">{legend}</div></div></section>'
    )


def _notes(data: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    items: list[str] = []
    if summary.get("interrupted"):
        items.append(
            '<li class="warn"><b>Interrupted.</b> The run was stopped before every pod was decided; '
            "pods still pending are counted as <i>Pending</i>.</li>"
        )
    skipped = data.get("skippedObjects") or {}
    if skipped:
        lst = ", ".join(f"<code>{_e(k)}</code> × {int(_num(v)):,}" for k, v in sorted(skipped.items()))
        items.append(f"<li><b>Skipped objects</b> (not simulated): {lst}.</li>")
    reassigned = data.get("reassignedSchedulerNames") or {}
    if reassigned:
        lst = ", ".join(f"<code>{_e(k)}</code> × {int(_num(v)):,}" for k, v in sorted(reassigned.items()))
        first = (data.get("profiles") or ["the first profile"])[0]
        items.append(
            f"<li><b>Reassigned schedulerNames</b>: pods naming no configured profile were run with "
            f"<code>{_e(first)}</code>: {lst}.</li>"
        )
    if not items:
        return ""
    return f'<section id="notes"><ul class="notes">{"".join(items)}</ul></section>'


def _utilisation(summary: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str:
    before = summary.get("utilisationBefore") or {}
    after = summary.get("utilisationAfter") or {}
    b = [_num(before.get(r)) * 100 for r in RESOURCES]
    a = [_num(after.get(r)) * 100 for r in RESOURCES]
    top = max(100.0, *b, *a)
    overview = _vbars(
        "utilisation",
        "Cluster-wide utilisation (requested / allocatable)",
        ["CPU", "Memory", "Pods"],
        [("before", C_BEFORE, b), ("after", C_AFTER, a)],
        x_label="resource",
        y_label="% of allocatable",
        y_fmt=_pct0,
        tip_fmt=lambda v: f"{v:.1f}%",
        y_max=top,
        value_labels=True,
        height=300,
    )
    rows = "".join(
        f"<tr><td>{name}</td><td class='n'>{bv:.1f}%</td><td class='n'>{av:.1f}%</td>"
        f"<td class='n {'up' if av > bv else ''}'>{av - bv:+.1f} pp</td></tr>"
        for name, bv, av in zip(("CPU", "Memory", "Pods"), b, a, strict=True)
    )
    table = (
        '<table class="compact"><thead><tr><th>Resource</th><th class="n">Before</th><th class="n">After</th>'
        f'<th class="n">Δ</th></tr></thead><tbody>{rows}</tbody></table>'
    )
    dists: list[str] = []
    for r, label in zip(RESOURCES, ("CPU", "Memory", "Pods"), strict=True):
        title = f"Nodes by {label} utilisation"
        extra = f' data-resource="{r}"'
        if not nodes:
            dists.append(_empty("utilisation-nodes", title, "No nodes in the cluster", 420, 260, extra))
            continue
        hb = _util_histogram(_node_util(n, "requestedBefore", r) for n in nodes)
        ha = _util_histogram(_node_util(n, "requestedAfter", r) for n in nodes)
        dists.append(
            _vbars(
                "utilisation-nodes",
                title,
                _UTIL_LABELS,
                [("before", C_BEFORE, hb), ("after", C_AFTER, ha)],
                x_label=f"{label} requested, % of allocatable",
                y_label="nodes",
                width=420,
                height=260,
                extra=extra,
            )
        )
    return (
        '<section id="utilisation"><h2>Cluster utilisation</h2>'
        f'<div class="grid two"><figure>{overview}</figure><div class="side">'
        '<p class="muted">Sum of requests over the sum of allocatable on schedulable and cordoned nodes, '
        "before the simulated pods were placed and after.</p>"
        f"{table}</div></div>"
        f'<div class="grid three">{"".join(f"<figure>{d}</figure>" for d in dists)}</div></section>'
    )


def _util_cell(node: Mapping[str, Any], r: str) -> tuple[str, float]:
    ub = _node_util(node, "requestedBefore", r)
    ua = _node_util(node, "requestedAfter", r)
    if ua is None:
        return '<td class="n" data-v="-1">—</td>', -1.0
    b = ub or 0.0
    alloc = _num((node.get("allocatable") or {}).get(r))
    used = _num((node.get("requestedAfter") or {}).get(r)) if r != "pods" else _num(node.get("podsAfter"))
    tip = f"{_quantity(r, used)} / {_quantity(r, alloc)} (before {_pct(b)})"
    cls = " hot" if ua > 0.9 else ""
    return (
        f'<td class="n" data-v="{ua:.4f}" title="{_e(tip)}"><div class="meter{cls}">'
        f'<span class="b" style="width:{min(b, 1) * 100:.1f}%"></span>'
        f'<span class="a" style="width:{min(ua, 1) * 100:.1f}%"></span></div>{_pct(ua)}</td>',
        ua,
    )


def _nodes(nodes: Sequence[Mapping[str, Any]]) -> str:
    before = [int(_num(n.get("podsBefore"))) for n in nodes]
    after = [int(_num(n.get("podsAfter"))) for n in nodes]
    if nodes:
        labels, hb, ha = _int_bins(before, after)
        chart = _vbars(
            "pods-per-node",
            "Pods per node",
            labels,
            [("before", C_BEFORE, hb), ("after", C_AFTER, ha)],
            x_label="pods on the node",
            y_label="nodes",
            width=440,
            height=330,
        )
    else:
        chart = _empty("pods-per-node", "Pods per node", "No nodes in the cluster", width=440, height=330)

    def key(n: Mapping[str, Any]) -> float:
        return max((_node_util(n, "requestedAfter", r) or 0.0) for r in RESOURCES)

    top = sorted(nodes, key=key, reverse=True)[:MAX_NODE_ROWS]
    rows: list[str] = []
    for n in top:
        cells = [_util_cell(n, r)[0] for r in RESOURCES]
        taints = n.get("taints") or []
        flags = "".join(
            f'<span class="chip" title="{_e(t.get("key", ""))}={_e(t.get("value", ""))}:{_e(t.get("effect", ""))}">'
            f"{_e(_trunc(str(t.get('key', '')), 28))}</span>"
            for t in taints[:3]
            if isinstance(t, Mapping)
        )
        if len(taints) > 3:
            flags += f'<span class="chip">+{len(taints) - 3}</span>'
        if n.get("unschedulable"):
            flags = '<span class="chip warn">cordoned</span>' + flags
        pb, pa = int(_num(n.get("podsBefore"))), int(_num(n.get("podsAfter")))
        rows.append(
            f'<tr><td class="name node" title="{_e(n.get("name", ""))}">{_e(n.get("name", ""))}</td>'
            f'{"".join(cells)}<td class="n" data-v="{pa}">{pb:,} → {pa:,}</td><td>{flags}</td></tr>'
        )
    if rows:
        more = len(nodes) - len(top)
        caption = f"Top {len(top):,} of {len(nodes):,} nodes by highest utilisation after" if more else "All nodes"
        table = (
            f'<table class="sortable"><caption>{_e(caption)} · bar: <i class="kb"></i> before '
            '<i class="ka"></i> after</caption><thead><tr><th>Node</th><th class="n">CPU</th>'
            '<th class="n">Memory</th><th class="n">Pod slots</th><th class="n">Pods</th><th>Taints</th></tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table>"
        )
    else:
        table = '<p class="muted">No nodes.</p>'
    return (
        '<section id="nodes"><h2>Nodes</h2>'
        f'<div class="grid nodes"><figure>{chart}</figure><div class="scroll">{table}</div></div></section>'
    )


def _scores(placements: Sequence[Mapping[str, Any]]) -> str:
    totals: list[float] = []
    plugin_sum: dict[str, float] = {}
    for p in placements:
        if p.get("status") != "Scheduled":
            continue
        win = _winning_score(p)
        if win is None:
            continue
        totals.append(_num(win.get("total")))
        for plugin, v in (win.get("plugins") or {}).items():
            plugin_sum[str(plugin)] = plugin_sum.get(str(plugin), 0.0) + _num(v)
    if totals:
        lo, hi = min(totals), max(totals)
        width = max(1.0, _nice_step(hi - lo, 20)) if hi > lo else 1.0
        start = math.floor(lo / width) * width
        nbins = int((hi - start) // width) + 1
        counts = [0.0] * nbins
        for t in totals:
            counts[min(int((t - start) // width), nbins - 1)] += 1
        labels = [_int(start + i * width) for i in range(nbins)]
        hist = _vbars(
            "scores",
            f"Winning node's total score ({len(totals):,} scheduled pods)",
            labels,
            [("pods", C_SCORE, counts)],
            x_label="total score of the chosen node" + (f" (bins of {_int(width)})" if width > 1 else ""),
            y_label="pods",
        )
    else:
        hist = _empty("scores", "Winning node's total score", "No scored placements", height=320)
    if plugin_sum and totals:
        n = len(totals)
        rows = sorted(((k, v / n) for k, v in plugin_sum.items()), key=lambda kv: (-kv[1], kv[0]))
        plugins = _hbars(
            "scores-plugins",
            "Average weighted score contribution per plugin",
            rows,
            colour=C_PLUGIN,
            x_label="average weighted score on the chosen node",
            value_fmt=lambda v: f"{v:,.1f}",
            label_chars=34,
        )
    else:
        plugins = _empty("scores-plugins", "Average score contribution per plugin", "No per-plugin scores", height=320)
    return (
        '<section id="scores"><h2>Scores</h2>'
        f'<div class="grid two"><figure>{hist}</figure><figure>{plugins}</figure></div></section>'
    )


def _failures(data: Mapping[str, Any], placements: Sequence[Mapping[str, Any]]) -> str:
    reasons = data.get("unschedulableReasons") or {}
    ranked = sorted(((str(k), _num(v)) for k, v in reasons.items()), key=lambda kv: (-kv[1], kv[0]))
    if ranked:
        shown = ranked[:MAX_REASONS]
        if len(ranked) > MAX_REASONS:
            folded = ranked[MAX_REASONS:]
            shown.append((f"… {len(folded):,} more reasons (at most {int(folded[0][1]):,} pods each)", 0.0))
        chart = _hbars(
            "unschedulable-reasons",
            "Unschedulable reasons (pods citing each)",
            shown,
            colour=C_REASON,
            x_label="unschedulable pods",
            label_chars=64,
            width=900,
        )
    else:
        chart = _empty(
            "unschedulable-reasons", "Unschedulable reasons", "No unschedulable pods — every pod fit", width=900
        )
    failed = [p for p in placements if p.get("status") in ("Unschedulable", "Error")]
    rows = []
    for p in failed[:MAX_FAILED_ROWS]:
        status = str(p.get("status", ""))
        msg = str(p.get("message") or "")
        rows.append(
            f'<tr><td class="name">{_e(p.get("pod", ""))}</td><td><span class="st st-{_e(status)}">'
            f'{_e(status)}</span></td><td class="nw">{_e(p.get("profile", ""))}</td>'
            f'<td class="n" data-v="{int(_num(p.get("attempts")))}">{int(_num(p.get("attempts"))):,}</td>'
            f'<td class="msg">{_e(msg)}</td></tr>'
        )
    if rows:
        rest = len(failed) - len(rows)
        more = (
            f'<p class="more">… and {rest:,} more unschedulable or failed pods not listed '
            f"(see <code>--output json</code>).</p>"
            if rest
            else ""
        )
        table = (
            '<div class="filter"><input type="search" placeholder="Filter pods or messages…" '
            f'data-filter="failed" aria-label="Filter"><span class="muted">{len(failed):,} pods</span></div>'
            '<div class="scroll tall"><table class="sortable" id="failed"><thead><tr><th>Pod</th><th>Status</th>'
            '<th>Profile</th><th class="n">Attempts</th><th>Message</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>{more}"
        )
    else:
        table = '<p class="muted ok">No unschedulable or failed pods.</p>'
    return (
        '<section id="failures"><h2>Why pods did not schedule</h2>'
        f'<figure class="wide">{chart}</figure>{table}</section>'
    )


# --- page -------------------------------------------------------------------------------------------
_CSS = """
:root{--fg:#1e293b;--muted:#64748b;--bg:#f1f5f9;--panel:#fff;--line:#e2e8f0;--accent:#4f46e5;
--ok:#16a34a;--bad:#e11d48;--warn:#d97706}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,"Noto Sans",sans-serif;-webkit-font-smoothing:antialiased}
main{max-width:1320px;margin:0 auto;padding:24px 28px 48px}
header{display:flex;flex-wrap:wrap;align-items:flex-end;justify-content:space-between;gap:12px;margin-bottom:18px}
h1{font-size:24px;margin:0;letter-spacing:-.01em}
h2{font-size:17px;margin:0 0 12px;letter-spacing:-.01em}
.meta{color:var(--muted);font-size:13px}.meta code{color:var(--fg)}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef2ff;padding:1px 5px;
border-radius:4px}
section{background:var(--panel);border:1px solid var(--line);border-radius:12px;padding:18px 20px;margin:0 0 18px;
box-shadow:0 1px 2px rgba(15,23,42,.04)}
#summary{background:none;border:0;box-shadow:none;padding:0}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(132px,1fr));gap:12px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:12px 14px;
border-top:3px solid var(--line)}
.card.ok{border-top-color:var(--ok)}.card.bad{border-top-color:var(--bad)}.card.warn{border-top-color:var(--warn)}
.card .lbl{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:600}
.card .val{font-size:24px;white-space:nowrap;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.25}
.card .sub{font-size:12px;color:var(--muted)}
.statusbar{margin-top:12px;background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:10px 14px}
svg.status{width:100%;height:14px;display:block;border-radius:7px;overflow:hidden}
.slegend{display:flex;flex-wrap:wrap;gap:16px;margin-top:8px;font-size:12.5px;color:var(--muted)}
.slegend i,.kb,.ka{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;
vertical-align:-1px}
.kb{background:#94a3b8}.ka{background:#4f46e5}
.notes{margin:0;padding-left:18px}.notes li{margin:3px 0}.notes li.warn{color:#92400e}
.grid{display:grid;gap:18px;align-items:start}
.grid.two{grid-template-columns:repeat(auto-fit,minmax(460px,1fr))}
.grid.nodes{grid-template-columns:minmax(0,4fr) minmax(0,7fr)}
@media (max-width:1100px){.grid.nodes{grid-template-columns:1fr}}
.grid.three{grid-template-columns:repeat(auto-fit,minmax(320px,1fr));margin-top:14px}
figure{margin:0}figure.wide{max-width:900px}
svg.chart{width:100%;height:auto;display:block;overflow:visible}
svg.chart text{font-family:inherit;font-size:12px;fill:#334155}
svg.chart .t{font-size:14.5px;font-weight:650;fill:#0f172a}
svg.chart .tk{fill:#64748b;font-size:11px;font-variant-numeric:tabular-nums}
svg.chart .al{fill:#475569;font-size:12px;font-weight:600}
svg.chart .lg{fill:#334155}
svg.chart .vl{font-size:11px;fill:#334155;font-variant-numeric:tabular-nums}
svg.chart .rl{font-size:12px;fill:#1e293b}
svg.chart .empty{fill:#64748b;font-size:14px}
svg.chart .g{stroke:#e2e8f0;stroke-width:1}
svg.chart .ax{stroke:#94a3b8;stroke-width:1}
svg.chart rect:hover{opacity:.8}
.side p{margin:4px 0 12px}
table{border-collapse:collapse;width:100%;font-size:13px}
caption{text-align:left;color:var(--muted);font-size:12.5px;padding-bottom:6px}
th,td{padding:6px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);font-weight:600;
background:#f8fafc;position:sticky;top:0}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:hover{color:var(--fg)}
th.n,td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.up{color:var(--accent);font-weight:600}
td.name{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;word-break:break-all}
td.node{max-width:190px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
td.msg{color:#334155;max-width:640px}
tbody tr:hover{background:#f8fafc}
.compact{max-width:420px}
.meter{display:inline-block;position:relative;width:44px;height:8px;border-radius:4px;background:#eef2f7;
margin-right:8px;vertical-align:0;overflow:hidden}
.meter span{position:absolute;left:0;top:0;bottom:0}
.meter .a{background:#4f46e5;opacity:.85}.meter .b{background:#94a3b8;z-index:1;height:3px;top:auto}
.meter.hot .a{background:#e11d48}
.chip{display:inline-block;font-size:11.5px;padding:0 7px;border-radius:10px;background:#f1f5f9;
border:1px solid var(--line);margin:0 4px 2px 0;white-space:nowrap}
.chip.warn{background:#fef3c7;border-color:#fde68a;color:#92400e}
.st{font-size:12px;font-weight:600;padding:1px 8px;border-radius:10px;white-space:nowrap}
.st-Unschedulable{background:#ffe4e6;color:#9f1239}.st-Error{background:#fecdd3;color:#881337}
.scroll{overflow:auto;max-height:560px}.scroll.tall{max-height:640px}
.filter{display:flex;gap:12px;align-items:center;margin:16px 0 8px}
.filter input{font:inherit;padding:6px 10px;border:1px solid #cbd5e1;border-radius:8px;width:min(420px,100%)}
td.nw{white-space:nowrap}.muted{color:var(--muted)}.ok{color:var(--ok)}.more{color:var(--muted);font-size:13px}
footer{color:var(--muted);font-size:12px;text-align:center}
@media (max-width:700px){main{padding:14px}.grid.two,.grid.three{grid-template-columns:1fr}
section{padding:14px}}
@media print{body{background:#fff}section{box-shadow:none;break-inside:avoid}.filter{display:none}}
"""

_JS = """
(function(){
document.querySelectorAll('input[data-filter]').forEach(function(inp){
  var rows=document.getElementById(inp.dataset.filter).tBodies[0].rows;
  inp.addEventListener('input',function(){var q=inp.value.toLowerCase();
    for(var i=0;i<rows.length;i++){rows[i].style.display=rows[i].textContent.toLowerCase().indexOf(q)<0?'none':'';}});
});
document.querySelectorAll('table.sortable').forEach(function(t){
  t.tHead.rows[0].querySelectorAll('th').forEach(function(th,col){
    var asc=false;th.addEventListener('click',function(){asc=!asc;
      var b=t.tBodies[0],rs=Array.prototype.slice.call(b.rows);
      rs.sort(function(x,y){var a=x.cells[col],c=y.cells[col];
        var va=a.dataset.v!==undefined?parseFloat(a.dataset.v):a.textContent;
        var vc=c.dataset.v!==undefined?parseFloat(c.dataset.v):c.textContent;
        var r=typeof va==='number'?va-vc:String(va).localeCompare(String(vc));return asc?r:-r;});
      rs.forEach(function(r){b.appendChild(r);});});});
});
})();
"""


def render_html(data: Mapping[str, Any]) -> str:
    """Render the simulation JSON document (``result_to_json``) as one self-contained HTML page."""
    # The what-if sections draw with this module's charts: imported here, not at the top (a cycle).
    from kubesched.simulate.report_preemption import preemption_section
    from kubesched.simulate.report_whatif import whatif_sections

    summary: Mapping[str, Any] = data.get("summary") or {}
    nodes: list[Mapping[str, Any]] = [n for n in data.get("nodes") or [] if isinstance(n, Mapping)]
    placements: list[Mapping[str, Any]] = [p for p in data.get("placements") or [] if isinstance(p, Mapping)]
    profiles = [str(p) for p in data.get("profiles") or []]
    source = str(data.get("source") or "")
    version = str(data.get("kubeschedVersion") or "")
    title = f"kubesched simulation — {source}" if source else "kubesched simulation"
    prof = " ".join(f"<code>{_e(p)}</code>" for p in profiles) or "—"
    body = [
        "<header><div><h1>Scheduling simulation</h1>"
        f'<div class="meta">Source <code>{_e(source or "—")}</code> · profiles {prof}</div></div>'
        f'<div class="meta">kubesched {_e(version or "?")} · report schema v{_e(data.get("schemaVersion", "?"))}'
        "</div></header>",
        _summary(summary, profiles),
        _notes(data, summary),
        *whatif_sections(data),
        _utilisation(summary, nodes),
        _nodes(nodes),
        _scores(placements),
        _failures(data, placements),
        preemption_section(data, _hbars),
        "<footer>Generated by kubesched simulate. Self-contained: no network access needed.</footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>"
        + "".join(body)
        + f"</main><script>{_JS}</script></body></html>\n"
    )
