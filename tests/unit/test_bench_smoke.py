"""Smoke test of the benchmark code that needs no control plane: the simulator benchmark at its
small size, the statistics helpers and the report generator. No performance thresholds here:
numbers live in BENCHMARKS.md (``python -m bench report``)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import common, dra, podgroups, report, simulator  # noqa: E402
from bench.dra import PERF_TEMPLATE  # noqa: E402


def test_simulator_small(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulator.main(["--size", "small", "--rounds", "1", "--no-save"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert len(lines) == 1
    run = lines[0]
    assert run["nodes"] == 500
    assert run["attempts"] == run["pods"] > 0
    # Nearly every generated pod fits at this size (which GPU pod finds its GPUs taken depends on
    # where the others went: upstream's zone-interleaved node order leaves one out).
    assert run["pods"] * 0.99 <= run["bound"] == run["pods"] - run["unschedulable"]
    assert run["pods_per_second"] > 0
    assert 0 < run["latency_p50_ms"] <= run["latency_p99_ms"]


@pytest.mark.parametrize("workload", [w for w in simulator.WORKLOADS if w not in (
                                      "SchedulingBasic", "PreemptionBasic")])
def test_simulator_upstream_workloads_tiny(workload: str, capsys: pytest.CaptureFixture[str]) -> None:
    # scheduler_perf's spreading / pod (anti-)affinity workloads at a tiny size: every measured pod fits
    # (PodAntiAffinity: one per node, 6 init + 12 measured on 30 nodes).
    argv = ["--workload", workload, "--nodes", "30", "--init-pods", "6", "--pods", "12", "--rounds", "1", "--no-save"]
    assert simulator.main(argv) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert len(lines) == 1
    run = lines[0]
    assert run["workload"] == workload
    assert (run["nodes"], run["init_pods"], run["pods"]) == (30, 6, 12)
    assert run["attempts"] == run["bound"] == 12 and run["unschedulable"] == 0
    assert 0 < run["latency_p50_ms"] <= run["latency_p99_ms"]


def test_dra_dump_replays_every_gpu_once(capsys: pytest.CaptureFixture[str]) -> None:
    # 4 nodes x 2 GPUs, 10 pods with a claim from a template each: 8 bound, 2 pending (no GPU left).
    assert dra.main(["--nodes", "4", "--gpus", "2", "--pods", "10", "--no-save"]) == 0
    (run,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert (run["bound"], run["pending"]) == (8, 2)


def test_dra_dump_of_scheduler_perf_shape_leaves_the_init_claims_devices_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # scheduler_perf's SchedulingWithResourceClaimTemplate: 10 devices per node, 5 of them held by
    # allocated init claims, so 4 nodes take 20 of 30 pods.
    assert dra.main(["--upstream", "--nodes", "4", "--pods", "30", "--no-save"]) == 0
    (run,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert (run["bound"], run["pending"]) == (20, 10)


def test_dra_live_workloads_are_scheduler_perf_shaped() -> None:
    workloads = dra.live_workloads()
    template = workloads["SchedulingWithResourceClaimTemplate"]
    assert template.controller_manager and template.sizes["full"].nodes == 500
    assert template.pod(0)["resourceClaims"] == [{"name": "resource", "resourceClaimTemplateName": PERF_TEMPLATE}]
    extended = workloads["ExtendedResource"]
    assert extended.pod(27)["requests"] == {"example.com/gpu-2": "1"}
    assert dra.perf_class("test-class-2", "example.com/gpu-2")["spec"]["extendedResourceName"] == "example.com/gpu-2"


@pytest.mark.parametrize(("workload", "nodes", "pods"), [
    ("GangScheduling", 10, 9), ("BasicScheduling", 10, 9), ("TopologyAwareScheduling", 10, 12),
    ("GangSchedulingLargeGroups", 10, 250)])
def test_simulator_podgroup_workloads_tiny(workload: str, nodes: int, pods: int) -> None:
    # scheduler_perf's podgroup shapes at upstream's integration-test size (10Nodes_3Gangs): every
    # group fits, so every member is bound through the PodGroup cycle.
    run = simulator.run_once(nodes, pods, 1, podgroups.sim_workloads()[workload])
    assert (run["bound"], run["unschedulable"], run["preemptions"]) == (pods, 0, 0)


def test_simulator_podgroup_gangs_wait_for_min_count() -> None:
    # Fewer members than a group's minCount (250): GangScheduling holds every one of them.
    run = simulator.run_once(10, 100, 1, podgroups.sim_workloads()["GangSchedulingLargeGroups"])
    assert (run["bound"], run["unschedulable"]) == (0, 100)


def test_simulator_gang_preemption_basic_tiny() -> None:
    # workload_preemption GangPreemptionBasic: 10 init pods of 40m on each of 10 nodes, one gang of
    # 10 preemptors of 3970m: each member evicts its node's 10 init pods, the gang binds whole.
    run = simulator.run_once(10, 10, 1, podgroups.sim_workloads()["GangPreemptionBasic"], init=100)
    assert (run["bound"], run["unschedulable"], run["victims"]) == (10, 0, 100)


def test_podgroup_live_workloads_are_scheduler_perf_shaped() -> None:
    workloads = podgroups.live_workloads()
    gang = workloads["GangScheduling"]
    assert gang.feature_gates == {"GenericWorkload": True}
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in gang.apiserver_args
    assert gang.pod(5)["schedulingGroup"] == {"podGroupName": "gang-1"}  # gang-pod.yaml: Index / podsPerGroup
    groups = podgroups.SHAPES["GangScheduling"].groups("ns", 9, live=True)
    assert [g["metadata"]["name"] for g in groups] == ["gang-0", "gang-1", "gang-2"]
    assert groups[0]["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}
    basic = podgroups.SHAPES["BasicScheduling"].groups("ns", 3, live=True)[0]
    assert basic["metadata"]["name"] == "basic-group-0" and basic["spec"]["schedulingPolicy"] == {"basic": {}}
    tas = workloads["TopologyAwareScheduling"]
    assert tas.feature_gates["TopologyAwareWorkloadScheduling"] is True
    assert tas.node(250)["labels"] == {"topology.kubernetes.io/zone": "zone-2", "topology.kubernetes.io/rack": "rack-2"}
    assert podgroups.SHAPES["TopologyAwareScheduling"].groups("ns", 4, live=True)[0]["spec"][
        "schedulingConstraints"] == {"topology": [{"key": "topology.kubernetes.io/rack"}]}
    preempt = workloads["GangPreemptionBasic"]
    assert preempt.pod(0)["priorityClassName"] == "bench-gang-preemptor"
    assert podgroups.SHAPES["GangPreemptionBasic"].groups("ns", 10, live=True)[0]["spec"][
        "priorityClassName"] == "bench-gang-preemptor"
    assert preempt.init_pod(0)["requests"]["cpu"] == "40m"


def test_simulator_preemption_basic_tiny() -> None:
    # Every node full of priority-0 pods (4 x 900m of 4 cpu): each measured pod (3970m, priority
    # 9999999) evicts one node's 4 init pods and binds there, in virtual time.
    run = simulator.run_once(6, 4, 1, "PreemptionBasic", init=24)
    assert (run["bound"], run["unschedulable"]) == (4, 0)
    assert (run["preemptions"], run["victims"]) == (4, 16)
    assert run["preemptions_per_second"] > 0


def test_simulator_pod_anti_affinity_filters() -> None:
    # One anti-affinity pod per node: with 10 nodes, 2 init pods and 12 measured, 4 stay pending.
    run = simulator.run_once(10, 12, 1, "PodAntiAffinity", init=2)
    assert run["bound"] == 8 and run["unschedulable"] == 4


def test_simulator_workload_names() -> None:
    assert set(simulator.WORKLOADS) == {"SchedulingBasic", "TopologySpreading", "PreferredTopologySpreading",
                                        "PodAntiAffinity", "PreferredPodAntiAffinity", "PodAffinity",
                                        "PreemptionBasic"}
    assert simulator.ALIASES["SchedulingPodAntiAffinity"] == "PodAntiAffinity"
    assert set(report.UPSTREAM_WORKLOADS) <= set(simulator.WORKLOADS)


def test_throughput_samples_like_scheduler_perf() -> None:
    # 10 pods/s for 3 s, then 30 pods/s for 1 s, then a 0.5 s tail (dropped from the samples)
    times = [i / 10 for i in range(30)] + [3 + i / 30 for i in range(30)] + [4.0, 4.5]
    tp = common.throughput(times)
    assert tp["samples"] == [10, 10, 10, 30]
    assert tp["average"] == 15.0
    assert tp["perc50"] == 10.0 and tp["perc90"] == 30.0 and tp["perc99"] == 30.0
    assert tp["overall"] == round(62 / 4.5, 1)
    assert common.throughput([])["average"] == 0.0
    one = common.throughput([1.0, 1.5])
    assert one["samples"] == [4.0]


def test_histogram_quantile_and_parse() -> None:
    text = "\n".join([
        '# TYPE scheduler_scheduling_attempt_duration_seconds histogram',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="scheduled",le="0.001"} 0',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="scheduled",le="0.002"} 50',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="scheduled",le="0.004"} 100',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="scheduled",le="+Inf"} 100',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="error",le="0.001"} 7',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="error",le="+Inf"} 7',
    ])
    b = common.parse_histogram(text, "scheduler_scheduling_attempt_duration_seconds", {"result": "scheduled"})
    assert b == [(0.001, 0.0), (0.002, 50.0), (0.004, 100.0), (math.inf, 100.0)]
    assert common.histogram_quantile(0.5, b) == pytest.approx(0.002)
    assert common.histogram_quantile(0.75, b) == pytest.approx(0.003)
    assert common.histogram_quantile(0.5, []) is None
    assert common.nearest_rank([1, 2, 3, 4], 50) == 2
    assert common.median([3, None, 1, 2]) == 2


def test_proc_accounting_of_this_process() -> None:
    import os

    assert (common.proc_status_kib(os.getpid(), "VmHWM") or 0) > 0
    assert (common.proc_cpu_seconds(os.getpid()) or 0) > 0


def _live_record(date: str) -> dict:
    def rnd(kind: str, r: int, avg: float, rss: float) -> dict:
        return {
            "contender": kind, "round": r, "bound": 10, "pods": 10,
            "throughput": {"samples": [avg, avg], "average": avg, "perc50": avg, "perc90": avg, "perc99": avg,
                           "overall": avg},
            "attempt_p50_ms": 1.0, "attempt_p99_ms": 2.0,
            "processes": {"scheduler": {"peak_rss_mib": rss, "cpu_seconds": 1.0, "cpu_seconds_window": 0.5}},
            "loadavg_after": [1.0, 1.0, 1.0],
        }

    from bench import live

    rounds = [rnd("kube-scheduler", 0, 100, 200), rnd("kubesched", 0, 120, 150),
              rnd("kubesched", 1, 110, 150), rnd("kube-scheduler", 1, 100, 200)]
    return {
        "benchmark": "live", "workload": "SchedulingBasic", "description": "d", "note": "", "size": "small",
        "nodes": 5, "init_pods": 1, "pods": 10, "qps": 5000, "burst": 5000, "date": date, "command": "c",
        "machine": {"cpus": 2}, "versions": {"k8s": "v1.37.1"}, "contenders": ["kube-scheduler", "kubesched"],
        "rounds": rounds, "summary": live.summarize(rounds, ("kube-scheduler", "kubesched")),
    }


def test_summary_ratios_and_report(tmp_path: Path) -> None:
    rec = _live_record("2026-01-01T00:00:00+00:00")
    ratio = rec["summary"]["ratios"]["kubesched / kube-scheduler"]
    assert ratio["throughput_average"] == pytest.approx(1.15)  # median of 1.2 and 1.1, paired by round
    assert ratio["peak_rss"] == pytest.approx(0.75)
    sim = {"benchmark": "simulator", "size": "small", "nodes": 500, "pods": 1000, "date": "2026-01-01",
           "pods_per_second_median": 1234.0, "latency_p50_ms_median": 0.2, "latency_p99_ms_median": 1.0,
           "runs": [{"loadavg": [1.0]}], "command": "python -m bench simulator"}
    text, chart_rec = report.build([rec, sim])
    assert "| `kubesched` |" in text and "×1.15" in text
    assert "| SchedulingBasic | 500 | 0 | 1,000 | 1,234.0 |" in text
    assert chart_rec is rec
    svg = report.chart_svg(rec)
    assert svg.startswith("<svg") and svg.count("<polyline") == 4


def test_gpu_replay_table_means_seeds_and_checks_tolerance_and_ranking() -> None:
    from bench import gpu_replay

    def run(policy: str, seed: int, a100: float, a130: float, tie_break: str = "shuffled") -> dict[str, object]:
        return {"policy": policy, "seed": seed, "inflate": 1.3, "nodes": 1213, "tieBreak": tie_break,
                "allocationAt100": a100, "allocationAt130": a130, "cpuSeconds": 40.0, "commit": "abc"}

    runs = [run("FGD", 42, 95.0, 95.2), run("FGD", 43, 95.4, 95.6), run("BestFit", 42, 92.0, 92.1),
            run("BestFit", 42, 50.0, 50.0, tie_break="random")]  # another tie-break: not in this table
    lines = "\n".join(gpu_replay.report_section(runs))
    assert "| FGD | 42,43 | 95.20 | 95.40 | 95.23 (95.06-95.38) | 95.39 | -0.03 | +0.01 | yes |" in lines
    assert "| BestFit | 42 | 92.00 | 92.10 | 92.86 (92.64-93.04) | 93.08 | -0.86 | -0.98 | **no** |" in lines
    assert "| RandomFit | – |" in lines
    assert "FGD > BestFit — the same as the reference's" in lines


def test_report_keeps_hand_written_sections_and_replaces_generated_ones() -> None:
    from bench import report_merge

    existing = "\n".join([
        "# Benchmarks", "old intro", "## Live", "old live table", "### A hand-written run", "kept 1",
        "```sh", "# a shell comment, not a heading", "```", "## Simulator", "old simulator",
        "## Hand-written at the end", "kept 2",
    ])
    generated = "\n".join(["# Benchmarks", "new intro", "## Live", "new live table", "## Simulator", "new simulator"])
    merged = report_merge.merge(existing, generated)
    assert "old" not in merged
    assert merged.splitlines() == [
        "# Benchmarks", "new intro", "## Live", "new live table", "### A hand-written run", "kept 1",
        "```sh", "# a shell comment, not a heading", "```", "## Simulator", "new simulator",
        "## Hand-written at the end", "kept 2",
    ]


def test_gpu_replay_records_a_sweep_of_the_policy_files_run_by_run() -> None:
    from bench import gpu_replay

    trace = str(gpu_replay.common.ROOT / "examples" / "openb-mini")
    replay = {"scenario": None, "trace": f"openb:{trace}", "arrivals": "sequential", "inflate": 1.3,
              "gpu_nodes_only": True}
    result = {"config": "examples/gpushare-bestfit.yaml", "seed": 7, "replay": replay, "tie_break": "shuffled",
              "arrived": 86, "gpuAllocation": 0.98, "fragmentedGpuMilli": 720.0, "placementDigest": "d",
              "wallSeconds": 1.5, "curves": {"gpuAllocation": {"100": 90.61, "130": 98.86}}}
    (run,) = gpu_replay.runs_from_sweep({"results": [result]})
    assert run["policy"] == "BestFit" and run["seed"] == 7 and run["tieBreak"] == "shuffled"
    assert (run["allocationAt100"], run["allocationAt130"]) == (90.61, 98.86)
    assert run["nodes"] == 12 and run["from"] == "sweep"  # the replay's GPU nodes (12 of 13), from the trace
    lines = "\n".join(gpu_replay.report_section([{**run, "nodes": 1213, "commit": "abc"}]))
    assert "| BestFit | 7 | 90.61 | 98.86 |" in lines
    assert "CPU seconds per run not measured; 1 of them from `kubesched sweep --trace`" in lines


def test_live_memory_feeds_the_live_informers_and_schedules_the_backlog() -> None:
    from bench import live_memory

    run = live_memory.worker("PodAntiAffinity", 6, 2, 3, breakdown=True)
    assert run["scheduled"] == 3
    assert [p["phase"] for p in run["phases"]] == ["start", "nodes", "init pods", "pending", "bound"]
    held = [p["held"] for p in run["phases"]]
    assert held[1]["informer store: nodes"] > held[0]["informer store: nodes"]
    assert held[2]["informer store: pods"] > held[1]["informer store: pods"]
    assert held[3]["queue"] > held[2]["queue"] and held[4]["queue"] < held[3]["queue"]
    summary = live_memory.summarize(run)
    assert summary["per_node_kib"] is not None and summary["per_bound_pod_kib"] is not None
