"""The terminal's per-pod lists, read from the JSON document: each preemption (preemptor, node,
victims) and, with ``-o wide``, every simulated pod → node with its score.

Both are capped (a 10,000-pod run stays readable): the rows that need attention come first and
a last line counts the rest and says where to find every one (``--output json``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["STATUS_ORDER", "print_pod_list", "print_preemptions"]

#: Victims named in a row before "… and N more".
MAX_VICTIMS_NAMED = 3
#: -o wide lists problems first: the pods a user has to act on, then the evicted, then the placed.
STATUS_ORDER = {"Unschedulable": 0, "Error": 1, "Pending": 2, "Gated": 3, "Waiting": 4, "Preempted": 5,
                "Scheduled": 6}
_STYLE = {"Scheduled": "green", "Unschedulable": "red", "Error": "red", "Preempted": "yellow"}


def _victims(names: Sequence[str]) -> str:
    shown = escape(", ".join(names[:MAX_VICTIMS_NAMED]))
    if len(names) > MAX_VICTIMS_NAMED:
        shown += f" … and {len(names) - MAX_VICTIMS_NAMED:,} more"
    return shown


def _why(p: Mapping[str, Any]) -> str:
    """A short why for a pod that did not land: its two most cited reasons with their node counts
    (the reasons table above has the whole message), else its message."""
    reasons = p.get("reasons") or {}
    if isinstance(reasons, Mapping) and reasons:
        top = list(reasons.items())
        text = ", ".join(f"{n} {r}" for r, n in top[:2]) + (", …" if len(top) > 2 else "")
        return f": {escape(text)}"
    message = str(p.get("message") or "")
    return f": {escape(message)}" if message else ""


def _more(console: Console, rest: int, what: str) -> None:
    if rest > 0:
        console.print(f"[dim]… and {rest:,} more {what} (--max-rows to list more; --output json has every one)[/dim]")


def print_preemptions(console: Console, preemptions: Sequence[Mapping[str, Any]], max_rows: int, title: str) -> None:
    """One row per preemption in the order they happened: preemptor, node, victims."""
    if not preemptions:
        return
    evicted = sum(len(p.get("victims") or []) for p in preemptions)
    t = Table(title=f"{title}: {len(preemptions):,} ({evicted:,} pods evicted)")
    t.add_column("preemptor", overflow="fold")
    t.add_column("node", overflow="fold")
    t.add_column("victims", overflow="fold")
    for p in preemptions[:max_rows]:
        victims = [str(v) for v in p.get("victims") or []]
        t.add_row(escape(str(p.get("preemptor", ""))), escape(str(p.get("node", ""))),
                  f"{len(victims)}: {_victims(victims)}")
    console.print(t)
    _more(console, len(preemptions) - max_rows, "preemptions")


def print_pod_list(
    console: Console, placements: Sequence[Mapping[str, Any]], preemptions: Sequence[Mapping[str, Any]],
    max_rows: int, title: str,
) -> None:
    """``-o wide``: pod → node, the chosen node's total score and, for a preemptor, whom it evicted;
    pods that did not land first (with why), then the placed ones in the order they were decided."""
    if not placements:
        return
    evicted_by: dict[str, list[str]] = {}
    for p in preemptions:
        evicted_by.setdefault(str(p.get("preemptor", "")), []).extend(str(v) for v in p.get("victims") or [])
    ordered = sorted(placements, key=lambda p: STATUS_ORDER.get(str(p.get("status")), 2))
    t = Table(title=f"{title}: {len(placements):,}" + (f", first {max_rows:,}" if len(placements) > max_rows else ""))
    t.add_column("pod", overflow="fold")
    t.add_column("node", overflow="fold")
    t.add_column("score", justify="right")
    t.add_column("status / preempted", overflow="fold")
    for p in ordered[:max_rows]:
        status = str(p.get("status", ""))
        score = p.get("score")
        # No per-plugin scores: the only feasible node, chosen without scoring ("-", not a score of 0).
        total = ""
        if isinstance(score, Mapping) and status == "Scheduled":
            total = str(score.get("total", "")) if score.get("plugins") else "-"
        note = f"[{_STYLE.get(status, 'yellow')}]{status}[/]"
        victims = evicted_by.get(str(p.get("pod", "")))
        if victims:
            note += f"; evicted {len(victims)}: {_victims(victims)}"
        if status != "Scheduled":
            note += _why(p)
        t.add_row(escape(str(p.get("pod", ""))), escape(str(p.get("node") or "-")), total, note)
    console.print(t, highlight=False)
    _more(console, len(placements) - max_rows, "pods")
