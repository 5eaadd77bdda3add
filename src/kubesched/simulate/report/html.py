"""The simulation result as one self-contained HTML page (``--report report.html``).

Rendered from the JSON document of :func:`kubesched.simulate.report.json_doc.result_to_json`, so the
report, ``--output json`` and the terminal summary never disagree. Everything is inline: CSS, a few
lines of optional JS (table filter/sort) and the charts, which are SVG drawn here in Python — the
page opens offline, has no external URL in it, and still reads fine with scripts disabled.

Charts aggregate (histograms, top-N) rather than drawing one element per node or pod, so a
5,000-node / 10,000-pod run renders in well under a second into a file of a few hundred KB.
Every string that comes from the data (pod and node names, labels, messages) is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.api.readable import readable_quantity
from kubesched.simulate.report.charts import (
    _UTIL_LABELS,
    C_AFTER,
    C_BEFORE,
    C_REASON,
    MAX_FAILED_ROWS,
    MAX_NODE_ROWS,
    MAX_REASONS,
    RESOURCES,
    STATUS_COLOURS,
    _card,
    _duration,
    _e,
    _empty,
    _hbars,
    _int_bins,
    _node_util,
    _num,
    _pct,
    _pct0,
    _status_bar,
    _trunc,
    _util_histogram,
    _vbars,
)
from kubesched.simulate.report.gangs import gangs_section
from kubesched.simulate.report.pools import pools_section
from kubesched.simulate.report.scores import profiles_section, scores_sections
from kubesched.simulate.report.style import html_page

__all__ = ["render_html"]


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
    terminal = int(_num(summary.get("terminal")))
    if terminal:
        items.append(f"<li><b>{terminal:,} terminal pods</b> (Succeeded or Failed) in the input: not scheduled, "
                     "and they use no node's capacity.</li>")
    missing = int(_num(summary.get("preBoundOnMissingNodes")))
    if missing:
        items.append(f'<li class="warn"><b>{missing:,} pre-bound pods on nodes not in the input</b>: counted as '
                     "pre-bound, in no node's usage.</li>")
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
    tip = f"{readable_quantity(r, used)} / {readable_quantity(r, alloc)} (before {_pct(b)})"
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



def render_html(data: Mapping[str, Any]) -> str:
    """Render the simulation JSON document (``result_to_json``) as one self-contained HTML page."""
    # The what-if sections draw with this module's charts: imported here, not at the top (a cycle).
    from kubesched.simulate.report.preemption import preemption_section
    from kubesched.simulate.report.timeline import timeline_section
    from kubesched.simulate.report.whatif import whatif_sections

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
        timeline_section(data),
        _utilisation(summary, nodes),
        _nodes(nodes),
        pools_section(data),
        profiles_section(data, placements),
        *scores_sections(data, placements),
        _failures(data, placements),
        gangs_section(data),
        preemption_section(data, _hbars),
        "<footer>Generated by kubesched simulate. Self-contained: no network access needed.</footer>",
    ]
    return html_page(title, body)
