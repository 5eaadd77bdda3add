"""The drain what-if in the terminal (``kubesched simulate --drain``), read from the ``drain``
section of the JSON document (drain.py ``drain_to_json``) so the terminal, JSON and report agree."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["print_drain"]


def print_drain(console: Console, drain: dict[str, Any], max_rows: int) -> None:
    """Would the drain complete (and why not), per node what kubectl does in which order, where the
    evicted pods went, which would not fit anywhere and why, which a PodDisruptionBudget blocks."""
    nodes = drain["nodes"]
    shown = ", ".join(nodes[:max_rows]) + (f", … {len(nodes) - max_rows} more" if len(nodes) > max_rows else "")
    console.print(
        f"[bold]Drain what-if[/bold]: {len(nodes)} node(s) cordoned and drained ({shown}): "
        + (
            "no pod to reschedule" if not drain["evicted"]
            else f"{drain['evicted']} pod(s) evicted, [green]{drain['rescheduled']} rescheduled[/green], "
            + (f"[red]{drain['notRescheduled']} would not fit anywhere[/red]" if drain["notRescheduled"]
               else "[green]every evicted pod fits elsewhere[/green]")
        )
    )
    colour = "green" if drain.get("complete", True) else "red"
    if drain.get("verdict"):
        console.print(f"[bold {colour}]{drain['verdict']}[/bold {colour}]", highlight=False)
    blocked = drain.get("blocked") or []
    if blocked:
        t = Table(title=f"Pods a PodDisruptionBudget keeps on their node: {len(blocked)}")
        for col in ("pod", "node", "PodDisruptionBudget", "disruptions allowed", "eviction API says"):
            t.add_column(col, overflow="fold", justify="right" if col.startswith("disruptions") else "left")
        for b in blocked[:max_rows]:
            allowed = "–" if b["disruptionsAllowed"] is None else str(b["disruptionsAllowed"])
            t.add_row(b["pod"], b["from"], b["pdb"] or "–", allowed, b["message"])
        console.print(t)
        if len(blocked) > max_rows:
            console.print(f"[dim]… and {len(blocked) - max_rows} more (see --output json)[/dim]")
    per_node = drain.get("perNode") or []
    if len(per_node) > 1 or blocked:
        t = Table(title="Per node, in the order kubectl drain takes them")
        for col in ("node", "evicted", "not rescheduled", "blocked", "deleted", "kubectl"):
            t.add_column(col, justify="left" if col in ("node", "kubectl") else "right")
        for n in per_node[:max_rows]:
            state = ("drained" if n["drained"] else "[yellow]not reached[/yellow]" if not n["reached"]
                     else "[red]waits here forever[/red]" if n["waitsForever"] else "[red]fails on this node[/red]")
            t.add_row(n["node"], str(n["evicted"]), str(n["notRescheduled"]), str(n["blocked"]), str(n["lost"]), state)
        console.print(t)
    if drain["lost"]:
        console.print(
            f"[yellow]{len(drain['lost'])} pod(s) declare no controller: a drain deletes them for good "
            f"(kubectl drain needs --force):[/yellow] " + ", ".join(p["pod"] for p in drain["lost"][:max_rows])
            + (" …" if len(drain["lost"]) > max_rows else "")
        )
    if drain["stay"]:
        for reason, n in Counter(p["reason"] for p in drain["stay"]).most_common():
            console.print(f"[dim]{n} pod(s) stay on the drained nodes: {reason}[/dim]")
    local = sum(1 for p in drain["pods"] if p["localStorage"])
    if local:
        console.print(f"[dim]{local} evicted pod(s) lose their emptyDir data (kubectl drain needs "
                      "--delete-emptydir-data)[/dim]")
    if drain.get("kubectlFlags"):
        console.print(f"[dim]kubectl drain needs: {' '.join(drain['kubectlFlags'])}[/dim]")
    failed = [p for p in drain["pods"] if p["status"] != "Scheduled"]
    if failed:
        t = Table(title=f"Evicted pods that would not fit anywhere: {len(failed)}")
        t.add_column("pod")
        t.add_column("was on")
        t.add_column("status")
        t.add_column("reason", overflow="fold")
        for p in failed[:max_rows]:
            t.add_row(p["pod"], p["from"], p["status"], p["message"])
        console.print(t)
        if len(failed) > max_rows:
            console.print(f"[dim]… and {len(failed) - max_rows} more (see --output json)[/dim]")
