"""The drain section of ``kubesched simulate --drain --report``: would ``kubectl drain`` complete
(and why not), the pods a PodDisruptionBudget keeps on their node, per node what kubectl does in
its order, where the evicted pods go and which would not fit anywhere — drawn with the report's
cards, charts and styles (report_charts.py), from the ``drain`` section of the JSON document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.simulate.report.charts import (
    C_AFTER,
    MAX_FAILED_ROWS,
    MAX_NODE_ROWS,
    MAX_REASONS,
    _card,
    _e,
    _empty,
    _hbars,
)

__all__ = ["drain_section"]


def drain_section(drain: Mapping[str, Any]) -> str:
    """The drain what-if: the drained nodes, where their pods went, which would not fit anywhere."""
    nodes = [str(n) for n in drain.get("nodes") or []]
    pods = [p for p in drain.get("pods") or [] if isinstance(p, Mapping)]
    lost = [p for p in drain.get("lost") or [] if isinstance(p, Mapping)]
    stay = [p for p in drain.get("stay") or [] if isinstance(p, Mapping)]
    blocked = [p for p in drain.get("blocked") or [] if isinstance(p, Mapping)]
    failed = [p for p in pods if p.get("status") != "Scheduled"]
    placed = len(pods) - len(failed)
    complete = bool(drain.get("complete", True))
    verdict = (f'<p class="verdict {"ok" if complete else "bad"}" id="drain-verdict">'
               f'{_e(drain.get("verdict") or "")}</p>' if drain.get("verdict") else "")
    cards = [
        _card("Nodes drained", f"{len(nodes):,}", _e(", ".join(nodes[:4]) + (" …" if len(nodes) > 4 else ""))),
        _card("Evicted", f"{len(pods):,}", "recreated by their controllers"),
        _card("Rescheduled", f"{placed:,}", "fit on another node", "ok"),
        _card("Would not fit", f"{len(failed):,}", "anywhere in the cluster", "bad" if failed else "ok"),
        _card("Blocked", f"{len(blocked):,}", "by a PodDisruptionBudget: stay", "bad" if blocked else "ok"),
        _card("Lost", f"{len(lost):,}", "no controller: deleted for good", "warn" if lost else ""),
        _card("Stay", f"{len(stay):,}", "DaemonSet and mirror pods"),
    ]
    landed: dict[str, int] = {}
    for p in pods:
        if p.get("status") == "Scheduled":
            landed[str(p.get("node", ""))] = landed.get(str(p.get("node", "")), 0) + 1
    rows = []
    for p in failed[:MAX_FAILED_ROWS]:
        rows.append(
            f'<tr><td class="name">{_e(p.get("pod", ""))}</td><td class="name node">{_e(p.get("from", ""))}</td>'
            f'<td><span class="st st-{_e(p.get("status", ""))}">{_e(p.get("status", ""))}</span></td>'
            f'<td class="msg">{_e(p.get("message") or "")}</td></tr>'
        )
    if rows:
        table = (
            '<div class="scroll"><table class="sortable" id="drain-failed"><caption>Evicted pods that would not '
            'fit anywhere</caption><thead><tr><th>Pod</th><th>Was on</th><th>Status</th><th>Why</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )
        if len(failed) > len(rows):
            table += f'<p class="more">… and {len(failed) - len(rows):,} more (see <code>--output json</code>).</p>'
    elif pods:
        table = '<p class="muted ok">Every evicted pod fits on another node.</p>'
    else:
        table = '<p class="muted">The drained nodes run no pod that would be rescheduled.</p>'
    destinations = sorted(landed.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = [(node, float(n)) for node, n in destinations[:MAX_REASONS]]
    if len(destinations) > MAX_REASONS:
        shown.append((f"… {len(destinations) - MAX_REASONS:,} more nodes", 0.0))
    chart = (
        _hbars(
            "drain-destinations",
            f"Where the {placed:,} rescheduled pods go (pods per node)",
            shown,
            colour=C_AFTER,
            x_label="pods",
            label_chars=48,
        )
        if destinations
        else _empty("drain-destinations", "Where the evicted pods go", "No evicted pod was rescheduled")
    )
    notes = []
    if lost:
        notes.append(
            "<li><b>Deleted for good</b> (no controller; <code>kubectl drain</code> needs <code>--force</code>): "
            + ", ".join(f"<code>{_e(p.get('pod', ''))}</code>" for p in lost[:50])
            + (" …" if len(lost) > 50 else "") + "</li>"
        )
    reasons: dict[str, int] = {}
    for p in stay:
        reasons[str(p.get("reason", ""))] = reasons.get(str(p.get("reason", "")), 0) + 1
    notes += [f"<li><b>{n:,} stay</b>: {_e(reason)}</li>" for reason, n in sorted(reasons.items())]
    local = sum(1 for p in pods if p.get("localStorage"))
    if local:
        notes.append(f"<li><b>{local:,}</b> evicted pod(s) lose their <code>emptyDir</code> data "
                     "(<code>kubectl drain</code> needs <code>--delete-emptydir-data</code>).</li>")
    flags = [str(f) for f in drain.get("kubectlFlags") or []]
    if flags:
        notes.append(f"<li>kubectl drain needs <code>{_e(' '.join(flags))}</code>.</li>")
    note_html = f'<ul class="notes">{"".join(notes)}</ul>' if notes else ""
    return (
        f'<section id="drain"><h2>Drain what-if</h2>{verdict}<div class="cards">' + "".join(cards) + "</div>"
        + _blocked(blocked) + _per_node(drain.get("perNode") or [], drain.get("budgets") or [])
        + f'<div class="grid two" style="margin-top:14px"><figure>{chart}</figure><div>{table}{note_html}</div>'
        "</div></section>"
    )


def _blocked(blocked: Sequence[Mapping[str, Any]]) -> str:
    """The pods a PodDisruptionBudget keeps on their node, in kubectl's order, with the API's answer."""
    if not blocked:
        return ""
    rows = "".join(
        f'<tr><td class="name">{_e(b.get("pod", ""))}</td><td class="name node">{_e(b.get("from", ""))}</td>'
        f'<td class="name">{_e(b.get("pdb") or "–")}</td>'
        f'<td class="n">{_e("–" if b.get("disruptionsAllowed") is None else b.get("disruptionsAllowed"))}</td>'
        f'<td class="nw">{"retried forever" if b.get("retriedForever") else "fails the node"}</td>'
        f'<td class="msg">{_e(b.get("message", ""))}</td></tr>'
        for b in blocked[:MAX_FAILED_ROWS]
    )
    more = (f'<p class="more">… and {len(blocked) - MAX_FAILED_ROWS:,} more (see <code>--output json</code>).</p>'
            if len(blocked) > MAX_FAILED_ROWS else "")
    return (
        '<div class="scroll" style="margin-top:14px"><table class="sortable" id="drain-blocked"><caption>Pods a '
        "PodDisruptionBudget keeps on their node (the eviction API refuses them)</caption><thead><tr><th>Pod</th>"
        '<th>Node</th><th>PodDisruptionBudget</th><th class="n">Disruptions allowed</th><th>kubectl</th>'
        f"<th>Eviction API says</th></tr></thead><tbody>{rows}</tbody></table></div>{more}"
    )


def _per_node(per_node: Sequence[Any], budgets: Sequence[Any]) -> str:
    """Per drained node, in kubectl's order: what it evicts, what stays, whether it gets through;
    and the budgets that cover pods of the drained nodes, as the drain found them."""
    nodes = [n for n in per_node if isinstance(n, Mapping)]
    covering = [b for b in budgets if isinstance(b, Mapping) and (b.get("evicted") or b.get("blocked"))]
    if len(nodes) <= 1 and not covering:
        return ""
    rows = []
    for n in nodes[:MAX_NODE_ROWS]:
        state = ("drained" if n.get("drained") else "not reached" if not n.get("reached")
                 else "waits here forever" if n.get("waitsForever") else "fails")
        order = [str(k) for k in n.get("order") or []]
        tried = ", ".join(order[:4]) + (f" … (+{len(order) - 4:,})" if len(order) > 4 else "")
        rows.append(
            f'<tr><td class="name node">{_e(n.get("node", ""))}</td><td class="n">{int(n.get("evicted") or 0):,}</td>'
            f'<td class="n">{int(n.get("notRescheduled") or 0):,}</td><td class="n">{int(n.get("blocked") or 0):,}'
            f'</td><td class="n">{int(n.get("lost") or 0):,}</td>'
            f'<td class="nw"><span class="st st-{"Scheduled" if n.get("drained") else "Unschedulable"}">'
            f'{_e(state)}</span></td><td class="msg">{_e(tried)}</td></tr>'
        )
    more = (f'<p class="more">… and {len(nodes) - MAX_NODE_ROWS:,} more nodes (see <code>--output json</code>).</p>'
            if len(nodes) > MAX_NODE_ROWS else "")
    table = (
        '<div class="scroll" style="max-height:420px"><table id="drain-nodes"><caption>Per node, in the order '
        "kubectl drain takes them (pods in the order it evicts them; a node it never reaches is evaluated as if "
        'drained on its own)</caption><thead><tr><th>Node</th><th class="n">Evicted</th>'
        '<th class="n">Fit nowhere</th><th class="n">Blocked</th><th class="n">Deleted</th><th>kubectl</th>'
        f"<th>Evicts</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>{more}"
    ) if nodes else ""
    brows = "".join(
        f'<tr><td class="name">{_e(b.get("pdb", ""))}</td><td class="nw">{_e(b.get("rule", ""))}</td>'
        f'<td class="n">{int(b.get("currentHealthy") or 0):,} / {int(b.get("desiredHealthy") or 0):,}</td>'
        f'<td class="n">{int(b.get("disruptionsAllowed") or 0):,}</td><td class="n">{int(b.get("evicted") or 0):,}'
        f'</td><td class="n">{int(b.get("blocked") or 0):,}</td></tr>'
        for b in covering[:MAX_NODE_ROWS]
    )
    budget_table = (
        '<div class="scroll"><table id="drain-budgets"><caption>PodDisruptionBudgets covering pods of the drained '
        'nodes, when the drain starts</caption><thead><tr><th>PodDisruptionBudget</th><th>Rule</th>'
        '<th class="n">Healthy / desired</th><th class="n">Disruptions allowed</th><th class="n">Evicted</th>'
        f'<th class="n">Blocked</th></tr></thead><tbody>{brows}</tbody></table></div>'
    ) if covering else ""
    return f'<div style="margin-top:14px">{table}</div><div style="margin-top:14px">{budget_table}</div>'

