"""What-if pages and sections of the HTML report, drawn with the report's own cards, charts and
styles (report_charts.py, report_style.py): the drain section of ``kubesched simulate --drain
--report`` (report_drain.py) and the page of ``kubesched compare --report``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.api.readable import readable_quantity
from kubesched.simulate.report.charts import (
    _UTIL_LABELS,
    MAX_FAILED_ROWS,
    _e,
    _num,
    _pct,
    _vbars,
)
from kubesched.simulate.report.drain import drain_section
from kubesched.simulate.report.style import html_page

__all__ = ["render_compare_html", "whatif_sections"]


def whatif_sections(data: Mapping[str, Any]) -> list[str]:
    """HTML sections for the what-if parts of ``data`` (none when it has none)."""
    out = []
    if isinstance(data.get("drain"), Mapping):
        out.append(drain_section(data["drain"]))
    return out


# -- configuration comparison (kubesched compare --report) ---------------------------------------------
SERIES = ("#4f46e5", "#0d9488", "#d97706", "#e11d48", "#7c3aed", "#64748b")


def _compare_table(configs: Sequence[Mapping[str, Any]]) -> str:
    def util(u: Mapping[str, Any]) -> str:
        return (f"{_pct(_num(u.get('mean')))} ± {_pct(_num(u.get('stddev')))}"
                f"<br><span class='muted'>{_pct(_num(u.get('min')))}–{_pct(_num(u.get('max')))}</span>")

    def free(f: Any) -> str:
        if not isinstance(f, Mapping):
            return "–"
        cpu, memory = readable_quantity("cpu", _num(f.get("cpu"))), readable_quantity("memory", _num(f.get("memory")))
        return (f"{cpu} cpu, {memory}"
                f"<br><span class='muted'>{_e(f.get('node', ''))}</span>")

    rows: list[tuple[str, list[str]]] = [
        ("Profiles", [_e(", ".join(map(str, c.get("profiles") or []))) for c in configs]),
        ("Scheduled", [f"{int(_num(c.get('scheduled'))):,}" for c in configs]),
        ("Unschedulable", [f"{int(_num(c.get('unschedulable'))):,}" for c in configs]),
        ("Preemptions", [f"{int(_num(c.get('preemptions'))):,}" for c in configs]),
        ("Nodes used", [f"{int(_num(c.get('nodesUsed'))):,} of {int(_num(c.get('nodes'))):,}" for c in configs]),
        ("CPU requested, mean ± sd", [util((c.get("utilisation") or {}).get("cpu") or {}) for c in configs]),
        ("Memory requested, mean ± sd", [util((c.get("utilisation") or {}).get("memory") or {}) for c in configs]),
        ("Largest free CPU on a node", [free((c.get("fragmentation") or {}).get("largestFreeCpu")) for c in configs]),
        ("Largest free memory on a node",
         [free((c.get("fragmentation") or {}).get("largestFreeMemory")) for c in configs]),
        ("Wall time", [f"{_num(c.get('wallSeconds')):.2f} s" for c in configs]),
    ]
    head = "".join(f'<th class="n">{_e(c.get("label", ""))}</th>' for c in configs)
    body = "".join(f"<tr><td>{_e(name)}</td>{''.join(f'<td class=n>{v}</td>' for v in values)}</tr>"
                   for name, values in rows)
    return f'<table id="compare-table"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>'


def _free_cpu_bins(configs: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[float]]]:
    """Nodes by free CPU (whole cores), per configuration: the largest pod each node can still take."""
    per_config = []
    for c in configs:
        per_node = (c.get("fragmentation") or {}).get("freePerNode") or {}
        per_config.append([int(_num(v[0]) // 1000) for v in per_node.values() if isinstance(v, list) and v])
    top = max((max(v) for v in per_config if v), default=0)
    width = max(1, math.ceil((top + 1) / 16))
    nbins = top // width + 1
    counts = [[0.0] * nbins for _ in per_config]
    for i, values in enumerate(per_config):
        for v in values:
            counts[i][v // width] += 1
    labels = [str(b * width) if width == 1 else f"{b * width}–{b * width + width - 1}" for b in range(nbins)]
    return labels, counts


def render_compare_html(doc: Mapping[str, Any]) -> str:
    """The comparison document (``kubesched compare --output json``) as one self-contained page."""
    configs = [c for c in doc.get("configs") or [] if isinstance(c, Mapping)]
    labels = [str(c.get("label", "")) for c in configs]
    colours = [SERIES[i % len(SERIES)] for i in range(len(configs))]
    outcome = _vbars(
        "compare-outcomes", "Pods by outcome", ["Scheduled", "Unschedulable", "Preemptions"],
        [(label, colour, [_num(c.get("scheduled")), _num(c.get("unschedulable")), _num(c.get("preemptions"))])
         for label, colour, c in zip(labels, colours, configs, strict=True)],
        x_label="outcome", y_label="pods", value_labels=True, height=300,
    )
    spread = []
    for res, title in (("cpu", "CPU"), ("memory", "Memory")):
        hist = [[_num(v) for v in ((c.get("utilisationHistogram") or {}).get(res) or [0.0] * 11)] for c in configs]
        spread.append(_vbars(
            "compare-utilisation", f"Nodes by {title} requested (% of allocatable)", _UTIL_LABELS,
            [(label, colour, h) for label, colour, h in zip(labels, colours, hist, strict=True)],
            x_label=f"{title} requested, % of allocatable", y_label="nodes", width=600, height=300,
            extra=f' data-resource="{res}"',
        ))
    bins, counts = _free_cpu_bins(configs)
    fragmentation = _vbars(
        "compare-free-cpu", "Largest pod that still fits, per node: free CPU (cores)", bins,
        [(label, colour, cts) for label, colour, cts in zip(labels, colours, counts, strict=True)],
        x_label="free CPU on the node (whole cores)", y_label="nodes", width=600, height=300,
    )
    diffs = [d for d in doc.get("differences") or [] if isinstance(d, Mapping)]
    head = "".join(f"<th>{_e(label)}</th>" for label in labels)
    body = "".join(
        f'<tr><td class="name">{_e(d.get("pod", ""))}</td>'
        + "".join(f'<td class="name">{_e(o if o is not None else "–")}</td>' for o in d.get("outcomes") or [])
        + "</tr>"
        for d in diffs[:MAX_FAILED_ROWS]
    )
    if diffs:
        more = (f'<p class="more">… and {len(diffs) - MAX_FAILED_ROWS:,} more (see <code>--output json</code>).</p>'
                if len(diffs) > MAX_FAILED_ROWS else "")
        diff_html = (
            '<div class="filter"><input type="search" placeholder="Filter pods or nodes…" data-filter="differences" '
            f'aria-label="Filter"><span class="muted">{len(diffs):,} of {int(_num(doc.get("pods"))):,} pods</span>'
            '</div><div class="scroll tall"><table class="sortable" id="differences"><thead><tr><th>Pod</th>'
            f"{head}</tr></thead><tbody>{body}</tbody></table></div>{more}"
        )
    else:
        diff_html = '<p class="muted ok">Every pod has the same outcome under each configuration.</p>'
    source = str(doc.get("source") or "")
    sections = [
        "<header><div><h1>Configuration comparison</h1>"
        f'<div class="meta">Source <code>{_e(source or "—")}</code> · seed {_e(doc.get("seed", ""))} · '
        f'{len(configs)} configurations</div></div></header>',
        f'<section id="compare"><h2>Side by side</h2><div class="grid two"><div class="scroll">'
        f'{_compare_table(configs)}</div><figure>{outcome}</figure></div></section>',
        '<section id="compare-spread"><h2>How requests spread over the nodes</h2><div class="grid two">'
        + "".join(f"<figure>{c}</figure>" for c in spread) + "</div>"
        f'<div class="grid two" style="margin-top:14px"><figure>{fragmentation}</figure>'
        '<p class="muted">A node\'s free capacity is the largest pod it can still take. Bin-packing leaves a '
        "few nodes with much free room and many full ones; spreading leaves every node a little.</p></div>"
        "</section>",
        f'<section id="compare-differences"><h2>Pods placed differently</h2>{diff_html}</section>',
        "<footer>Generated by kubesched compare. Self-contained: no network access needed.</footer>",
    ]
    return html_page("kubesched compare — " + source, sections)
