"""Each gang's state at the end of a run, for the terminal summary and the HTML report: the
PodGroups of both gang APIs as the JSON document reports them (``podGroups``: scheduler-plugins'
PodGroup, its status fields; ``workloadPodGroups``: the Workload API's, policy, minCount and member
counts; ``workloadCompositePodGroups``: its CompositePodGroups, children placed against
minGroupCount) and, for a gang left waiting, why (the message its members got). Both views draw the rows
of :func:`gang_rows`, so they never disagree with each other or with the JSON. Absent when the
input has no PodGroups."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape as html_escape
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: Rows the HTML report lists (all of them are in ``--output json``).
MAX_GANG_ROWS = 500


@dataclass(frozen=True, slots=True)
class GangRow:
    #: ``namespace/name`` of the PodGroup.
    key: str
    #: ``PodGroup`` or ``CompositePodGroup`` (a group of groups, the Workload API's).
    kind: str
    #: The API group of its kind: scheduler-plugins' or the Workload API's.
    api: str
    #: ``gang`` or ``basic`` (the Workload API's ``schedulingPolicy``); scheduler-plugins' are gangs.
    policy: str
    #: ``placed/minCount placed, N members, ...`` or scheduler-plugins' phase (:func:`_state`).
    state: str
    #: Why it waits, "" for a group that does not.
    reason: str


def _state(group: Mapping[str, Any]) -> str:
    """One cell: the phase where the API keeps one, else ``placed/minCount`` and the waiting."""
    if "minGroupCount" in group:
        parts = [f"{int(group.get('childrenPlaced', 0)):,}/{int(group['minGroupCount']):,} children placed",
                 f"{int(group.get('children', 0)):,} children", f"{int(group.get('members', 0)):,} members"]
        if group.get("childrenReady", 0) != group.get("children", 0):
            parts.append(f"{int(group.get('childrenReady', 0)):,} children ready")
        return ", ".join(parts)
    if "phase" in group:
        return f"{group['phase']}, {int(group.get('scheduled', 0)):,} scheduled"
    if "minCount" not in group:
        return "invalid"
    parts = [f"{int(group.get('placed', 0)):,}/{int(group['minCount']):,} placed",
             f"{int(group.get('members', 0)):,} members"]
    for field in ("waiting", "pending"):
        if group.get(field):
            parts.append(f"{int(group[field]):,} {field}")
    return ", ".join(parts)


def gang_rows(data: Mapping[str, Any]) -> list[GangRow]:
    """Every PodGroup and CompositePodGroup of the document, the waiting first (the ones a user
    asks about)."""
    rows: list[GangRow] = []
    for section, kind, api in (("podGroups", "PodGroup", "scheduling.x-k8s.io"),
                               ("workloadPodGroups", "PodGroup", "scheduling.k8s.io"),
                               ("workloadCompositePodGroups", "CompositePodGroup", "scheduling.k8s.io")):
        groups = data.get(section) or {}
        rows += [GangRow(str(key), kind, api, str(g.get("policy", "gang")), _state(g), str(g.get("reason", "")))
                 for key, g in groups.items() if isinstance(g, Mapping)]
    rows.sort(key=lambda r: (not r.reason, r.key, r.api, r.kind))
    return rows


def print_gangs(console: Console, data: Mapping[str, Any], max_rows: int) -> None:
    rows = gang_rows(data)
    if not rows:
        return
    table = Table(title=f"PodGroups, {min(len(rows), max_rows)} of {len(rows)}: the waiting first")
    table.add_column("group", no_wrap=True)
    table.add_column("kind")
    table.add_column("API")
    table.add_column("state")
    table.add_column("why it waits", overflow="fold")
    for row in rows[:max_rows]:
        table.add_row(escape(row.key), row.kind, row.api, escape(row.state), escape(row.reason))
    console.print(table)


def gangs_section(data: Mapping[str, Any]) -> str:
    """The HTML report's section: the same rows as the terminal table, "" without PodGroups."""
    rows = gang_rows(data)
    if not rows:
        return ""

    def e(value: str) -> str:
        return html_escape(value, quote=True)

    waiting = sum(1 for r in rows if r.reason)
    composites = sum(1 for r in rows if r.kind == "CompositePodGroup")
    counted = f"{len(rows) - composites:,} PodGroups"
    if composites:
        counted += f" and {composites:,} CompositePodGroups"
    body = "".join(
        f'<tr class="{"waiting" if r.reason else "placed"}"><td class="name">{e(r.key)}</td>'
        f'<td class="nw">{e(r.kind)}</td><td class="nw">{e(r.api)}</td><td class="nw">{e(r.policy)}</td>'
        f'<td class="nw">{e(r.state)}</td>'
        f'<td class="msg">{e(r.reason)}</td></tr>'
        for r in rows[:MAX_GANG_ROWS]
    )
    rest = len(rows) - MAX_GANG_ROWS
    more = (f'<p class="more">… and {rest:,} more PodGroups not listed (see <code>--output json</code>).</p>'
            if rest > 0 else "")
    return (
        '<section id="gangs"><h2>Gangs (PodGroups)</h2>'
        f'<p class="muted">{counted} at the end of the run, {waiting:,} waiting '
        "(listed first, with why): a gang's members are placed all together or not at all.</p>"
        '<div class="filter"><input type="search" placeholder="Filter groups or reasons…" '
        f'data-filter="gang-table" aria-label="Filter"><span class="muted">{len(rows):,} groups</span></div>'
        '<div class="scroll tall"><table class="sortable" id="gang-table"><thead><tr><th>Group</th>'
        "<th>Kind</th><th>API</th><th>Policy</th><th>State</th><th>Why it waits</th></tr></thead>"
        f"<tbody>{body}</tbody></table></div>{more}</section>"
    )
