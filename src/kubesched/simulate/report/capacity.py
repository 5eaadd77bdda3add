"""The page of ``kubesched capacity --report FILE.html``, drawn with the report's cards, charts and
styles (report_charts.py, report_style.py) from the capacity JSON document (capacity_command.py):

* per workload, how many more replicas fit: where they go (the top nodes and a histogram of
  replicas per node, so a cluster of thousands of nodes stays a page of fixed size), and what stops
  the next one (the FitError, and how many nodes gave each reason, in the scheduler's words);
* per node template, the fewest nodes to add so that everything fits, its cost (the cheapest named),
  and every simulation of the search (nodes added → pods left unplaced).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.simulate.report.charts import (
    C_AFTER,
    C_REASON,
    C_SCORE,
    MAX_REASONS,
    _card,
    _duration,
    _e,
    _empty,
    _hbars,
    _int_bins,
    _num,
    _vbars,
)
from kubesched.simulate.report.style import html_page

__all__ = ["render_capacity_html", "victim_fate"]

#: Nodes drawn in a workload's "most replicas" chart; the rest are in the histogram.
TOP_NODES = 15
#: Pods listed per "cannot help" / "still unplaced" list.
MAX_POD_ROWS = 50


def _rows(items: Any) -> list[Mapping[str, Any]]:
    return [x for x in items or [] if isinstance(x, Mapping)]


def _top(chart: str, title: str, counts: Mapping[str, Any], colour: str, x_label: str, unit: str) -> str:
    ranked = sorted(((str(k), _num(v)) for k, v in counts.items()), key=lambda kv: (-kv[1], kv[0]))
    if not ranked:
        return _empty(chart, title, f"No {unit}")
    shown = ranked[:TOP_NODES]
    if len(ranked) > TOP_NODES:
        shown.append((f"… {len(ranked) - TOP_NODES:,} more nodes (at most {int(ranked[TOP_NODES][1]):,} each)", 0.0))
    return _hbars(chart, title, shown, colour=colour, x_label=x_label, label_chars=40)


def _fit(i: int, f: Mapping[str, Any], cluster_nodes: int) -> str:
    per_node = f.get("perNode") or {}
    fits, used = int(_num(f.get("fits"))), int(_num(f.get("nodesUsed")))
    limit = f.get("limit") or {}
    reasons = limit.get("reasons") or {}
    message = str(limit.get("message") or "")
    most = max((int(_num(v)) for v in per_node.values()), default=0)
    top_reason = max(reasons.items(), key=lambda kv: _num(kv[1]))[0] if reasons else ""
    cards = [
        _card("More replicas fit", f"{fits:,}", "beyond what the cluster runs", "ok" if fits else "bad"),
        _card("Nodes used", f"{used:,}", _e(f"of {cluster_nodes:,} nodes") if cluster_nodes else ""),
        _card("Most on one node", f"{most:,}", "replicas"),
        _card("Limit", "pod slots" if f.get("slotsExhausted") else f"{len(reasons):,} reason(s)",
              _e(top_reason) if top_reason else "every free pod slot is used", "warn"),
    ]
    counts = [int(_num(v)) for v in per_node.values()]
    counts += [0] * max(0, cluster_nodes - len(counts))  # nodes that took none
    labels, hist, _ = _int_bins(counts, [])
    histogram = _vbars(f"capacity-histogram-{i}", "Nodes by replicas they take", labels,
                       [("nodes", C_SCORE, hist)], x_label="replicas placed on the node", y_label="nodes",
                       height=260)
    top = _top(f"capacity-top-nodes-{i}", f"Most replicas per node (top {TOP_NODES})", per_node, C_AFTER,
               "replicas", "replica fits")
    ranked = sorted(((str(k), _num(v)) for k, v in reasons.items()), key=lambda kv: (-kv[1], kv[0]))
    if ranked:
        shown = ranked[:MAX_REASONS]
        reason_chart = _hbars(f"capacity-reasons-{i}", "What stops the next replica (nodes giving each reason)",
                              shown, colour=C_REASON, x_label="nodes", label_chars=56)
    else:
        reason_chart = _empty(f"capacity-reasons-{i}", "What stops the next replica",
                              "No replica failed: every free pod slot is used")
    note = f'<p class="msg"><code>{_e(message)}</code></p>' if message else ""
    if f.get("clusterUnplaced"):
        note += (f'<p class="muted">{int(_num(f["clusterUnplaced"])):,} pending pod(s) of the cluster itself did not '
                 "fit (placed first, before the replicas).</p>")
    note += _pods_list("Evicted by the preemptions of the cluster's pending pods", _victims(f))
    return (
        f'<div class="capacity-fit" id="capacity-fit-{i}"><h3>{_e(f.get("workload", ""))}</h3>'
        f'<div class="cards">{"".join(cards)}</div>'
        f'<div class="grid two" style="margin-top:14px"><figure>{top}</figure><figure>{histogram}</figure></div>'
        f'<div class="grid two" style="margin-top:14px"><figure>{reason_chart}</figure><div>{note}</div></div></div>'
    )


def _pods_list(title: str, pods: Mapping[str, Any]) -> str:
    if not pods:
        return ""
    items = "".join(f"<li><code>{_e(k)}</code>: {_e(v)}</li>" for k, v in list(pods.items())[:MAX_POD_ROWS])
    more = f"<li>… and {len(pods) - MAX_POD_ROWS:,} more (see <code>--output json</code>)</li>" \
        if len(pods) > MAX_POD_ROWS else ""
    return f'<p class="muted">{_e(title)} ({len(pods):,}):</p><ul class="notes">{items}{more}</ul>'


def victim_fate(v: Mapping[str, Any]) -> str:
    """What became of a preemption victim, in the words of the terminal and the page alike."""
    fate = f"{v.get('fate')} {v.get('detail')}" if v.get("fate") == "rescheduled" else \
        f"{v.get('fate')}: {v.get('detail')}"
    return f"evicted by {v.get('preemptor')} on node {v.get('node')}, {fate}"


def _victims(answer: Mapping[str, Any]) -> dict[str, str]:
    return {str(v.get("pod")): victim_fate(v) for v in _rows(answer.get("victims"))}


def _scale(i: int, s: Mapping[str, Any], cheapest: bool) -> str:
    probes = _rows(s.get("simulations"))
    nodes = s.get("nodes")
    rows = []
    for p in probes:
        unplaced, pre = int(_num(p.get("unplaced"))), int(_num(p.get("preemptions")))
        victims = p.get("victims") or {}
        evicted, back = int(_num(victims.get("evicted"))), int(_num(victims.get("rescheduled")))
        fits = bool(p.get("fits"))
        rows.append(
            f'<tr><td class="n">{int(_num(p.get("nodes"))):,}</td><td class="n">{unplaced:,}</td>'
            f'<td class="n">{pre:,}</td><td class="n">{evicted:,}</td><td class="n">{back:,}</td>'
            f'<td class="n">{_e(_duration(_num(p.get("seconds"))))}</td>'
            f'<td><span class="st st-{"Scheduled" if fits else "Unschedulable"}">'
            f'{"everything fits" if fits else "not enough"}</span></td></tr>'
        )
    steps = (
        '<div class="scroll"><table id="capacity-steps-' + str(i) + '"><caption>Each simulation of the search, in '
        'order (pods not running: unplaced, or evicted and not rescheduled)</caption><thead><tr>'
        '<th class="n">Nodes added</th><th class="n">Pods not running</th><th class="n">Preemptions</th>'
        '<th class="n">Evicted</th><th class="n">Rescheduled</th><th class="n">Time</th><th>Outcome</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    chart = _vbars(f"capacity-search-{i}", "Pods not running per simulation",
                   [f"+{int(_num(p.get('nodes'))):,}" for p in probes],
                   [("pods not running", C_REASON, [_num(p.get("unplaced")) for p in probes])],
                   x_label="nodes added (in search order)", y_label="pods", value_labels=True, height=260) \
        if probes else _empty(f"capacity-search-{i}", "Pods not running per simulation", "No simulation")
    hopeless = s.get("cannotHelp") or {}
    if nodes is None:
        answer = f"not within {max((int(_num(p.get('nodes'))) for p in probes), default=0):,} nodes"
        value, cls = "–", "bad"
    else:
        answer = "nothing to add" if nodes == 0 else f"cost {_num(s.get('totalCost')):,.2f}".rstrip("0").rstrip(".")
        if hopeless:
            answer += f"; {len(hopeless):,} pod(s) no such node can take"
        value, cls = (f"+{int(nodes):,}" if nodes else "0"), "warn" if hopeless else "ok"
    saturated = s.get("saturatedAt")
    search = "doubling, then bisection"
    if saturated is not None:
        search = f"doubling stopped at +{int(_num(saturated)):,}: more such nodes change nothing"
    cards = [
        _card("Nodes to add", value, _e(answer), cls),
        _card("Cost per node", f"{_num(s.get('costPerNode')):g}", "cheapest template" if cheapest else ""),
        _card("Lower bound", f"{int(_num(s.get('lowerBound'))):,}", "from the summed requests"),
        _card("Simulations", f"{len(probes):,}", _e(search)),
    ]
    usage = s.get("addedNodeUsage") or {}
    usage_chart = ""
    if usage:
        labels, hist, _ = _int_bins([int(_num(v)) for v in usage.values()], [])
        usage_chart = _vbars(f"capacity-added-{i}", "Added nodes by the pods they run", labels,
                             [("nodes", C_AFTER, hist)], x_label="pods on the added node", y_label="nodes", height=260)
    lists = (_pods_list("No node of this template can take, even empty (left out of the question)", hopeless)
             + _pods_list("Still not running at the largest count tried (more nodes may help)",
                          s.get("unplaced") or {})
             + _pods_list("Evicted by preemption in the answering simulation", _victims(s)))
    badge = ' <span class="chip">cheapest</span>' if cheapest else ""
    return (
        f'<div class="capacity-scale" id="capacity-scale-{i}"><h3>{_e(s.get("template", ""))}{badge}</h3>'
        f'<div class="cards">{"".join(cards)}</div>'
        f'<div class="grid two" style="margin-top:14px"><figure>{chart}</figure><div>{steps}</div></div>'
        + (f'<div class="grid two" style="margin-top:14px"><figure>{usage_chart}</figure><div>{lists}</div></div>'
           if usage_chart or lists else "")
        + "</div>"
    )


def _scale_summary(scale: Sequence[Mapping[str, Any]], cheapest: Any) -> str:
    def cell(v: Any, fmt: str) -> str:
        return "–" if v is None else format(_num(v), fmt)

    rows = "".join(
        f'<tr><td class="name">{_e(s.get("template", ""))}</td>'
        f'<td class="n">{cell(s.get("nodes"), ",.0f")}</td><td class="n">{cell(s.get("totalCost"), ",.2f")}</td>'
        f'<td class="n">{len(_rows(s.get("simulations"))):,}</td>'
        f'<td>{"<b>cheapest</b>" if s.get("template") == cheapest else ""}</td></tr>'
        for s in scale
    )
    return (
        '<table class="sortable compact" id="capacity-templates"><caption>One answer per node template (mixes of '
        'templates are not searched)</caption><thead><tr><th>Node template</th><th class="n">Nodes</th>'
        f'<th class="n">Cost</th><th class="n">Simulations</th><th></th></tr></thead><tbody>{rows}</tbody></table>'
    )


def render_capacity_html(doc: Mapping[str, Any]) -> str:
    """The capacity document (``kubesched capacity --output json``) as one self-contained page."""
    fits = _rows(doc.get("replicasThatFit"))
    scale = _rows(doc.get("scaleUp"))
    cluster_nodes = int(_num(doc.get("clusterNodes")))
    source = str(doc.get("source") or "")
    prof = " ".join(f"<code>{_e(p)}</code>" for p in doc.get("profiles") or []) or "—"
    sections = [
        "<header><div><h1>Capacity</h1>"
        f'<div class="meta">Source <code>{_e(source or "—")}</code> · {cluster_nodes:,} nodes · profiles {prof}'
        "</div></div></header>",
    ]
    if fits:
        sections.append(
            '<section id="capacity-fit"><h2>How many more replicas fit (each workload on its own)</h2>'
            + "".join(_fit(i, f, cluster_nodes) for i, f in enumerate(fits)) + "</section>"
        )
    if scale:
        every_zero = all(s.get("nodes") == 0 and not s.get("cannotHelp") for s in scale)
        intro = ('<p class="muted ok">Every pending pod and workload replica fits without adding a node.</p>'
                 if every_zero else _scale_summary(scale, doc.get("cheapest")) if len(scale) > 1 else "")
        sections.append(
            '<section id="capacity-scale"><h2>Fewest nodes to add so that every pending pod and replica fits</h2>'
            + intro + ("" if every_zero else "".join(
                _scale(i, s, s.get("template") == doc.get("cheapest") and len(scale) > 1) for i, s in enumerate(scale)))
            + "</section>"
        )
    sections.append("<footer>Generated by kubesched capacity. Self-contained: no network access needed.</footer>")
    return html_page("kubesched capacity — " + source, sections)
