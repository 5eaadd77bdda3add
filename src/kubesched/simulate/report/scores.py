"""The HTML report's score and per-profile sections. A configuration with several profiles gets a
table comparing them and one score section per profile: each profile has its own plugins and
weights, so one histogram over every pod would mix scales that mean different things."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.simulate.report.charts import (
    C_PLUGIN,
    C_SCORE,
    _e,
    _empty,
    _hbars,
    _int,
    _nice_step,
    _num,
    _vbars,
    _winning_score,
)

__all__ = ["profiles_section", "scores_sections"]


def _slug(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]+", "-", name)


def scores_sections(data: Mapping[str, Any], placements: Sequence[Mapping[str, Any]]) -> list[str]:
    """One score section, or with several profiles one per profile (in the configuration's order)."""
    profiles = [str(p) for p in data.get("profiles") or []]
    if len(profiles) <= 1:
        return [scores_section(placements)]
    by_profile: dict[str, list[Mapping[str, Any]]] = {p: [] for p in profiles}
    for p in placements:
        by_profile.setdefault(str(p.get("profile", "")), []).append(p)
    return [scores_section(rows, profile) for profile, rows in by_profile.items()]


def profiles_section(data: Mapping[str, Any], placements: Sequence[Mapping[str, Any]]) -> str:
    """Per profile: its simulated pods, what became of them, its preemptions and its chosen nodes'
    mean score; "" with a single profile (the summary cards say it all)."""
    profiles = [str(p) for p in data.get("profiles") or []]
    if len(profiles) <= 1:
        return ""
    status: dict[str, Counter[str]] = {p: Counter() for p in profiles}
    totals: dict[str, list[float]] = {p: [] for p in profiles}
    for p in placements:
        profile = str(p.get("profile", ""))
        status.setdefault(profile, Counter())[str(p.get("status"))] += 1
        win = _winning_score(p)
        if p.get("status") == "Scheduled" and win is not None:
            totals.setdefault(profile, []).append(_num(win.get("total")))
    preemptions = Counter(str(p.get("profile", "")) for p in data.get("preemptions") or [] if isinstance(p, Mapping))
    rows = []
    for profile, counts in status.items():
        scores = totals.get(profile) or []
        mean = f"{sum(scores) / len(scores):,.1f}" if scores else "—"
        rows.append(
            f'<tr><td class="name"><a href="#scores-{_e(_slug(profile))}">{_e(profile)}</a></td>'
            f'<td class="n">{sum(counts.values()):,}</td><td class="n">{counts["Scheduled"]:,}</td>'
            f'<td class="n">{counts["Unschedulable"]:,}</td><td class="n">{counts["Error"]:,}</td>'
            f'<td class="n">{preemptions[profile]:,}</td><td class="n">{mean}</td></tr>'
        )
    return (
        '<section id="profiles"><h2>Profiles</h2><p class="muted">Each profile schedules the pods whose '
        "<code>schedulerName</code> names it, with its own plugins and weights: scores compare within a profile."
        '</p><table><thead><tr><th>Profile</th><th class="n">Simulated pods</th>'
        '<th class="n">Scheduled</th><th class="n">Unschedulable</th><th class="n">Errors</th>'
        '<th class="n">Preemptions</th><th class="n">Mean score</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def scores_section(placements: Sequence[Mapping[str, Any]], profile: str | None = None) -> str:
    """The winning node's total score (histogram) and each plugin's average contribution, over
    ``placements``: one profile's when ``profile`` is given (each profile weighs its own plugins,
    so their scores are never merged), else all of them."""
    of = f" — profile {profile}" if profile else ""
    extra = f' data-profile="{_e(profile)}"' if profile else ""
    totals: list[float] = []
    plugin_sum: dict[str, float] = {}
    for p in placements:
        if p.get("status") != "Scheduled":
            continue
        win = _winning_score(p)
        if win is None:
            continue
        totals.append(_num(win.get("total")))
        for plugin, v in (win.get("plugins") or {}).items():
            plugin_sum[str(plugin)] = plugin_sum.get(str(plugin), 0.0) + _num(v)
    if totals:
        lo, hi = min(totals), max(totals)
        width = max(1.0, _nice_step(hi - lo, 20)) if hi > lo else 1.0
        start = math.floor(lo / width) * width
        nbins = int((hi - start) // width) + 1
        counts = [0.0] * nbins
        for t in totals:
            counts[min(int((t - start) // width), nbins - 1)] += 1
        labels = [_int(start + i * width) for i in range(nbins)]
        hist = _vbars(
            "scores",
            f"Winning node's total score ({len(totals):,} scheduled pods)",
            labels,
            [("pods", C_SCORE, counts)],
            x_label="total score of the chosen node" + (f" (bins of {_int(width)})" if width > 1 else ""),
            y_label="pods",
            extra=extra,
        )
    else:
        hist = _empty("scores", "Winning node's total score", "No scored placements", height=320, extra=extra)
    if plugin_sum and totals:
        n = len(totals)
        rows = sorted(((k, v / n) for k, v in plugin_sum.items()), key=lambda kv: (-kv[1], kv[0]))
        plugins = _hbars(
            "scores-plugins",
            "Average weighted score contribution per plugin",
            rows,
            colour=C_PLUGIN,
            x_label="average weighted score on the chosen node",
            value_fmt=lambda v: f"{v:,.1f}",
            label_chars=34,
            extra=extra,
        )
    else:
        plugins = _empty("scores-plugins", "Average score contribution per plugin", "No per-plugin scores",
                         height=320, extra=extra)
    section_id = f"scores-{_slug(profile)}" if profile else "scores"
    return (
        f'<section id="{section_id}"><h2>Scores{_e(of)}</h2>'
        f'<div class="grid two"><figure>{hist}</figure><figure>{plugins}</figure></div></section>'
    )
