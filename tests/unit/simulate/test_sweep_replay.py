"""``kubesched sweep --trace``: policies × seeds replaying one trace (issue 28 item 4). On the small
synthetic openb trace of examples/openb-mini: the outcomes and curves do not depend on the number of
workers, each run is ``kubesched simulate --trace`` with the same seed, the summary is the seeds'
mean and spread, and the table, JSON and HTML page show the curves."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from kubesched.simulate.engine.timeline import Samples, allocation_at_demand, demand_curves
from kubesched.simulate.whatif.sweep import REPLAY_OUTCOME_FIELDS
from unit.simulate.test_cli_simulate import ok, run_json
from unit.simulate.test_sweep import run_sweep

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
TRACE = f"openb:{EXAMPLES / 'openb-mini'}"
POLICIES = [EXAMPLES / "gpushare-bestfit.yaml", EXAMPLES / "gpushare-randomfit.yaml"]
REPLAY = ["--trace", TRACE, "--arrivals", "sequential", "--inflate", "1.3", "--gpu-nodes-only"]


def sweep_doc(*args: str | Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ok(run_sweep(*args, "--output", "json")).stdout)
    return doc


@pytest.fixture(scope="module")
def on_one_and_two_workers() -> tuple[dict[str, Any], dict[str, Any]]:
    configs = [a for c in POLICIES for a in ("--config", str(c))]
    return (sweep_doc(*configs, *REPLAY, "--seeds", "1-2", "--workers", "1"),
            sweep_doc(*configs, *REPLAY, "--seeds", "1-2", "--workers", "2"))


def test_replay_sweep_is_the_same_on_one_or_two_workers_and_each_run_is_simulate_with_its_seed(
    on_one_and_two_workers: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    one, two = on_one_and_two_workers
    assert len(one["results"]) == len(two["results"]) == 2 * 2
    for a, b in zip(one["results"], two["results"], strict=True):
        assert {k: a[k] for k in REPLAY_OUTCOME_FIELDS} == {k: b[k] for k in REPLAY_OUTCOME_FIELDS}, a["index"]
    assert one["summary"] == [{**row, **{k: one["summary"][i][k] for k in ("podsPerSecond", "wallSeconds",
                                                                          "peakRssMiB")}}
                              for i, row in enumerate(two["summary"])]
    assert one["replay"] == {"scenario": None, "trace": TRACE, "arrivals": "sequential", "inflate": 1.3,
                             "gpu_nodes_only": True}
    # Seeds draw different orders and clones: the runs differ.
    assert len({r["placementDigest"] for r in two["results"]}) == 4
    # A run is `kubesched simulate --trace` with the same configuration and seed.
    run = next(r for r in two["results"] if r["configLabel"] == "gpushare-randomfit" and r["seed"] == 2)
    alone = run_json("--config", POLICIES[1], *REPLAY, "--seed", "2")
    timeline = alone["timeline"]
    assert run["curves"]["gpuAllocation"]["100"] == timeline["gpuAllocationAtArrivedDemand"]["100"]
    assert run["curves"]["gpuAllocation"]["130"] == timeline["gpuAllocationAtArrivedDemand"]["130"]
    assert run["arrived"] == timeline["arrived"]
    assert run["gpuAllocation"] == timeline["final"]["gpuAllocation"]
    assert run["fragmentedGpuMilli"] == timeline["final"]["fragmentedGpuMilli"]
    assert run["scheduled"] == alone["summary"]["scheduled"]


def test_replay_summary_is_the_mean_and_spread_over_the_seeds(
    on_one_and_two_workers: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    doc = on_one_and_two_workers[1]
    row = next(r for r in doc["summary"] if r["config"] == "gpushare-bestfit")
    runs = [r for r in doc["results"] if r["configLabel"] == "gpushare-bestfit"]
    at100 = [r["curves"]["gpuAllocation"]["100"] for r in runs]
    assert row["curves"]["gpuAllocation"]["100"] == {
        "mean": round(statistics.fmean(at100), 6), "sd": round(statistics.stdev(at100), 6),
        "min": min(at100), "max": max(at100), "runs": 2}
    ratios = [r["fragmentationRatio"] for r in runs]
    assert row["fragmentationRatio"]["mean"] == round(statistics.fmean(ratios), 6)
    assert all(0 <= r <= 1 for r in ratios)
    assert row["cluster"] == "openb:openb-mini ×1.3"


def test_replay_sweep_table_and_html_page(tmp_path: Path) -> None:
    report = tmp_path / "sweep.html"
    text = ok(run_sweep("--config", POLICIES[0], "--config", POLICIES[1], *REPLAY, "--seeds", "1-2", "--workers",
                        "1", "--report", report)).stdout
    assert "Sweep: 4 replay(s) of openb:openb-mini ×1.3 on 1 worker(s)" in text
    assert "gpushare-bestfit" in text and "gpushare-randomfit" in text and "100 %" in text
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<script src" not in html
    assert 'data-chart="sweep-allocation"' in html and 'data-chart="sweep-fragmentation"' in html
    # Per policy and chart: its mean line and its min-max band over the seeds.
    assert html.count("gpushare-bestfit: mean over the seeds") == 2
    assert html.count("gpushare-randomfit: min–max over the seeds") == 2


@pytest.mark.parametrize(("args", "fragment"), [
    (["--trace", TRACE, "--nodes", "10"], "not with --cluster or --nodes"),
    (["--nodes", "10", "--inflate", "1.3"], "--inflate applies to a replay"),
    (["--nodes", "10", "--report", "x.html"], "--report draws the curves of a replay"),
    (["--trace", "alibaba:somewhere"], "expected openb:PATH"),
    (["--seeds", "1"], "give --cluster FILE or --nodes N[,N...] (or both), or a workload to replay"),
])
def test_replay_sweep_errors_are_one_line(args: list[str], fragment: str) -> None:
    result = run_sweep(*args)
    assert result.exit_code == 2 and fragment in result.output, (args, result.output)
    assert "Traceback" not in result.output


def _samples(rows: list[tuple[int, int, int, float]]) -> Samples:
    samples = Samples()
    for arrived, used, idle, fragmented in rows:
        samples.add({"t": 0, "arrivedPods": 0, "arrivedGpuMilli": arrived, "pendingPods": 0, "boundPods": 0,
                     "cpuAllocation": 0, "memoryAllocation": 0, "gpuMilliAllocated": used, "gpuMilliCapacity": 1000,
                     "gpuAllocation": 0, "idleGpuMilli": idle, "fragmentedGpuMilli": fragmented,
                     "unplacedGpuMilli": 0})
    return samples


def test_demand_curves_read_every_percent_as_allocation_at_demand_does() -> None:
    samples = _samples([(10, 10, 990, 0.0), (500, 480, 520, 52.0), (505, 490, 510, 102.0), (1000, 900, 100, 50.0),
                        (1300, 950, 50, 50.0)])
    curves = demand_curves(samples)
    alloc = curves["gpuAllocation"]
    assert alloc == {p: allocation_at_demand(samples, p) for p in alloc}
    assert alloc[1] == 1.0 and alloc[50] == 48.5 and alloc[100] == 90.0 and alloc[130] == 95.0
    assert sorted(alloc) == [1, 2, 49, 50, 51, 99, 100, 101, 129, 130]  # a jump: the gaps stay empty
    # Fragmented of idle, in %, averaged over the samples at that demand like the allocation.
    assert curves["fragmentationRatio"][50] == 15.0 and curves["fragmentationRatio"][130] == 100.0
    assert demand_curves(Samples()) == {"gpuAllocation": {}, "fragmentationRatio": {}}


def test_replay_sweep_tie_break_is_simulate_tie_break() -> None:
    """--tie-break reaches every run: the paper's table needs `shuffled` (bench/analysis.md), and a
    sweep run with it is `kubesched simulate --tie-break shuffled` with the same seed."""
    shuffled = sweep_doc("--config", POLICIES[0], *REPLAY, "--seeds", "3", "--workers", "1", "--tie-break",
                         "shuffled")["results"][0]
    alone = run_json("--config", POLICIES[0], *REPLAY, "--seed", "3", "--tie-break", "shuffled")
    assert shuffled["curves"]["gpuAllocation"]["100"] == alone["timeline"]["gpuAllocationAtArrivedDemand"]["100"]
    assert shuffled["scheduled"] == alone["summary"]["scheduled"]
    random_ties = sweep_doc("--config", POLICIES[0], *REPLAY, "--seeds", "3", "--workers", "1")["results"][0]
    assert random_ties["placementDigest"] != shuffled["placementDigest"]
