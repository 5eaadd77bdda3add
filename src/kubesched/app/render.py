"""Rendering an explanation (per node × per plugin verdicts and scores) in the terminal: shared by
``kubesched simulate --explain`` and ``kubesched explain`` on a live cluster."""

from __future__ import annotations

import os
import traceback
from collections import Counter
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kubesched.api.readable import readable_quantity
from kubesched.framework.explain import Explanation, NodeExplanation

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


#: Rejected nodes shown one per row (closest first) before the rest are counted by reason.
NEAR_MISSES = 10


def print_explanation(console: Console, ex: Explanation, max_rows: int = 50, near_misses: int = NEAR_MISSES) -> None:
    """The pod's verdict on every node: feasible nodes by score (up to ``max_rows``), then the
    rejected nodes that came closest (up to ``near_misses``: fewest failing plugins, smallest
    shortfall), then the other rejected nodes counted by reason."""
    console.print(f"[bold]Explain {escape(ex.pod)}[/bold] (profile {escape(ex.profile)})")
    for name, note in ex.waiting.items():
        console.print(f"  [yellow]{name}: {escape(note)}[/yellow]", highlight=False)
    for name, st in ex.pre_filter.items():
        console.print(f"  PreFilter {name}: {escape(str(st))}")
    for name, st in ex.score_errors.items():
        console.print(f"  [red]Score {name}: {escape(str(st))}[/red]", highlight=False)
    if ex.skipped_filters:
        console.print(f"  [dim]filters skipped for this pod: {', '.join(ex.skipped_filters)}[/dim]")
    if ex.skipped_scores:
        console.print(f"  [dim]scores skipped for this pod: {', '.join(ex.skipped_scores)}[/dim]")
    if ex.message:
        console.print(f"  [red]{escape(ex.message)}[/red]")
    feasible = ex.feasible[:max_rows]
    ranked = ex.near_misses
    close, rest = ranked[: min(near_misses, max_rows)], ranked[min(near_misses, max_rows):]
    total = len(ex.nodes)
    score_plugins = [p for p in ex.score_plugins if p not in ex.skipped_scores] if feasible else []
    if feasible:
        title = (f"Per node ({len(feasible) + len(close)} of {total}): the feasible by total score"
                 + (f", chosen: {ex.chosen}" if ex.chosen else "") + "; then the rejected that came closest")
    else:
        title = (f"Nodes that came closest ({len(close)} of {total}): fewest failing plugins, "
                 "then the smallest shortfall of the pod's requests")
    t = Table(title=escape(title))
    t.add_column("node", no_wrap=True)
    t.add_column("verdict", overflow="fold", min_width=24)
    for p in score_plugins:
        t.add_column(f"{p} ×{ex.weights.get(p, 1)}", justify="right")
    if feasible:
        t.add_column("total", justify="right")
    short_by = any(n.shortfall for n in close)
    if short_by:
        t.add_column("short by", overflow="fold")
    for n in feasible:
        verdict = "[green]fits (chosen)[/green]" if n.node == ex.chosen else "[green]fits[/green]"
        scores = [str(n.scores[p]) if p in n.scores else "-" for p in score_plugins]
        t.add_row(escape(n.node), verdict + _notes(n), *scores, str(n.total), *([""] if short_by else []))
    for n in close:
        verdict = "; ".join(f"[red]{plugin}[/red]: {escape(st.message)}" for plugin, st in n.filters.items()
                            if st is not None)
        blanks = ["" for _ in score_plugins] + ([""] if feasible else [])
        t.add_row(escape(n.node), verdict + _notes(n), *blanks, *([_shortfall(n)] if short_by else []))
    console.print(t)
    if len(ex.feasible) > len(feasible):
        console.print(f"[dim]… and {len(ex.feasible) - len(feasible):,} more feasible nodes (--max-rows)[/dim]")
    if rest:
        _rest_by_reason(console, rest, max_rows)


def _notes(n: NodeExplanation) -> str:
    return "".join(f"\n[dim]{plugin}: {escape(note)}[/dim]" for plugin, note in n.notes.items())


def _shortfall(n: NodeExplanation) -> str:
    return ", ".join(f"{r} {readable_quantity(r, v)}" for r, v in n.shortfall.items())


def _rest_by_reason(console: Console, rest: Sequence[NodeExplanation], max_rows: int) -> None:
    """The rejected nodes not shown one by one, counted by their verdict (every failing plugin)."""
    by_reason = Counter(
        "; ".join(f"{plugin}: {st.message}" for plugin, st in n.filters.items() if st is not None) for n in rest
    )
    t = Table(title=f"The other {len(rest):,} rejected nodes, by reason")
    t.add_column("nodes", justify="right")
    t.add_column("reason", overflow="fold")
    for reason, count in by_reason.most_common(max_rows):
        t.add_row(f"{count:,}", escape(reason))
    console.print(t)
    if len(by_reason) > max_rows:
        console.print(f"[dim]… and {len(by_reason) - max_rows:,} more reasons[/dim]")


def print_tracebacks(console: Console, exceptions: Mapping[str, BaseException]) -> None:
    """Each distinct error's traceback once, under the message users saw."""
    for message, exc in exceptions.items():
        console.print(f"[red]{message}[/red]", highlight=False, soft_wrap=True)
        console.print("".join(traceback.format_exception(exc)).rstrip(), markup=False, highlight=False, soft_wrap=True)
