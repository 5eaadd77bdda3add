"""Per-pool underlay IP usage at the end of a run (``underlayIPPools`` in the JSON document: pool
→ total, active, reserved, free, as the UnderlayIPPool status the live scheduler writes), for the
terminal summary and the HTML report. Absent when the input has no pools, so other runs read as
before."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.table import Table

COLUMNS = ("total", "active", "reserved", "free")


def _pools(data: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    pools = data.get("underlayIPPools") or {}
    return sorted((str(k), v) for k, v in pools.items() if isinstance(v, Mapping))


def print_pools(console: Console, data: Mapping[str, Any], max_rows: int) -> None:
    pools = _pools(data)
    if not pools:
        return
    table = Table(title=f"Underlay IP pools, {min(len(pools), max_rows)} of {len(pools)}")
    table.add_column("pool")
    for col in COLUMNS:
        table.add_column(col, justify="right")
    # The fullest first: the pools that limit scheduling.
    for name, p in sorted(pools, key=lambda kv: (int(kv[1].get("free", 0)), kv[0]))[:max_rows]:
        table.add_row(markup_escape(name), *(f"{int(p.get(c, 0)):,}" for c in COLUMNS))
    console.print(table)


def pools_section(data: Mapping[str, Any]) -> str:
    pools = _pools(data)
    if not pools:
        return ""
    rows = "".join(
        f'<tr><td class="name">{escape(name)}</td>'
        + "".join(f'<td class="n" data-v="{int(p.get(c, 0))}">{int(p.get(c, 0)):,}</td>' for c in COLUMNS)
        + "</tr>"
        for name, p in pools
    )
    head = "".join(f'<th class="n">{c.capitalize()}</th>' for c in COLUMNS)
    return (
        '<section id="underlay-pools"><h2>Underlay IP pools</h2><div class="scroll"><table class="sortable">'
        "<caption>Addresses at the end of the run: active (held by pods), reserved (kept for claims), free"
        f"</caption><thead><tr><th>Pool</th>{head}</tr></thead><tbody>{rows}</tbody></table></div></section>"
    )
