"""Each gang's state at the end of a run, for the terminal summary: the PodGroups of both gang
APIs as the JSON document reports them (``podGroups``: scheduler-plugins' PodGroup, its status
fields; ``workloadPodGroups``: the Workload API's, minCount and member counts) and, for a gang
left waiting, why (the message its members got). Absent when the input has no PodGroups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _state(group: Mapping[str, Any]) -> str:
    """One cell: the phase where the API keeps one, else ``placed/minCount`` and the waiting."""
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


def print_gangs(console: Console, data: Mapping[str, Any], max_rows: int) -> None:
    rows: list[tuple[str, str, Mapping[str, Any]]] = []
    for section, api in (("podGroups", "scheduling.x-k8s.io"), ("workloadPodGroups", "scheduling.k8s.io")):
        groups = data.get(section) or {}
        rows += [(str(key), api, g) for key, g in groups.items() if isinstance(g, Mapping)]
    if not rows:
        return
    # The waiting gangs first: the ones a user asks about.
    rows.sort(key=lambda r: ("reason" not in r[2], r[0], r[1]))
    table = Table(title=f"PodGroups, {min(len(rows), max_rows)} of {len(rows)}: the waiting first")
    table.add_column("group", no_wrap=True)
    table.add_column("API")
    table.add_column("state")
    table.add_column("why it waits", overflow="fold")
    for key, api, g in rows[:max_rows]:
        table.add_row(escape(key), api, escape(_state(g)), escape(str(g.get("reason", ""))))
    console.print(table)
