"""Rendering an explanation (per node × per plugin verdicts and scores) in the terminal: shared by
``kubesched simulate --explain`` and ``kubesched explain`` on a live cluster."""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping

from rich.console import Console
from rich.table import Table

from kubesched.framework.explain import Explanation

#: Width for output that is not a terminal (a pipe, a file) when ``COLUMNS`` does not say: the
#: width of a common terminal, so `| less` and a file read like the terminal does (long messages
#: wrap inside their cell instead of making every row 300+ characters wide).
PIPE_WIDTH = 100


def console(stderr: bool = False) -> Console:
    """A rich console as wide as the terminal; ``COLUMNS`` when set (rich reads it, on a terminal
    or not); else :data:`PIPE_WIDTH`."""
    c = Console(stderr=stderr)
    if c.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return c
    return Console(stderr=stderr, width=PIPE_WIDTH)


def print_explanation(console: Console, ex: Explanation, max_rows: int = 50) -> None:
    console.print(f"[bold]Explain {ex.pod}[/bold] (profile {ex.profile})")
    for name, st in ex.pre_filter.items():
        console.print(f"  PreFilter {name}: {st}")
    for name, st in ex.score_errors.items():
        console.print(f"  [red]Score {name}: {st}[/red]", highlight=False)
    if ex.skipped_filters:
        console.print(f"  [dim]filters skipped for this pod: {', '.join(ex.skipped_filters)}[/dim]")
    if ex.skipped_scores:
        console.print(f"  [dim]scores skipped for this pod: {', '.join(ex.skipped_scores)}[/dim]")
    if ex.message:
        console.print(f"  [red]{ex.message}[/red]")
    nodes = ex.feasible + ex.rejected
    any_feasible = bool(ex.feasible)
    score_plugins = [p for p in ex.score_plugins if p not in ex.skipped_scores] if any_feasible else []
    title = f"Per node ({min(len(nodes), max_rows)} of {len(nodes)}; feasible first, by total score"
    t = Table(title=title + (f"; chosen: {ex.chosen})" if ex.chosen else ")"))
    t.add_column("node", no_wrap=True)
    t.add_column("verdict", overflow="fold", min_width=24)
    for p in score_plugins:
        t.add_column(f"{p} ×{ex.weights.get(p, 1)}", justify="right")
    if any_feasible:
        t.add_column("total", justify="right")
    for n in nodes[:max_rows]:
        notes = "".join(f"\n[dim]{plugin}: {note}[/dim]" for plugin, note in n.notes.items())
        if n.feasible:
            verdict = "[green]fits (chosen)[/green]" if n.node == ex.chosen else "[green]fits[/green]"
            verdict += notes
            scores = [str(n.scores[p]) if p in n.scores else "-" for p in score_plugins]
            t.add_row(n.node, verdict, *scores, str(n.total))
        else:
            verdict = "; ".join(
                f"[red]{plugin}[/red]: {st.message}" for plugin, st in n.filters.items() if st is not None
            ) + notes
            t.add_row(n.node, verdict, *["" for _ in score_plugins], *([""] if any_feasible else []))
    console.print(t)


def print_tracebacks(console: Console, exceptions: Mapping[str, BaseException]) -> None:
    """Each distinct error's traceback once, under the message users saw."""
    for message, exc in exceptions.items():
        console.print(f"[red]{message}[/red]", highlight=False, soft_wrap=True)
        console.print("".join(traceback.format_exception(exc)).rstrip(), markup=False, highlight=False, soft_wrap=True)
