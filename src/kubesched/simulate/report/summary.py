"""The terminal summary and the explain table, rendered with rich from the JSON document."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

from kubesched.api.readable import readable_bytes, readable_milli_cpu


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ratio(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def print_summary(console: Console, data: dict[str, Any], max_rows: int = 25) -> None:
    s = data["summary"]
    console.print(f"[bold]kubesched simulate[/bold] — {data['source']} — profiles: {', '.join(data['profiles'])}")
    if s["interrupted"]:
        console.print("[yellow]Interrupted: showing what was done so far.[/yellow]")
    if s.get("stalled"):
        console.print(
            "[yellow]Stopped after 15 virtual minutes of retries without a single bind "
            "(e.g. a gang that can never complete); the pods left are reported as they last failed.[/yellow]"
        )
    counts = Table(show_header=False, box=None, padding=(0, 2))
    counts.add_row("nodes", str(s["nodes"]), "pods", str(s["pods"]))
    counts.add_row("pre-bound", str(s["preBound"]), "simulated", str(s["simulated"]))
    counts.add_row("[green]scheduled[/green]", str(s["scheduled"]), "[red]unschedulable[/red]", str(s["unschedulable"]))
    if s.get("preemptions"):
        counts.add_row("preemptions", str(s["preemptions"]), "pods preempted", str(s.get("preempted", 0)))
    if s["errors"] or s["waiting"] or s["pending"]:
        counts.add_row("errors", str(s["errors"]), "waiting/pending", f"{s['waiting']}/{s['pending']}")
    counts.add_row(
        "virtual time",
        f"{s['virtualSeconds']:.1f}s",
        "wall time",
        f"{s['wallSeconds']:.2f}s ({s['podsPerSecond']} pods/s)",
    )
    ub, ua = s["utilisationBefore"], s["utilisationAfter"]
    counts.add_row(
        "cpu requested",
        f"{_pct(ub['cpu'])} → {_pct(ua['cpu'])}",
        "memory requested",
        f"{_pct(ub['memory'])} → {_pct(ua['memory'])}",
    )
    console.print(counts)
    for kind, n in data["skippedObjects"].items():
        console.print(f"[dim]skipped {n} {kind} object(s): not modelled by the simulator[/dim]")
    for name, n in data["reassignedSchedulerNames"].items():
        console.print(
            f"[dim]{n} pending pod(s) with schedulerName {name!r} matched no profile and were simulated with "
            f"profile {data['profiles'][0]!r} (use --strict-scheduler-name to leave them pending)[/dim]"
        )

    nodes = data["nodes"]
    table = Table(title=f"Node utilisation (requested / allocatable), {min(len(nodes), max_rows)} of {len(nodes)}")
    for col in ("node", "cpu", "memory", "pods", "cpu before→after", "mem before→after"):
        table.add_column(col, justify="left" if col == "node" else "right")
    busiest = sorted(
        nodes,
        key=lambda n: -(n["requestedAfter"]["cpu"] / n["allocatable"]["cpu"] if n["allocatable"]["cpu"] else 0),
    )
    for n in busiest[:max_rows]:
        a, before, after = n["allocatable"], n["requestedBefore"], n["requestedAfter"]
        table.add_row(
            n["name"] + (" [dim](cordoned)[/dim]" if n["unschedulable"] else ""),
            f"{readable_milli_cpu(after['cpu'])}/{readable_milli_cpu(a['cpu'])}",
            f"{readable_bytes(after['memory'])}/{readable_bytes(a['memory'])}",
            f"{n['podsAfter']}/{a['pods']}",
            f"{_ratio(before.get('cpu', 0), a['cpu'])} → {_ratio(after['cpu'], a['cpu'])}",
            f"{_ratio(before.get('memory', 0), a['memory'])} → {_ratio(after['memory'], a['memory'])}",
        )
    console.print(table)

    left_pending = [p for p in data["placements"] if p["status"] == "Pending" and p["message"]]
    for message, n in Counter(p["message"] for p in left_pending).most_common(max_rows):
        console.print(f"[yellow]{n} pod(s) left pending:[/yellow] {message}")
    gated = [p for p in data["placements"] if p["status"] == "Gated"]
    for message, n in Counter(p["message"] for p in gated).most_common(max_rows):
        console.print(f"[yellow]{n} pod(s) gated, never attempted:[/yellow] {message}")
    unschedulable = [p for p in data["placements"] if p["status"] == "Unschedulable"]
    errors = [p for p in data["placements"] if p["status"] == "Error"]
    # Verdicts and errors apart, counted as the summary counts them: an error is a bug (a plugin's,
    # or the input's), not a placement decision.
    for title, rows, header in (
        (f"Unschedulable pods: {len(unschedulable)}", unschedulable, "reason"),
        (f"Pods that failed with an error: {len(errors)} (--debug shows tracebacks)", errors, "error"),
    ):
        if rows:
            _reasons_table(console, title, rows, header, max_rows)
    if not unschedulable and not errors:
        console.print("[green]Every simulated pod was scheduled.[/green]")
    if data.get("drain"):
        from kubesched.simulate.report.drain_terminal import print_drain

        print_drain(console, data["drain"], max_rows)


def _reasons_table(console: Console, title: str, rows: list[dict[str, Any]], header: str, max_rows: int) -> None:
    by_message = Counter(p["message"] for p in rows)
    t = Table(title=title)
    t.add_column("pods", justify="right")
    t.add_column("example")
    t.add_column(header, overflow="fold")
    first: dict[str, str] = {}
    for p in rows:
        first.setdefault(p["message"], p["pod"])
    for message, n in by_message.most_common(max_rows):
        t.add_row(str(n), first[message], message)
    console.print(t)
