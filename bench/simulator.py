"""In-process scheduling throughput: N pending pods onto M nodes with the default profile.

Workloads (``--workload``, default SchedulingBasic; ``all`` runs each):

* SchedulingBasic: ``kubesched simulate``'s generated cluster (mixed node sizes, taints,
  affinities, priorities; no pod topology), every pod placed: the historical figure.
* scheduler_perf's TopologySpreading, PreferredTopologySpreading, PodAntiAffinity (upstream
  SchedulingPodAntiAffinity), PreferredPodAntiAffinity (SchedulingPreferredPodAntiAffinity) and
  PodAffinity (SchedulingPodAffinity), built as upstream's templates do (bench/templates.py):
  node-default nodes (4 cpu, 32Gi, 110 pods, kubernetes.io/hostname, the workload's zone label
  round-robin), init pods already bound round-robin (namespace sched-0, the workload's init
  template), then the measured pods (sched-1), pending. Only the measured pods are timed.

Measures only the scheduling loop (cluster loading excluded): pods/s, and per-pod latency of the
scheduling cycle (pop → assume → reserve → permit) at p50/p99. The binding cycle runs in the same
loop against the in-memory cluster, so its cost is in pods/s but not in the per-pod latency.
Appends one record per (nodes, pods) configuration to bench/results/<date>.json (``--size small``:
500 nodes / 1,000 pods; ``full``: that plus 5,000 nodes / 10,000 pods).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import datetime as dt
import gc
import json
import multiprocessing
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench import common, templates
from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node as node_builder
from kubesched.testing import pod_manifest


@dataclass(frozen=True)
class SimWorkload:
    name: str
    description: str
    #: node index -> {"labels": {...}} on top of node-default
    node: Callable[[int], dict[str, Any]] = templates.node_default
    #: init pod index -> extra labels/spec (pod-default when templates.pod_default)
    init_pod: Callable[[int], dict[str, Any]] = templates.pod_default
    #: measured pod index -> extra labels/spec
    pod: Callable[[int], dict[str, Any]] = templates.pod_default
    #: size -> [(nodes, init pods, measured pods)]
    sizes: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    upstream: str = ""
    #: (measured pods' namespace, measured pods) -> the other objects the cluster holds (e.g. the
    #: Workload API's PodGroups, bench/podgroups.py); any makes the run a whole Simulation.run
    objects: Callable[[str, int], list[dict[str, Any]]] | None = None
    #: the configuration's featureGates (e.g. GenericWorkload)
    feature_gates: dict[str, bool] = field(default_factory=dict)


_NS = templates.UPSTREAM_NAMESPACES
WORKLOADS: dict[str, SimWorkload] = {
    "SchedulingBasic": SimWorkload(
        "SchedulingBasic",
        "kubesched simulate's generated cluster (mixed nodes, taints, node affinities, priorities; no pod "
        "topology), every pod placed",
        sizes={"small": [(500, 0, 1000)], "full": [(500, 0, 1000), (5000, 0, 10000)],
               # issue 18's scale curve: 2 pods per node, each size in a fresh process (peak RSS per size)
               "curve": [(500, 0, 1000), (5000, 0, 10000), (20000, 0, 40000), (50000, 0, 100000)]},
    ),
    "TopologySpreading": SimWorkload(
        "TopologySpreading",
        "node-default nodes in zones moon-1/2/3 (round-robin), pod-default init pods, measured pods "
        "pod-with-topology-spreading (maxSkew 5 per zone, DoNotSchedule)",
        node=templates.moon_zones, pod=templates.spread_pod("DoNotSchedule"),
        sizes={"small": [(500, 1000, 1000)], "full": [(5000, 5000, 10000)]},
        upstream="TopologySpreading",
    ),
    "PreferredTopologySpreading": SimWorkload(
        "PreferredTopologySpreading",
        "as TopologySpreading with whenUnsatisfiable ScheduleAnyway (pod-with-preferred-topology-spreading)",
        node=templates.moon_zones, pod=templates.spread_pod("ScheduleAnyway"),
        sizes={"small": [(500, 1000, 1000)], "full": [(5000, 5000, 10000)]},
        upstream="PreferredTopologySpreading",
    ),
    "PodAntiAffinity": SimWorkload(
        "PodAntiAffinity",
        "node-default nodes, init and measured pods pod-with-pod-anti-affinity (required anti-affinity per "
        "hostname: one per node); 2,000 measured pods at 5,000 nodes as upstream's 5000Nodes_2000Pods "
        "(10,000 cannot fit: one such pod per node)",
        init_pod=templates.anti_affinity_pod(_NS), pod=templates.anti_affinity_pod(_NS),
        sizes={"small": [(500, 100, 400)], "full": [(5000, 1000, 2000)]},
        upstream="SchedulingPodAntiAffinity",
    ),
    "PreferredPodAntiAffinity": SimWorkload(
        "PreferredPodAntiAffinity",
        "node-default nodes, init and measured pods pod-with-preferred-pod-anti-affinity (preferred "
        "anti-affinity per hostname, weight 1)",
        init_pod=templates.preferred_anti_affinity_pod(_NS), pod=templates.preferred_anti_affinity_pod(_NS),
        sizes={"small": [(500, 500, 1000)], "full": [(5000, 5000, 10000)]},
        upstream="SchedulingPreferredPodAntiAffinity",
    ),
    "PodAffinity": SimWorkload(
        "PodAffinity",
        "node-default nodes all in zone1, init and measured pods pod-with-pod-affinity (required affinity "
        "to color=blue per zone)",
        node=templates.zone1, init_pod=templates.pod_affinity_pod(_NS), pod=templates.pod_affinity_pod(_NS),
        sizes={"small": [(500, 500, 1000)], "full": [(5000, 5000, 10000)]},
        upstream="SchedulingPodAffinity",
    ),
    "PreemptionBasic": SimWorkload(
        "PreemptionBasic",
        "default_preemption PreemptionBasic: 4 pod-low-priority init pods (900m cpu) bound on every node-default "
        "node, measured pods pod-high-priority (3970m cpu, priority 9999999): each preempts one node's 4 init "
        "pods. Timed as `kubesched simulate` runs it (Simulation.run: victims deleted in virtual time, the "
        "preemptor retried), cluster loading included; per-pod latencies are not split out",
        init_pod=templates.low_priority_pod, pod=templates.high_priority_pod(by_class=False),
        sizes={"small": [(500, 2000, 500)], "full": [(500, 2000, 500), (5000, 20000, 5000)]},
        upstream="PreemptionBasic",
    ),
}
ALIASES = {w.upstream: k for k, w in WORKLOADS.items() if w.upstream and w.upstream != k}
_RES = {"cpu": "100m", "memory": "500Mi"}
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def template_pod(name: str, ns: str, seq: int, extra: dict[str, Any], node: str | None = None) -> dict[str, Any]:
    """pod-default (+ the template's labels/spec) as the apiserver would return it: uid and a
    creationTimestamp one second after the previous pod's."""
    extra = dict(extra)
    labels = extra.pop("labels", {})
    res = extra.pop("requests", None) or _RES
    raw = pod_manifest(name, ns, requests=res, limits=res, labels=labels, node_name=node,
                       container_name="pause", ports=(80,), extra_spec=extra)
    raw["metadata"]["uid"] = f"{ns}-{name}"
    raw["metadata"]["creationTimestamp"] = (_EPOCH + dt.timedelta(seconds=seq)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return raw


def build_objects(wl: SimWorkload, nodes: int, init: int, pods: int, seed: int
                  ) -> tuple[list[dict[str, Any]], list[PodInfo], list[PodInfo]]:
    """(raw nodes, bound init pods, pending measured pods) of ``wl``."""
    if wl.name == "SchedulingBasic":
        generated = generate_cluster(nodes, pods, seed)
        pending = []
        for raw in generated.pods:
            pod = PodInfo.from_raw(raw)
            if pod.terminal:
                continue
            # Every pod is scheduled here (the generator pre-binds some; this benchmark places them all).
            pending.append(pod.with_node("") if pod.node_name else pod)
        return list(generated.nodes), [], pending
    names = [f"node-{i:05d}" for i in range(nodes)]
    raw_nodes = [node_builder(n, cpu="4", memory="32Gi", pods=110, labels=wl.node(i).get("labels"),
                              ephemeral_storage=None) for i, n in enumerate(names)]
    bound = [PodInfo.from_raw(template_pod(f"init-{i:05d}", "sched-0", i, wl.init_pod(i), names[i % nodes]))
             for i in range(init)]
    pending = [PodInfo.from_raw(template_pod(f"pod-{i:05d}", "sched-1", init + i, wl.pod(i)))
               for i in range(pods)]
    return raw_nodes, bound, pending


def run_simulation(wl: SimWorkload, nodes: int, pods: int, seed: int, init: int) -> dict[str, Any]:
    """The whole simulation as ``kubesched simulate`` runs it (for workloads that need virtual
    time: preemption victims are deleted after their grace period and the preemptor retried)."""
    raw_nodes, bound, pending = build_objects(wl, nodes, init, pods, seed)
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    for raw in wl.objects("sched-1", pods) if wl.objects else ():  # build_objects' measured pods' namespace
        kind = f"{raw['kind']}.{raw['apiVersion'].partition('/')[0]}"
        objects.setdefault(kind, {})[f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"] = raw
    cluster_input = ClusterInput(nodes=raw_nodes, pods=[p.raw for p in (*bound, *pending)], objects=objects,
                                 skipped={}, source=f"bench {wl.name}")
    registry = builtin_registry()
    config = load_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                          "featureGates": wl.feature_gates} if wl.feature_gates else None, registry)
    sim = Simulation(config, registry, cluster_input, seed=seed)
    gc.collect()
    start, cpu_start = time.perf_counter(), time.process_time()
    result = asyncio.run(sim.run())
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start  # the figure that holds on a shared, loaded machine
    measured = {p.uid for p in pending}
    placed = result.cluster.pods
    bound_measured = sum(1 for uid in measured if uid in placed and placed[uid].node_name)
    return {
        "workload": wl.name,
        "nodes": nodes,
        "init_pods": len(bound),
        "pods": len(pending),
        "bound": bound_measured,
        "unschedulable": len(pending) - bound_measured,
        "preemptions": len(result.preemptions),
        "victims": sim.cluster.evicted,
        "virtual_seconds": round(result.virtual_seconds, 1),
        "seconds": round(elapsed, 4),
        "cpu_seconds": round(cpu, 2),
        "pods_per_second": round(bound_measured / elapsed, 1),
        "preemptions_per_second": round(len(result.preemptions) / elapsed, 1),
        "pods_per_cpu_second": round(bound_measured / cpu, 1) if cpu > 0 else None,
        "latency_p50_ms": None,
        "latency_p99_ms": None,
    }


def run_once(nodes: int, pods: int, seed: int, workload: str | SimWorkload = "SchedulingBasic", init: int = 0
             ) -> dict[str, Any]:
    wl = workload if isinstance(workload, SimWorkload) else WORKLOADS[workload]
    workload = wl.name
    if wl.name == "PreemptionBasic" or wl.objects is not None:
        return run_simulation(wl, nodes, pods, seed, init)
    registry = builtin_registry()
    config = load_config(None, registry)
    raw_nodes, bound, pending = build_objects(wl, nodes, init, pods, seed)
    cluster = SimulatedCluster()
    # As `kubesched simulate` builds it (simulate/engine/runner.py): in-memory binds, stepped eagerly.
    sched = Scheduler.build(config.profiles, registry, FakeClock(), client=cluster, seed=seed, eager_binding=True)
    cluster.attach(sched)
    for n in raw_nodes:
        cluster.add_node(n)
    for pod in bound:
        cluster.add_pod(pod)
    for pod in pending:
        cluster.add_pod(pod)
    gc.collect()
    gc.freeze()  # the loaded cluster is long-lived: keep the cyclic GC off it, as the shells do
    latencies = np.zeros(len(pending))

    async def loop() -> int:
        n = 0
        while True:
            t0 = time.perf_counter()
            if not sched.schedule_one():
                break
            latencies[n] = time.perf_counter() - t0
            n += 1
            if n % 256 == 0:
                await asyncio.sleep(0)
        await sched.drain()
        return n

    start, cpu_start = time.perf_counter(), time.process_time()
    attempts = asyncio.run(loop())
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start  # the figure that holds on a shared, loaded machine
    gc.unfreeze()
    lat = latencies[:attempts]
    return {
        "workload": workload,
        "nodes": nodes,
        "init_pods": len(bound),
        "pods": len(pending),
        "attempts": attempts,
        "bound": cluster.binds,
        "unschedulable": len(pending) - cluster.binds,
        "seconds": round(elapsed, 4),
        "cpu_seconds": round(cpu, 2),
        "pods_per_second": round(attempts / elapsed, 1),
        "pods_per_cpu_second": round(attempts / cpu, 1) if cpu > 0 else None,
        "latency_p50_ms": round(float(np.percentile(lat, 50)) * 1000, 4),
        "latency_p99_ms": round(float(np.percentile(lat, 99)) * 1000, 4),
    }


def run_isolated(nodes: int, pods: int, seed: int, workload: str, init: int) -> dict[str, Any]:
    """run_once in a fresh process (spawned: nothing inherited), with that process's peak RSS:
    the scale curve's memory column is each size's own, not the largest size run so far."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(_run_and_measure_rss, nodes, pods, seed, workload, init).result()


def _run_and_measure_rss(nodes: int, pods: int, seed: int, workload: str, init: int) -> dict[str, Any]:
    result = run_once(nodes, pods, seed, workload, init)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _median(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


#: (nodes, pods) per size of SchedulingBasic (the other workloads: SimWorkload.sizes).
SIZES = {k: [(n, p) for n, _, p in v] for k, v in WORKLOADS["SchedulingBasic"].sizes.items()}


def main(argv: list[str], workloads: dict[str, SimWorkload] | None = None, prog: str = "python -m bench simulator"
         ) -> int:
    """``workloads``: another set than WORKLOADS (bench/podgroups.py's), its first the default."""
    known = workloads or WORKLOADS
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--workload", default=next(iter(known)),
                    help=f"one of {', '.join(known)} (or upstream's name), or all")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--nodes", type=int, default=None, help="override --size: one configuration")
    ap.add_argument("--pods", type=int, default=None)
    ap.add_argument("--init-pods", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    if args.workload == "all":
        names = list(known)
    else:
        name = ALIASES.get(args.workload, args.workload)
        if name not in known:
            ap.error(f"--workload: unknown {args.workload!r}; one of {', '.join(known)}, all")
        names = [name]
    for name in names:
        wl = known[name]
        configs = wl.sizes.get(args.size)
        if not configs:
            print(f"simulator {name}: no --size {args.size} configuration, skipped")
            continue
        custom = bool(args.nodes or args.pods or args.init_pods is not None)
        if custom:
            n0, i0, p0 = configs[-1]
            configs = [(args.nodes or n0, i0 if args.init_pods is None else args.init_pods, args.pods or p0)]
        for nodes, init, pods in configs:
            runs = []
            for i in range(args.rounds):
                r = (run_isolated(nodes, pods, args.seed + i, name, init) if args.size == "curve"
                     else run_once(nodes, pods, args.seed + i, wl, init))
                r["loadavg"] = common.loadavg()
                runs.append(r)
                print(json.dumps(r))
            summary = {
                "benchmark": "simulator",
                "workload": name,
                "upstream": wl.upstream or name,
                "description": wl.description,
                "size": args.size if not custom else "custom",
                "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "commit": common.git_commit(),
                "command": common.command_line(),
                "machine": common.machine(),
                "versions": common.versions(),
                "profile": "default (load_config(None): PodTopologySpread and InterPodAffinity included)",
                "nodes": nodes,
                "init_pods": init,
                "pods": runs[0]["pods"],
                "pods_per_second_median": statistics.median(r["pods_per_second"] for r in runs),
                "pods_per_cpu_second_median": _median(r.get("pods_per_cpu_second") for r in runs),
                "latency_p50_ms_median": _median(r["latency_p50_ms"] for r in runs),
                "latency_p99_ms_median": _median(r["latency_p99_ms"] for r in runs),
                "peak_rss_mib_max": max((r["peak_rss_mib"] for r in runs if "peak_rss_mib" in r), default=None),
                **({"preemptions_per_second_median": _median(r["preemptions_per_second"] for r in runs)}
                   if "preemptions_per_second" in runs[0] else {}),
                "runs": runs,
            }
            msg = (f"simulator {name} {nodes} nodes / {init} init / {summary['pods']} pods: median "
                   f"{summary['pods_per_second_median']} pods/s ({summary['pods_per_cpu_second_median']} per CPU "
                   f"second), p50 {summary['latency_p50_ms_median']} ms, "
                   f"p99 {summary['latency_p99_ms_median']} ms, load {common.loadavg()}")
            if not args.no_save:
                msg += f" -> {common.save_result(summary)}"
            print(msg)
    return 0
