"""scheduler_perf's podgroup workloads (k8s.io/kubernetes v1.37.1, test/integration/scheduler_perf:
podgroup/gangscheduling, podgroup/basicscheduling, podgroup/tas and workload_preemption), with the
``GenericWorkload`` gate on (and ``TopologyAwareWorkloadScheduling`` for tas), live beside the real
kube-scheduler and in the simulator.

``python -m bench podgroups live --workload W [--size small|full] [--rounds N]`` runs one of them side
by side with kube-scheduler on one control plane whose kube-apiserver serves the Workload API
(``--feature-gates`` with both gates, ``--runtime-config=scheduling.k8s.io/v1beta1=true``), with
bench/live.py's method (pods created before the scheduler starts, binds timed from a watch, peak
RSS and CPU per process; records in bench/results/<date>.json). kube-scheduler runs its default
profile with ``--feature-gates``, kubesched its default profile with the same ``featureGates``.

``python -m bench podgroups simulator --workload W|all [--size small|full]`` times the same shapes in
process (bench/simulator.py's run_simulation: Simulation.run as ``kubesched simulate`` runs it, the
PodGroups among the cluster's objects; cluster loading included); ``full`` is 5,000 nodes (100 for
GangPreemptionBasic: upstream's own size).

Shapes (upstream's templates, bench/templates.py; sizes scaled to the harness, as its other
workloads are):

* GangScheduling: PodGroups ``gang-<g>`` (gang, minCount = members), 3 members each (gang-pod.yaml:
  100m / 100Mi), no init pods. GangSchedulingLargeGroups: the ``..._1000PerGroup`` cases' shape
  (1,000 members a group at full size, 250 at small).
* BasicScheduling: the same with the ``basic`` policy (no gang).
* TopologyAwareScheduling: 4 members a gang, nodes labelled zone/rack ``<i / 100>`` (node.yaml),
  each PodGroup asks for one ``topology.kubernetes.io/rack``.
* GangPreemptionBasic: 10 pod-low-priority init pods (40m, priority 0) on every node, gangs of 10
  preemptors (3970m, priority 8888888 via a PriorityClass): each member evicts one node's init pods.

Differences from upstream, by necessity of the harness: the pods carry pod-default's port 80 and
requests = limits; init pods are bound round-robin by ``spec.nodeName`` (upstream spreads them with
hostPorts); kube-scheduler and kubesched each drain a backlog created before they start (upstream
creates the pods while its scheduler runs).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import templates
from bench.templates import GANG_PREEMPTOR_CLASS, GANG_PREEMPTOR_PRIORITY, RACK

if TYPE_CHECKING:
    from bench.live import Size, Workload
    from bench.simulator import SimWorkload
    from kubesched.testing.controlplane import ControlPlane

GENERIC = {"GenericWorkload": True}
TAS = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
#: kube-apiserver: the Workload API served, and the alpha gate so a PodGroup keeps its
#: schedulingConstraints (every workload runs on a control plane started with both).
APISERVER_ARGS = ("--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
                  "--runtime-config=scheduling.k8s.io/v1beta1=true")
PG_PATH = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"


class Shape:
    """One workload's groups: name prefix, members a group, policy, rack constraint, priority."""

    def __init__(self, prefix: str, per_group: int, gang: bool = True, rack: bool = False,
                 preemptor: bool = False) -> None:
        self.prefix, self.per_group, self.gang, self.rack, self.preemptor = prefix, per_group, gang, rack, preemptor

    def groups(self, ns: str, pods: int, *, live: bool) -> list[dict[str, Any]]:
        """The PodGroups of ``pods`` members (a class name live, spec.priority in the simulator)."""
        priority: str | int | None = None
        if self.preemptor:
            priority = GANG_PREEMPTOR_CLASS if live else GANG_PREEMPTOR_PRIORITY
        out = []
        for g in range(-(-pods // self.per_group)):
            pg = templates.pod_group(f"{self.prefix}-{g}", ns, self.per_group if self.gang else None,
                                     RACK if self.rack else None, priority)
            if live:
                del pg["metadata"]["uid"]
            out.append(pg)
        return out

    def pod(self, *, live: bool) -> templates.Template:
        priority = templates.gang_preemptor_priority(by_class=live) if self.preemptor else None
        return templates.group_member_pod(self.prefix, self.per_group, "3970m" if self.preemptor else "100m",
                                          priority)


SHAPES = {
    "GangScheduling": Shape("gang", 3),
    "GangSchedulingLargeGroups": Shape("gang", 250),
    "BasicScheduling": Shape("basic-group", 3, gang=False),
    "TopologyAwareScheduling": Shape("gang", 4, rack=True),
    "GangPreemptionBasic": Shape("gang", 10, preemptor=True),
}
GATES = {name: TAS if shape.rack else GENERIC for name, shape in SHAPES.items()}


# -- live ---------------------------------------------------------------------------------------------
def _groups_setup(shape: Shape) -> Any:
    def setup(c: ControlPlane, ns: str, size: Size) -> None:
        from bench.live import Bulk

        Bulk(c).post_all(lambda b: PG_PATH.format(ns=ns), shape.groups(ns, size.pods, live=True))
    return setup


def _preemptor_class(c: ControlPlane) -> None:
    from kubesched.testing import controlplane

    with contextlib.suppress(controlplane.ApiError):  # left by an earlier round on the same cluster
        c.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": GANG_PREEMPTOR_CLASS}, "value": GANG_PREEMPTOR_PRIORITY})


def live_workloads() -> dict[str, Workload]:
    from bench.live import Size, Workload

    def wl(name: str, description: str, sizes: dict[str, Size], **kw: Any) -> Workload:
        shape = SHAPES[name]
        return Workload(name, description, pod=shape.pod(live=True), ns_setup=_groups_setup(shape), sizes=sizes,
                        feature_gates=GATES[name], apiserver_args=APISERVER_ARGS, **kw)

    return {
        "GangScheduling": wl(
            "GangScheduling",
            "scheduler_perf podgroup GangScheduling (GenericWorkload on): PodGroups of 3 members, gang minCount 3, "
            "gang-pod.yaml pods (100m, 100Mi), no init pods, default profiles",
            {"short": Size(nodes=10, init_pods=0, pods=9, timeout=120),
             "small": Size(nodes=50, init_pods=0, pods=480, timeout=240),
             "full": Size(nodes=1000, init_pods=0, pods=3000, timeout=900)}),
        "GangSchedulingLargeGroups": wl(
            "GangSchedulingLargeGroups",
            "scheduler_perf podgroup GangScheduling's _1000PerGroup shape (GenericWorkload on): PodGroups of 250 "
            "members (upstream: 1,000), gang minCount = members, gang-pod.yaml pods, default profiles",
            {"short": Size(nodes=10, init_pods=0, pods=250, timeout=120),
             "small": Size(nodes=50, init_pods=0, pods=500, timeout=240),
             "full": Size(nodes=1000, init_pods=0, pods=3000, timeout=900)}),
        "BasicScheduling": wl(
            "BasicScheduling",
            "scheduler_perf podgroup BasicScheduling (GenericWorkload on): PodGroups of 3 members, policy basic, "
            "basic-pod.yaml pods (100m, 100Mi), no init pods, default profiles",
            {"short": Size(nodes=10, init_pods=0, pods=9, timeout=120),
             "small": Size(nodes=50, init_pods=0, pods=480, timeout=240),
             "full": Size(nodes=1000, init_pods=0, pods=3000, timeout=900)}),
        "TopologyAwareScheduling": wl(
            "TopologyAwareScheduling",
            "scheduler_perf podgroup tas TopologyAwareScheduling (GenericWorkload, TopologyAwareWorkloadScheduling "
            "on): nodes in zone/rack <i / 100>, PodGroups of 4 members, gang minCount 4, each within one "
            "topology.kubernetes.io/rack, default profiles",
            {"short": Size(nodes=10, init_pods=0, pods=12, timeout=120),
             "small": Size(nodes=200, init_pods=0, pods=480, timeout=240),
             "full": Size(nodes=1000, init_pods=0, pods=3000, timeout=900)},
            node=templates.rack_node),
        "GangPreemptionBasic": wl(
            "GangPreemptionBasic",
            "scheduler_perf workload_preemption GangPreemptionBasic (GenericWorkload on): 10 pod-low-priority init "
            "pods (40m) on every node, gangs of 10 preemptors (3970m, priority 8888888 via a PriorityClass, the "
            "PodGroup's too): each member evicts one node's 10 init pods, the gang all or nothing",
            {"short": Size(nodes=10, init_pods=100, pods=10, timeout=120),
             "small": Size(nodes=50, init_pods=500, pods=50, timeout=240),
             "full": Size(nodes=100, init_pods=1000, pods=100, timeout=600)},
            init_pod=templates.gang_low_priority_pod, cluster_setup=_preemptor_class),
    }


def live_main(argv: list[str]) -> int:
    from bench import live

    workloads = live_workloads()
    ap = argparse.ArgumentParser(prog="python -m bench podgroups live")
    ap.add_argument("--workload", choices=[*workloads, "all"], default="GangScheduling")
    ap.add_argument("--size", choices=("short", "small", "full"), default="small",
                    help="short: upstream's integration-test case (the CI smoke), small: this machine's, full: "
                         "1,000 nodes (100 for GangPreemptionBasic, upstream's size)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--qps", type=float, default=5000)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    names = list(workloads) if args.workload == "all" else [args.workload]
    for name in names:
        live.run_workload(workloads[name], args.size, args.rounds, args.qps, args.burst,
                          args.workdir / name if args.workdir else None, save=not args.no_save)
    return 0


# -- simulator ----------------------------------------------------------------------------------------
def sim_workloads() -> dict[str, SimWorkload]:
    from bench.simulator import SimWorkload

    def wl(name: str, description: str, sizes: dict[str, list[tuple[int, int, int]]], **kw: Any) -> SimWorkload:
        shape = SHAPES[name]
        return SimWorkload(name, description, pod=shape.pod(live=False), sizes=sizes, upstream=name,
                           objects=lambda ns, pods: shape.groups(ns, pods, live=False), feature_gates=GATES[name],
                           **kw)

    return {
        "GangScheduling": wl("GangScheduling", "PodGroups of 3, gang minCount 3, gang-pod.yaml pods",
                             {"small": [(500, 0, 1200)], "full": [(5000, 0, 3000)]}),
        "GangSchedulingLargeGroups": wl("GangSchedulingLargeGroups",
                                        "PodGroups of 250 (upstream 1,000), gang minCount = members",
                                        {"small": [(500, 0, 1000)], "full": [(5000, 0, 3000)]}),
        "BasicScheduling": wl("BasicScheduling", "PodGroups of 3, policy basic, basic-pod.yaml pods",
                              {"small": [(500, 0, 1200)], "full": [(5000, 0, 3000)]}),
        "TopologyAwareScheduling": wl("TopologyAwareScheduling",
                                      "nodes in zone/rack <i / 100>, PodGroups of 4 within one rack",
                                      {"small": [(500, 0, 1200)], "full": [(5000, 0, 3000)]},
                                      node=templates.rack_node),
        "GangPreemptionBasic": wl("GangPreemptionBasic",
                                  "10 pod-low-priority init pods (40m) a node, gangs of 10 preemptors (3970m, "
                                  "priority 8888888)",
                                  # upstream's performance case is 100 nodes (100Nodes_10PreemptorGangs_...)
                                  {"small": [(50, 500, 50)], "full": [(100, 1000, 100)]},
                                  init_pod=templates.gang_low_priority_pod),
    }


def simulator_main(argv: list[str]) -> int:
    from bench import simulator

    return simulator.main(argv, sim_workloads(), prog="python -m bench podgroups simulator")


def main(argv: list[str]) -> int:
    if argv[:1] == ["live"]:
        return live_main(argv[1:])
    if argv[:1] == ["simulator"]:
        return simulator_main(argv[1:])
    print("usage: python -m bench podgroups live|simulator --workload NAME [--size small|full] ...\n\n" + __doc__)
    return 2
