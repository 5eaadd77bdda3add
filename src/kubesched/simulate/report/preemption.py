"""The HTML report's preemption section: each preemption of the run (``preemptions`` in the JSON
document: preemptor, node, victims, virtual time, the preemptor's message), a chart of the nodes
that were cleared most, and the victims per preemptor. Absent when nothing was preempted, so a
run without priorities reads as before."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

#: Rows shown in the page (all of them are in ``--output json``).
MAX_PREEMPTION_ROWS = 300
#: Victims named in a row before "… and N more".
MAX_VICTIMS_NAMED = 6


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _victims(names: Sequence[str]) -> str:
    shown = ", ".join(_e(n) for n in names[:MAX_VICTIMS_NAMED])
    if len(names) > MAX_VICTIMS_NAMED:
        shown += f" … and {len(names) - MAX_VICTIMS_NAMED:,} more"
    return shown


def preemption_section(data: Mapping[str, Any], hbars: Any) -> str:
    """The section, or "" when the run preempted nothing. ``hbars`` is report_html's horizontal
    bar chart (passed in: this module is imported by report_html, not the other way round)."""
    records = [p for p in data.get("preemptions") or [] if isinstance(p, Mapping)]
    if not records:
        return ""
    victims_total = sum(len(p.get("victims") or []) for p in records)
    by_node = Counter(str(p.get("node", "")) for p in records)
    chart = hbars(
        "preemptions-by-node",
        "Preemptions per node (nodes cleared most often)",
        [(n, float(c)) for n, c in by_node.most_common(12)],
        colour="#d97706",
        x_label="preemptions",
        label_chars=48,
        width=900,
    )
    rows = []
    for p in records[:MAX_PREEMPTION_ROWS]:
        victims = [str(v) for v in p.get("victims") or []]
        t = float(p.get("time") or 0.0)
        rows.append(
            f'<tr><td class="n" data-v="{t}">{t:,.1f} s</td><td class="name">{_e(p.get("preemptor", ""))}</td>'
            f'<td class="nw">{_e(p.get("node", ""))}</td>'
            f'<td class="n" data-v="{len(victims)}">{len(victims):,}</td>'
            f'<td class="msg">{_victims(victims)}</td><td class="msg">{_e(p.get("reason") or "")}</td></tr>'
        )
    rest = len(records) - len(rows)
    more = (f'<p class="more">… and {rest:,} more preemptions not listed (see <code>--output json</code>).</p>'
            if rest else "")
    return (
        '<section id="preemptions"><h2>Preemptions</h2>'
        f'<p class="muted">{len(records):,} pods preempted {victims_total:,} lower-priority pods on '
        f"{len(by_node):,} nodes (victims are deleted after their grace period in "
        "virtual time, then the preemptor is retried on its nominated node).</p>"
        f'<figure class="wide">{chart}</figure>'
        '<div class="filter"><input type="search" placeholder="Filter preemptors, nodes or victims…" '
        f'data-filter="preemption-table" aria-label="Filter"><span class="muted">{len(records):,} preemptions'
        "</span></div>"
        '<div class="scroll tall"><table class="sortable" id="preemption-table"><thead><tr>'
        '<th class="n">Virtual time</th><th>Preemptor</th><th>Node</th><th class="n">Victims</th>'
        "<th>Evicted pods</th><th>Preemptor's message</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>{more}</section>"
    )


__all__ = ["preemption_section"]
