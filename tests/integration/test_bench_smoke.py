"""Smoke test of the live benchmarks (bench/live.py) at their small size on the real control plane:
every workload once (one round: each contender once), on one control plane of this module's own
whose 50 KWOK nodes are reshaped per workload. It proves the harness works (pods bound, metrics
scraped, process accounting read, ratios computed); it asserts no performance threshold."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesched.testing import controlplane

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import live, podgroups, two_ways  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bench_cluster(control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[controlplane.ControlPlane]:
    # control_plane (conftest) only to get the binaries' checks and skip/fail policy; the benchmark
    # needs a cluster whose nodes and schedulers are its own.
    c = controlplane.ControlPlane(tmp_path_factory.mktemp("bench-cluster"), bin_dir=control_plane.bin_dir,
                              apiserver_args=["--delete-collection-workers=4"])
    c.start(with_kwok=True)
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("workload", [*live.LIVE_WORKLOADS, "Extender"])
def test_live_workload_small(bench_cluster: controlplane.ControlPlane, workload: str, tmp_path: Path) -> None:
    if workload == "Coscheduling" and not live._coscheduling_available():
        pytest.skip("kubesched.plugins.coscheduling is not installed")
    rec = live.run_workload(workload, "small", 1, 5000, 5000, tmp_path, save=False, log=lambda s: None,
                            cluster=bench_cluster)
    wl = live.WORKLOADS[workload]
    size = wl.sizes.get("small", live.SIZES["small"])
    assert [r["contender"] for r in rec["rounds"]] == list(wl.contenders)
    for r in rec["rounds"]:
        assert r["bound"] == size.pods, r
        assert r["throughput"]["average"] > 0
        assert r["attempts_scheduled"] >= size.pods, r  # the metrics endpoint was scraped
        assert r["processes"]["scheduler"]["peak_rss_mib"] > 0
        assert r["processes"]["scheduler"]["cpu_seconds"] > 0
        if "extender" in r["contender"]:
            assert r["processes"]["extender"]["cpu_seconds"] > 0
    for ratio in rec["summary"]["ratios"].values():
        assert ratio["throughput_average"] is not None and ratio["peak_rss"] is not None


def test_two_ways_small_outcomes_agree(control_plane: controlplane.ControlPlane, tmp_path: Path) -> None:
    """bench/two_ways.py at its small size: `kubesched simulate` on the dump and the real kube-scheduler
    on its own control plane + KWOK answer the same capacity question identically (the count bound
    and every node's count, which the question makes deterministic). No timing is asserted."""
    nodes, pods = two_ways.SIZES["small"]
    rec = two_ways.measure(nodes, pods, 1, tmp_path, bin_dir=control_plane.bin_dir, log=lambda s: None)
    (c,) = rec["comparisons"]
    assert 0 < rec["expected"]["bound"] < pods  # some replicas do not fit: the count is an answer
    assert c["bound"] == {"simulator": rec["expected"]["bound"], "kube-scheduler": rec["expected"]["bound"],
                          "expected": rec["expected"]["bound"]}, c
    assert c["per_node_equal_expected"], c
    assert set(rec["kube-scheduler"]["phases_seconds_median"]) == {"control_plane", "nodes", "pods", "schedule",
                                                                   "read"}


@pytest.fixture(scope="module")
def workload_bench_cluster(control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
                           ) -> Iterator[controlplane.ControlPlane]:
    # The podgroup workloads need a kube-apiserver serving the Workload API (bench/podgroups.py).
    c = controlplane.ControlPlane(tmp_path_factory.mktemp("bench-workload-cluster"), bin_dir=control_plane.bin_dir,
                                  apiserver_args=["--delete-collection-workers=4", *podgroups.APISERVER_ARGS])
    c.start(with_kwok=True)
    try:
        yield c
    finally:
        c.stop()


# GangSchedulingLargeGroups runs the same cycle as GangScheduling with bigger groups: not repeated here.
@pytest.mark.parametrize("workload", ["GangScheduling", "BasicScheduling", "TopologyAwareScheduling",
                                      "GangPreemptionBasic"])
def test_podgroup_workload_short(workload_bench_cluster: controlplane.ControlPlane, workload: str,
                                 tmp_path: Path) -> None:
    """scheduler_perf's podgroup workloads at upstream's integration-test size, kube-scheduler and
    kubesched with GenericWorkload on: every member bound by both, the preemptors after evicting."""
    wl = podgroups.live_workloads()[workload]
    rec = live.run_workload(wl, "short", 1, 5000, 5000, tmp_path, save=False, log=lambda s: None,
                            cluster=workload_bench_cluster)
    size = wl.sizes["short"]
    assert [r["contender"] for r in rec["rounds"]] == ["kube-scheduler", "kubesched"]
    for r in rec["rounds"]:
        assert r["bound"] == size.pods, r
        assert r["processes"]["scheduler"]["cpu_seconds"] > 0
        if workload == "GangPreemptionBasic":
            assert r["victims"] == size.init_pods, r  # every node's init pods made room for its member
    ratio = rec["summary"]["ratios"]["kubesched / kube-scheduler"]
    assert ratio["throughput_overall"] is not None
