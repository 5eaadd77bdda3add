"""``kubesched capacity --report`` (simulate/report/capacity.py): the page shows the numbers of the
JSON answer, stays the same size whatever the cluster's node count (top nodes + a histogram), and
renders in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kubesched.simulate.report.capacity import TOP_NODES, render_capacity_html
from unit.simulate.test_capacity import files, run_capacity  # noqa: F401 (the fixture)
from unit.simulate.test_cli_simulate import ok
from unit.simulate.test_compare import _render
from unit.simulate.test_report_html import _chromium_or_skip


def test_report_shows_the_answers_of_the_json(files: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    args = ("--cluster", files["cluster"], "--workload", files["workload"], "--node-template", files["nodes"],
            "--seed", "1")
    doc = json.loads(ok(run_capacity(*args, "--output", "json")).stdout)
    page = tmp_path / "capacity.html"
    ok(run_capacity(*args, "--report", page))
    html = page.read_text()
    assert "http://" not in html and "https://" not in html  # self-contained
    web = next(f for f in doc["replicasThatFit"] if f["workload"] == "Deployment shop/web")
    i = doc["replicasThatFit"].index(web)
    block = html[html.index(f'id="capacity-fit-{i}"'):]
    assert f'<div class="val">{web["fits"]:,}</div>' in block
    # The busiest node and its count are in the top-nodes chart; every limiting reason, in the
    # scheduler's words, with its node count.
    node, count = next(iter(web["perNode"].items()))
    assert f"<title>{node}: {count}</title>" in block
    for reason, n in web["limit"]["reasons"].items():
        assert f"<title>{reason}: {n}</title>" in block
    assert web["limit"]["message"] in block and "0/6 nodes are available" in block
    # Histogram: the 6 nodes, those that took none included.
    hist = re.search(rf'data-chart="capacity-histogram-{i}".*?</svg>', block, re.S)
    assert hist is not None and sum(int(n) for n in re.findall(r"· nodes: (\d+)</title>", hist.group(0))) == 6
    # The node search: each template's answer and every step.
    for j, s in enumerate(doc["scaleUp"]):
        part = html[html.index(f'id="capacity-scale-{j}"'):]
        assert f'<div class="val">+{s["nodes"]:,}</div>' in part
        steps = part[part.index(f'id="capacity-steps-{j}"'):part.index("</table>")]
        assert steps.count("<tr>") == len(s["simulations"]) + 1  # + the header row
    cheapest = html.index(f'id="capacity-scale-{[s["template"] for s in doc["scaleUp"]].index(doc["cheapest"])}"')
    assert '<span class="chip">cheapest</span>' in html[cheapest:cheapest + 400]


def _doc(nodes: int) -> dict[str, Any]:
    per_node = {f"node-{i:05d}": 1 + i % 7 for i in range(nodes)}
    return {
        "kind": "Capacity", "source": "generated", "profiles": ["default-scheduler"], "clusterNodes": nodes,
        "replicasThatFit": [{
            "workload": "Deployment shop/web", "fits": sum(per_node.values()), "nodesUsed": nodes,
            "perNode": dict(sorted(per_node.items(), key=lambda kv: (-kv[1], kv[0]))),
            "limit": {"message": f"0/{nodes} nodes are available: {nodes} Insufficient cpu.",
                      "reasons": {"Insufficient cpu": nodes}},
            "slotsExhausted": False, "clusterUnplaced": 0, "seconds": 1.0,
        }],
        "scaleUp": [], "cheapest": None,
    }


def test_thousands_of_nodes_make_a_page_of_the_same_size() -> None:
    small, large = render_capacity_html(_doc(60)), render_capacity_html(_doc(6000))
    assert len(large) < len(small) * 1.1 and len(large) < 60_000
    top = re.search(r'data-chart="capacity-top-nodes-0".*?</svg>', large, re.S)
    assert top is not None and top.group(0).count("<g>") == TOP_NODES + 1  # + "… 5,985 more nodes"
    assert "5,985 more nodes" in top.group(0)


def test_capacity_page_renders_in_headless_chromium(files: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    chromium = _chromium_or_skip()
    page = tmp_path / "capacity.html"
    ok(run_capacity("--cluster", files["cluster"], "--workload", files["workload"], "--node-template",
                    files["nodes"], "--report", page))
    dom = _render(chromium, page, tmp_path / "capacity.png")
    for chart in ("capacity-top-nodes-0", "capacity-histogram-0", "capacity-reasons-0", "capacity-search-0"):
        assert f'data-chart="{chart}"' in dom, chart
    assert 'id="capacity-templates"' in dom
