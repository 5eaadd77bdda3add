"""``kubesched compare`` (simulate/whatif/compare.py): each configuration's column is what ``kubesched
simulate`` says for that configuration alone (placements, counts, utilisation recomputed from its
JSON), the differences are exactly the pods whose outcome differs, and a bin-packing profile shows
as one (fewer nodes used, wider spread). The what-if HTML (compare page, drain section) renders in
headless Chromium."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kubesched.cli import main
from unit.simulate.test_cli_simulate import ok, run_json
from unit.simulate.test_report_html import _chromium_or_skip

DEFAULT = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
"""
BINPACK = DEFAULT + """  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
"""
CLUSTER = ("--nodes", "60", "--pods", "240", "--seed", "4")


def run_compare(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["compare", "-q", *map(str, args)], env={"COLUMNS": "300"})


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("configs")
    (d / "spread.yaml").write_text(DEFAULT)
    (d / "binpack.yaml").write_text(BINPACK)
    return {"spread": d / "spread.yaml", "binpack": d / "binpack.yaml"}


@pytest.fixture(scope="module")
def doc(configs: dict[str, Path]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok(run_compare("--config", configs["spread"], "--config", configs["binpack"],
                                                     *CLUSTER, "--output", "json")).stdout)
    return data


def test_each_column_is_what_simulate_says_for_that_configuration(doc: dict[str, Any],
                                                                  configs: dict[str, Path]) -> None:
    assert [c["label"] for c in doc["configs"]] == ["spread", "binpack"]
    alone = {name: run_json("--config", configs[name], *CLUSTER) for name in ("spread", "binpack")}
    outcomes = {
        name: {p["pod"]: (p["node"] if p["status"] == "Scheduled" else p["status"]) for p in data["placements"]}
        for name, data in alone.items()
    }
    for col, name in zip(doc["configs"], ("spread", "binpack"), strict=True):
        s = alone[name]["summary"]
        assert (col["scheduled"], col["unschedulable"], col["preemptions"]) == (
            s["scheduled"], s["unschedulable"], s["preemptions"])
        nodes = [n for n in alone[name]["nodes"] if not n["unschedulable"]]
        for res in ("cpu", "memory"):
            ratios = [n["requestedAfter"][res] / n["allocatable"][res] for n in nodes if n["allocatable"][res]]
            u = col["utilisation"][res]
            assert u["mean"] == pytest.approx(statistics.fmean(ratios), abs=1e-5)
            assert u["stddev"] == pytest.approx(statistics.pstdev(ratios), abs=1e-5)
            assert (u["min"], u["max"]) == (pytest.approx(min(ratios), abs=1e-5), pytest.approx(max(ratios), abs=1e-5))
            assert sum(col["utilisationHistogram"][res]) == len(ratios)
        assert col["nodesUsed"] == sum(1 for n in alone[name]["nodes"] if n["podsAfter"])
        free = {n["name"]: [n["allocatable"]["cpu"] - n["requestedAfter"]["cpu"],
                            n["allocatable"]["memory"] - n["requestedAfter"]["memory"]] for n in nodes}
        assert col["fragmentation"]["freePerNode"] == free
        assert col["fragmentation"]["largestFreeCpu"]["cpu"] == max(c for c, _ in free.values())
    # The differences are exactly the pods whose outcome differs between the two runs.
    differ = sorted(k for k in outcomes["spread"] if outcomes["spread"][k] != outcomes["binpack"].get(k))
    assert [d["pod"] for d in doc["differences"]] == differ and doc["placementsDiffer"] == len(differ) > 0
    for d in doc["differences"]:
        assert d["outcomes"] == [outcomes["spread"][d["pod"]], outcomes["binpack"][d["pod"]]]


def test_bin_packing_uses_fewer_nodes_and_spreads_wider(doc: dict[str, Any]) -> None:
    spread, binpack = doc["configs"]
    assert binpack["nodesUsed"] < spread["nodesUsed"]
    assert binpack["utilisation"]["cpu"]["stddev"] > spread["utilisation"]["cpu"]["stddev"]
    assert binpack["fragmentation"]["largestFreeCpu"]["cpu"] >= spread["fragmentation"]["largestFreeCpu"]["cpu"]


def test_a_configuration_against_itself_has_no_difference(configs: dict[str, Path], tmp_path: Path) -> None:
    data = json.loads(ok(run_compare("--config", configs["spread"], "--config", configs["spread"], *CLUSTER,
                                     "--output", "json")).stdout)
    assert data["placementsDiffer"] == 0 and data["differences"] == []
    a, b = data["configs"]
    assert a["label"] != b["label"]  # the same name twice: labelled by path
    assert {k: v for k, v in a.items() if k not in ("label", "wallSeconds")} == {
        k: v for k, v in b.items() if k not in ("label", "wallSeconds")}
    text = ok(run_compare("--config", configs["spread"], "--config", configs["spread"], *CLUSTER)).stdout
    assert "same outcome under each configuration" in text


def test_text_output_and_errors(configs: dict[str, Path]) -> None:
    text = ok(run_compare("--config", configs["spread"], "--config", configs["binpack"], *CLUSTER,
                          "--max-rows", "3")).stdout
    assert "Side by side" in text and "nodes used" in text and "Pods placed differently" in text
    assert "more (see --output json)" in text
    result = run_compare("--config", configs["spread"], *CLUSTER)
    assert result.exit_code == 2 and "at least two configurations" in result.output


def _render(chromium: Path, page: Path, png: Path) -> str:
    with tempfile.TemporaryDirectory() as profile:
        common = [str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  f"--user-data-dir={profile}"]
        dom = subprocess.run([*common, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                             timeout=120).stdout
        subprocess.run([*common, "--window-size=1400,1800", f"--screenshot={png}", page.as_uri()], check=True,
                       capture_output=True, timeout=120)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    return dom


def test_compare_and_drain_pages_render_in_headless_chromium(configs: dict[str, Path], tmp_path: Path) -> None:
    chromium = _chromium_or_skip()
    page = tmp_path / "compare.html"
    ok(run_compare("--config", configs["spread"], "--config", configs["binpack"], *CLUSTER, "--report", page))
    dom = _render(chromium, page, tmp_path / "compare.png")
    for chart in ("compare-outcomes", "compare-utilisation", "compare-free-cpu"):
        assert f'data-chart="{chart}"' in dom, chart
    assert 'id="compare-table"' in dom and 'id="differences"' in dom and "binpack" in dom

    page = tmp_path / "drain.html"
    zone = "topology.kubernetes.io/zone=us-east-1a"
    ok(CliRunner().invoke(main, ["simulate", "-q", *CLUSTER, "--drain-selector", zone, "--report", str(page)]))
    dom = _render(chromium, page, tmp_path / "drain.png")
    assert 'id="drain"' in dom and 'data-chart="drain-destinations"' in dom and "Drain what-if" in dom
