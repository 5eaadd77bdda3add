"""The terminal summary and the explain table, rendered with rich from the JSON document."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kubesched.api.readable import readable_bytes, readable_milli_cpu
from kubesched.simulate.report.gangs import print_gangs
from kubesched.simulate.report.pod_list import print_pod_list, print_preemptions
from kubesched.simulate.report.pools import print_pools


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ratio(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def print_summary(
    console: Console, data: dict[str, Any], max_rows: int = 25, pod_rows: int | None = None,
) -> None:
    """The summary; ``pod_rows`` (``-o wide``): also list up to that many pods per profile, pod → node."""
    s = data["summary"]
    profiles: list[str] = list(data["profiles"])
    console.print(f"[bold]kubesched simulate[/bold] — {escape(data['source'])} — profiles: {', '.join(profiles)}")
    if s["interrupted"]:
        console.print("[yellow]Interrupted: showing what was done so far.[/yellow]")
    if s.get("stalled"):
        console.print(
            "[yellow]Stopped after 15 virtual minutes of retries without a single bind "
            "(e.g. a gang that can never complete); the pods left are reported as they last failed.[/yellow]"
        )
    _counts(console, s)
    _accounting(console, s)
    for kind, n in data["skippedObjects"].items():
        console.print(f"[dim]skipped {n} {kind} object(s): not modelled by the simulator[/dim]")
    for name, n in data["reassignedSchedulerNames"].items():
        console.print(
            f"[dim]{n} pending pod(s) with schedulerName {name!r} matched no profile and were simulated with "
            f"profile {data['profiles'][0]!r} (use --strict-scheduler-name to leave them pending)[/dim]"
        )
    _node_table(console, data["nodes"], max_rows)
    print_pools(console, data, max_rows)
    print_gangs(console, data, max_rows)

    by_profile: dict[str, list[dict[str, Any]]] = {p: [] for p in profiles}
    for p in data["placements"]:
        by_profile.setdefault(p["profile"], []).append(p)
    preemptions_by: dict[str, list[dict[str, Any]]] = {}
    for p in data.get("preemptions") or []:
        preemptions_by.setdefault(p["profile"], []).append(p)
    several = len(by_profile) > 1
    if several:
        _profiles_table(console, by_profile, preemptions_by)
    for profile, placements in by_profile.items():
        if several:
            console.rule(f"[bold]profile {escape(profile)}[/bold]", align="left")
        _profile_section(console, placements, preemptions_by.get(profile, []), max_rows, pod_rows,
                         f" (profile {profile})" if several else "")
    if not s["unschedulable"] and not s["errors"]:
        console.print("[green]Every simulated pod was scheduled.[/green]")
    if data.get("drain"):
        from kubesched.simulate.report.drain_terminal import print_drain

        print_drain(console, data["drain"], max_rows)


def _counts(console: Console, s: dict[str, Any]) -> None:
    counts = Table(show_header=False, box=None, padding=(0, 2))
    pods = f"{s['pods']:,}"
    if s.get("terminal"):
        pods += f" (+{s['terminal']:,} terminal)"
    pre_bound = f"{s['preBound']:,}"
    if s.get("preBoundOnMissingNodes"):
        pre_bound += f" ({s['preBoundOnMissingNodes']:,} on nodes not in the input)"
    counts.add_row("nodes", f"{s['nodes']:,}", "pods", pods)
    counts.add_row("pre-bound", pre_bound, "simulated", f"{s['simulated']:,}")
    counts.add_row("[green]scheduled[/green]", f"{s['scheduled']:,}", "[red]unschedulable[/red]",
                   f"{s['unschedulable']:,}")
    if s.get("preemptions"):
        counts.add_row("preemptions", f"{s['preemptions']:,}", "pods preempted", f"{s.get('preempted', 0):,}")
    if s["errors"] or s["waiting"]:
        counts.add_row("errors", f"{s['errors']:,}", "waiting at Permit", f"{s['waiting']:,}")
    if s["pending"] or s.get("gated"):
        counts.add_row("left pending", f"{s['pending']:,}", "gated", f"{s.get('gated', 0):,}")
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


def _accounting(console: Console, s: dict[str, Any]) -> None:
    """Where the pods of the input went that the counts above do not place: none is dropped silently."""
    if s.get("terminal"):
        console.print(
            f"[dim]{s['terminal']:,} terminal pod(s) (Succeeded or Failed) in the input: not scheduled, "
            "and they use no node's capacity (as in Kubernetes)[/dim]"
        )
    if s.get("preBoundOnMissingNodes"):
        console.print(
            f"[yellow]{s['preBoundOnMissingNodes']:,} pre-bound pod(s) on nodes not in the input: counted as "
            "pre-bound but in no node's usage (the warnings name each)[/yellow]"
        )


def _node_table(console: Console, nodes: list[dict[str, Any]], max_rows: int) -> None:
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
            escape(n["name"]) + (" [dim](cordoned)[/dim]" if n["unschedulable"] else ""),
            f"{readable_milli_cpu(after['cpu'])}/{readable_milli_cpu(a['cpu'])}",
            f"{readable_bytes(after['memory'])}/{readable_bytes(a['memory'])}",
            f"{n['podsAfter']}/{a['pods']}",
            f"{_ratio(before.get('cpu', 0), a['cpu'])} → {_ratio(after['cpu'], a['cpu'])}",
            f"{_ratio(before.get('memory', 0), a['memory'])} → {_ratio(after['memory'], a['memory'])}",
        )
    console.print(table)


def _profiles_table(
    console: Console, by_profile: dict[str, list[dict[str, Any]]], preemptions_by: dict[str, list[dict[str, Any]]],
) -> None:
    """One row per profile: what its pods did and how its chosen nodes scored (each profile weighs
    its own plugins, so scores are compared within a profile, never merged)."""
    t = Table(title="Per profile (simulated pods)")
    # A profile name is what a reader looks for: keep names up to 24 characters on one line.
    t.add_column("profile", overflow="fold", min_width=min(24, max(map(len, by_profile), default=7)))
    rows: list[dict[str, str | int]] = []
    for profile, placements in by_profile.items():
        status = Counter(p["status"] for p in placements)
        totals = [p["score"]["total"] for p in placements if p["status"] == "Scheduled" and p.get("score")]
        other = len(placements) - status["Scheduled"] - status["Unschedulable"] - status["Error"]
        rows.append({
            "profile": escape(profile), "pods": len(placements), "scheduled": status["Scheduled"],
            "unschedulable": status["Unschedulable"], "errors": status["Error"], "other": other,
            "preemptions": len(preemptions_by.get(profile, [])),
            "mean score": f"{sum(totals) / len(totals):.1f}" if totals else "-",
        })
    # Errors and "other" (neither scheduled nor unschedulable) are rare: a column only when some profile has them.
    columns = [c for c in ("pods", "scheduled", "unschedulable", "errors", "other", "preemptions", "mean score")
               if c not in ("errors", "other") or any(r[c] for r in rows)]
    for col in columns:
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(str(r["profile"]), *(v if isinstance(v := r[c], str) else f"{v:,}" for c in columns))
    console.print(t)


def _profile_section(
    console: Console, placements: list[dict[str, Any]], preemptions: list[dict[str, Any]], max_rows: int,
    pod_rows: int | None, suffix: str,
) -> None:
    """A profile's pods that did not land and why, its preemptions and (``-o wide``) its pod list."""
    left_pending = [p for p in placements if p["status"] == "Pending" and p["message"]]
    for message, n in Counter(p["message"] for p in left_pending).most_common(max_rows):
        console.print(f"[yellow]{n} pod(s) left pending:[/yellow] {escape(message)}")
    gated = [p for p in placements if p["status"] == "Gated"]
    for message, n in Counter(p["message"] for p in gated).most_common(max_rows):
        console.print(f"[yellow]{n} pod(s) gated, never attempted:[/yellow] {escape(message)}")
    unschedulable = [p for p in placements if p["status"] == "Unschedulable"]
    errors = [p for p in placements if p["status"] == "Error"]
    # Verdicts and errors apart, counted as the summary counts them: an error is a bug (a plugin's,
    # or the input's), not a placement decision.
    for title, rows, header in (
        (f"Unschedulable pods{suffix}: {len(unschedulable)}", unschedulable, "reason"),
        (f"Pods that failed with an error{suffix}: {len(errors)} (--debug shows tracebacks)", errors, "error"),
    ):
        if rows:
            _reasons_table(console, title, rows, header, max_rows)
    print_preemptions(console, preemptions, max_rows, f"Preemptions{suffix}")
    if pod_rows is not None:
        print_pod_list(console, placements, preemptions, pod_rows, f"Pods{suffix}")


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
        t.add_row(str(n), escape(first[message]), escape(message))
    console.print(t)
