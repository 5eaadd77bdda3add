"""The HTML report: self-contained, escaped, the four charts present, numbers match the data, empty
cases render, and a 5,000-node / 10,000-pod document renders fast into a reasonably small file."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kubesched.simulate.report.html import MAX_FAILED_ROWS, render_html

GI = 2**30
CHARTS = ("utilisation", "pods-per-node", "scores", "unschedulable-reasons")
CHROMIUM = Path("/usr/bin/chromium")


def _node(i: int, cpu_before: int, cpu_after: int, pods_before: int, pods_after: int) -> dict[str, Any]:
    return {
        "name": f"node-{i}",
        "labels": {"zone": f"z{i % 3}"},
        "taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}] if i % 7 == 0 else [],
        "unschedulable": False,
        "allocatable": {"cpu": 4000, "memory": 16 * GI, "ephemeral-storage": 100 * GI, "pods": 110},
        "requestedBefore": {"cpu": cpu_before, "memory": 2 * GI, "ephemeral-storage": 0, "pods": pods_before},
        "requestedAfter": {"cpu": cpu_after, "memory": 6 * GI, "ephemeral-storage": 0, "pods": pods_after},
        "podsBefore": pods_before,
        "podsAfter": pods_after,
    }


def _scheduled(i: int, node: str, total: int) -> dict[str, Any]:
    return {
        "pod": f"default/web-{i}",
        "uid": f"u{i}",
        "profile": "default-scheduler",
        "status": "Scheduled",
        "node": node,
        "attempts": 1,
        "message": "",
        "time": i * 0.01,
        "feasibleNodes": 3,
        "evaluatedNodes": 3,
        "reasons": {},
        "score": {"node": node, "total": total, "plugins": {"NodeResourcesFit": total - 100, "TaintToleration": 100}},
    }


def _unschedulable(i: int, n_nodes: int, name: str | None = None) -> dict[str, Any]:
    return {
        "pod": name or f"batch/job-{i}",
        "uid": f"x{i}",
        "profile": "default-scheduler",
        "status": "Unschedulable",
        "node": None,
        "attempts": 2,
        "message": f"0/{n_nodes} nodes are available: {n_nodes} Insufficient cpu. preemption: not helpful.",
        "time": 1.0,
        "feasibleNodes": 0,
        "evaluatedNodes": n_nodes,
        "reasons": {"Insufficient cpu": n_nodes},
        "score": None,
    }


def _doc(nodes: list[dict[str, Any]], placements: list[dict[str, Any]], reasons: dict[str, int]) -> dict[str, Any]:
    def count(s: str) -> int:
        return sum(1 for p in placements if p["status"] == s)

    simulated = count("Scheduled") + count("Unschedulable")
    return {
        "schemaVersion": 2,
        "kubeschedVersion": "0.1.0",
        "source": "cluster.yaml",
        "profiles": ["default-scheduler"],
        "summary": {
            "nodes": len(nodes),
            "pods": len(placements) + 4,
            "preBound": 4,
            "simulated": simulated,
            "scheduled": count("Scheduled"),
            "unschedulable": count("Unschedulable"),
            "errors": 0,
            "waiting": 0,
            "pending": count("Pending"),
            "attempts": simulated + count("Unschedulable"),
            "virtualSeconds": 12.5,
            "wallSeconds": 0.25,
            "podsPerSecond": simulated / 0.25,
            "interrupted": False,
            "utilisationBefore": {"cpu": 0.25, "memory": 0.125, "pods": 0.05},
            "utilisationAfter": {"cpu": 0.625, "memory": 0.375, "pods": 0.1},
        },
        "skippedObjects": {"apps/v1 Deployment": 3},
        "reassignedSchedulerNames": {"my-sched": 10},
        "unschedulableReasons": reasons,
        "nodes": nodes,
        "placements": placements,
    }


def small_doc() -> dict[str, Any]:
    nodes = [_node(i, 1000, 2500, 2, 5) for i in range(3)]
    placements = [_scheduled(i, f"node-{i % 3}", 250 + i) for i in range(7)]
    placements += [_unschedulable(100, 3), _unschedulable(101, 3)]
    reasons = {"Insufficient cpu": 2, "node(s) had untolerated taint {dedicated: infra}": 1}
    return _doc(nodes, placements, reasons)


def big_doc(n_nodes: int = 5000, n_pods: int = 10_000) -> dict[str, Any]:
    nodes = [_node(i, (i * 37) % 4000, (i * 37) % 4000 + (i % 5) * 600, i % 40, i % 40 + i % 9) for i in range(n_nodes)]
    placements: list[dict[str, Any]] = []
    for i in range(n_pods):
        if i % 10 == 9:
            placements.append(_unschedulable(i, n_nodes))
        else:
            placements.append(_scheduled(i, f"node-{i % n_nodes}", 200 + (i * 13) % 300))
    reasons = {f"reason number {k} " + "x" * (k % 90): 1000 - k for k in range(40)}
    return _doc(nodes, placements, reasons)


def _chart(html: str, name: str) -> str:
    m = re.search(rf'<svg [^>]*data-chart="{re.escape(name)}"[^>]*>.*?</svg>', html, re.S)
    assert m is not None, f"chart {name!r} missing"
    return m.group(0)


def _assert_self_contained(html: str) -> None:
    lowered = html.lower()
    assert "http://" not in lowered
    assert "https://" not in lowered
    assert "<link" not in lowered
    assert "@import" not in lowered
    assert "url(" not in lowered
    assert re.search(r"""src\s*=""", lowered) is None  # no <script src>, <img src>, <iframe src>


def test_small_report_is_self_contained_and_has_the_four_charts() -> None:
    html = render_html(small_doc())
    assert html.startswith("<!DOCTYPE html>")
    assert html.rstrip().endswith("</html>")
    _assert_self_contained(html)
    for name in CHARTS:
        svg = _chart(html, name)
        assert "<title>" in svg
        assert 'class="t"' in svg  # a visible chart title
    # Utilisation per resource, before and after, with a legend.
    util = _chart(html, "utilisation")
    for label in ("CPU", "Memory", "Pods", "before", "after", "62.5%", "25.0%"):
        assert label in util
    assert html.count('data-chart="utilisation-nodes"') == 3


def test_numbers_match_the_data() -> None:
    data = small_doc()
    html = render_html(data)
    s = data["summary"]
    cards = dict(re.findall(r'<div class="lbl">([^<]+)</div><div class="val">([^<]+)</div>', html))
    assert cards["Scheduled"] == f"{s['scheduled']:,}" == "7"
    assert cards["Unschedulable"] == "2"
    assert cards["Pre-bound"] == "4"
    assert cards["Pending"] == "0"
    assert cards["Nodes"] == "3"
    assert cards["Virtual time"] == "12.5 s"
    assert cards["Throughput"] == "36.0"
    # Reasons chart bars carry the counts, most frequent first.
    reasons = _chart(html, "unschedulable-reasons")
    titles = re.findall(r"<g><title>([^<]*)</title>", reasons)
    assert titles == ["Insufficient cpu: 2", "node(s) had untolerated taint {dedicated: infra}: 1"]
    # Scores: 7 scheduled pods counted, per-plugin averages of the winning node.
    assert "7 scheduled pods" in _chart(html, "scores")
    plugins = _chart(html, "scores-plugins")
    assert "TaintToleration: 100.0" in plugins
    assert "NodeResourcesFit: 153.0" in plugins  # mean(250..256) - 100
    # Notes and unschedulable table.
    assert "apps/v1 Deployment" in html and "my-sched" in html
    assert html.count('<span class="st st-Unschedulable">') == 2
    assert "0/3 nodes are available: 3 Insufficient cpu." in html


def test_user_input_is_escaped() -> None:
    evil = "<script>alert(1)</script>"
    data = small_doc()
    data["placements"].append(_unschedulable(999, 3, name=f"default/{evil}"))
    data["placements"][-1]["message"] = f'0/3 nodes are available: "{evil}"'
    data["nodes"][0]["name"] = f"node-{evil}"
    data["nodes"][0]["requestedAfter"]["cpu"] = 4000  # make it the top node so it is listed
    data["nodes"][1]["taints"] = [{"key": evil, "value": "x", "effect": "NoSchedule"}]
    data["unschedulableReasons"][f"bad {evil} reason"] = 5
    data["skippedObjects"][evil] = 1
    data["reassignedSchedulerNames"][evil] = 1
    data["profiles"].append(evil)
    data["source"] = evil
    html = render_html(data)
    assert evil not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # The only <script> tag is the report's own inline one.
    assert html.count("<script") == 1


def test_long_reasons_are_wrapped_and_truncated_with_full_text_in_title() -> None:
    long = "node(s) didn't satisfy plugin(s) [VeryLongPluginName] " + "with a very long explanation " * 8
    data = small_doc()
    data["unschedulableReasons"] = {long: 3}
    svg = _chart(render_html(data), "unschedulable-reasons")
    assert f"<title>{long.replace(chr(39), '&#x27;')}: 3</title>" in svg
    lines = re.findall(r'<text class="rl"[^>]*>([^<]*)</text>', svg)
    assert len(lines) == 2 and lines[1].endswith("…")
    assert all(len(line) <= 70 for line in lines)


def test_no_unschedulable_pods_says_so() -> None:
    data = small_doc()
    data["placements"] = [p for p in data["placements"] if p["status"] != "Unschedulable"]
    data["unschedulableReasons"] = {}
    data["summary"]["unschedulable"] = 0
    html = render_html(data)
    assert "No unschedulable pods" in _chart(html, "unschedulable-reasons")
    assert "No unschedulable or failed pods." in html


def test_zero_nodes_and_empty_documents_render() -> None:
    data = small_doc()
    data["nodes"] = []
    data["placements"] = []
    data["unschedulableReasons"] = {}
    html = render_html(data)
    for name in CHARTS:
        _chart(html, name)
    assert "No nodes in the cluster" in _chart(html, "pods-per-node")
    assert "No scored placements" in _chart(html, "scores")
    # Even a bare document (missing keys, zero everything) renders.
    bare = render_html({})
    for name in CHARTS:
        _chart(bare, name)
    _assert_self_contained(bare)


def test_failed_pods_table_lists_the_first_200_and_counts_the_rest() -> None:
    html = render_html(big_doc(50, 3000))  # 300 unschedulable pods
    assert html.count('<span class="st st-Unschedulable">') == MAX_FAILED_ROWS
    assert "… and 100 more unschedulable or failed pods" in html
    reasons = _chart(html, "unschedulable-reasons")
    assert "25 more reasons" in reasons  # 40 reasons, 15 drawn


def test_large_cluster_renders_small() -> None:
    # How fast it renders is measured by the benchmarks, not asserted here.
    html = render_html(big_doc())
    assert len(html.encode()) < 5 * 2**20
    _assert_self_contained(html)
    for name in CHARTS:
        _chart(html, name)
    # Aggregated: the SVG element count does not grow with nodes or pods.
    svg_elements = sum(
        len(re.findall(r"<(rect|line|text|tspan|path|circle)\b", m)) for m in re.findall(r"<svg.*?</svg>", html, re.S)
    )
    assert svg_elements < 3000, svg_elements
    assert "Top 25 of 5,000 nodes" in html
    cards = dict(re.findall(r'<div class="lbl">([^<]+)</div><div class="val">([^<]+)</div>', html))
    assert cards["Scheduled"] == "9,000"
    assert cards["Unschedulable"] == "1,000"


def _chromium_or_skip() -> Path:
    if not CHROMIUM.exists() and os.environ.get("CI") != "true":
        pytest.skip("/usr/bin/chromium not installed (apt-get install -y chromium); required when CI=true")
    return CHROMIUM


def test_renders_in_headless_chromium(tmp_path: Path) -> None:
    chromium = _chromium_or_skip()
    page = tmp_path / "report.html"
    page.write_text(render_html(big_doc(500, 2000)), encoding="utf-8")
    png = tmp_path / "report.png"
    with tempfile.TemporaryDirectory() as profile:
        common = [
            str(chromium),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
        ]
        dom = subprocess.run(
            [*common, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True, timeout=120
        ).stdout
        subprocess.run(
            [*common, "--window-size=1400,2400", f"--screenshot={png}", page.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )
    # The browser parsed every chart as SVG (the serialised DOM still carries them) ...
    for name in CHARTS:
        assert f'data-chart="{name}"' in dom
    assert "</svg>" in dom
    # ... and painted a non-trivial page.
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000


def two_profile_doc() -> dict[str, Any]:
    """small_doc with a second profile whose four pods score 40-43 (the first profile's: 250-256)."""
    data = small_doc()
    data["profiles"] = ["default-scheduler", "ip-scheduler"]
    for i in range(4):
        p = _scheduled(200 + i, "node-1", 40 + i)
        p["profile"] = "ip-scheduler"
        p["score"]["plugins"] = {"UnderlayIP": 40 + i}
        data["placements"].append(p)
    data["preemptions"] = [{"preemptor": "default/web-200", "profile": "ip-scheduler", "node": "node-1",
                            "victims": ["default/web-1"], "reason": "", "time": 1.0, "clearedNominations": []}]
    return data


def test_two_profiles_get_a_profiles_table_and_a_score_section_each() -> None:
    html = render_html(two_profile_doc())
    table = re.search(r'<section id="profiles">.*?</section>', html, re.S)
    assert table is not None
    rows = re.findall(r"<tr><td class=\"name\">.*?</tr>", table.group(0), re.S)
    cells = [re.findall(r'<td class="n">([^<]*)</td>', r) for r in rows]
    assert cells[0] == ["9", "7", "2", "0", "0", "253.0"]  # default-scheduler: 7 scheduled scoring 250-256
    assert cells[1] == ["4", "4", "0", "0", "1", "41.5"]
    for profile, plugin, other in (("default-scheduler", "NodeResourcesFit", "UnderlayIP"),
                                   ("ip-scheduler", "UnderlayIP", "NodeResourcesFit")):
        section = re.search(rf'<section id="scores-{profile}">.*?</section>', html, re.S)
        assert section is not None, profile
        assert f"Scores — profile {profile}" in section.group(0)
        assert plugin in section.group(0) and other not in section.group(0)
    assert html.count('data-chart="scores"') == 2


def test_one_profile_keeps_one_score_section_and_no_profiles_table() -> None:
    html = render_html(small_doc())
    assert '<section id="scores">' in html and 'id="profiles"' not in html
