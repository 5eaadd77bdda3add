"""UnderlayIP's cost in the simulator, beside the default profile (issue 30 "Performance").

``python -m bench.underlay [--nodes 500] [--pods 3000] [--rounds 3] [--profile]``

The generated cluster (``kubesched simulate --nodes N --pods P``'s, every pod pending) scheduled
three ways, as ``kubesched simulate`` runs it (``Simulation``, binds included):

* default — the default profile;
* ip — examples/ip-scheduler.yaml (UnderlayIP, 10 IPs per node);
* ip+pools — the same with UnderlayIPPools: 10 pools of N/10 nodes each (BlueKing v3 style),
  addresses enough for every pod, each pod's address chosen at Reserve and put on its Binding.

Every pod gets the profile's schedulerName, so UnderlayIP counts it (the example has no
podSelector: a pod needs an IP when it names the profile). The figure is pods per CPU second (the
machine is shared: wall time varies with the neighbours' load); wall pods/s is printed beside it.
``--profile`` runs each configuration once under cProfile and prints the top functions by own time.
``--before SRC`` measures a change: each round runs every configuration once with SRC (a copy of
``src/`` before the change) and once with this tree's ``src/``, each in a fresh process,
interleaved so both see the same neighbours; the best round (least CPU: the least disturbed) and
the median are recorded, with every round's figure and each configuration ÷ default paired round by
round. Results go to bench/results/underlay-<date>.json.

Live, the same pools (``live_pools``) serve bench/live.py's UnderlayIPPools (kubesched with pools
vs kubesched's default profile) and UnderlayIPExtender (the extender beside the no-op floor):
``python -m bench UnderlayIPPools --size small``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as dt
import gc
import ipaddress
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubesched.config.load import load_config, load_config_text
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.snapshot.pod import PodInfo

ROOT = Path(__file__).resolve().parents[1]
IP_CONFIG = ROOT / "examples" / "ip-scheduler.yaml"
CONFIGS = ("default", "ip", "ip+pools")
POOLS = 10


def _pools(node_names: list[str]) -> dict[str, dict[str, Any]]:
    """POOLS pools, each serving a slice of the nodes with a /22 (1,021 usable addresses)."""
    out: dict[str, dict[str, Any]] = {}
    per = -(-len(node_names) // POOLS)
    for i in range(POOLS):
        net = ipaddress.ip_network(f"10.{100 + i}.0.0/22")
        name = f"rack-{i}"
        out[name] = {"apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool",
                     "metadata": {"name": name},
                     "spec": {"cidr": str(net), "reserved": [str(net.network_address + 1)],
                              "nodeNames": node_names[i * per:(i + 1) * per]}}
    return out


def live_pools(c: Any, ns: str, size: Any) -> None:
    """``ns_setup`` of the live workloads with pools (bench/live.py UnderlayIPPools, UnderlayIPExtender):
    the CRDs from deploy/crds and the POOLS pools over the bench's nodes ``node-00000`` ..., made once
    per cluster (later rounds find them: 409)."""
    import yaml

    from kubesched.testing.controlplane import ApiError

    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for plural in ("underlayippools", "underlayipclaims"):
        crd = yaml.safe_load((ROOT / "deploy" / "crds" / f"underlay.kubesched.io_{plural}.yaml").read_text())
        try:
            c.api("POST", crd_path, crd)
        except ApiError as e:
            if e.status != 409:
                raise

        def established(name: str = crd["metadata"]["name"]) -> bool:
            conds = (c.get(f"{crd_path}/{name}").get("status") or {}).get("conditions") or []
            return any(x["type"] == "Established" and x["status"] == "True" for x in conds)

        c.wait_for(established, 30, 0.2, f"{plural} CRD established")
    for body in _pools([f"node-{i:05d}" for i in range(size.nodes)]).values():
        try:
            c.api("POST", "/apis/underlay.kubesched.io/v1alpha1/underlayippools", body)
        except ApiError as e:
            if e.status != 409:
                raise


def build(config: str, nodes: int, pods: int, seed: int) -> Simulation:
    registry = builtin_registry()
    if config == "default":
        cfg, scheduler_name = load_config(None, registry), "default-scheduler"
    else:
        cfg = load_config_text(IP_CONFIG.read_text(), registry)
        scheduler_name = cfg.profiles[0].scheduler_name
    generated = generate_cluster(nodes, pods, seed)
    raw_pods = []
    for raw in generated.pods:
        pod = PodInfo.from_raw(raw)
        if pod.terminal:
            continue
        raw = pod.with_node("").raw if pod.node_name else raw  # every pod is scheduled here
        raw["spec"]["schedulerName"] = scheduler_name
        raw_pods.append(raw)
    node_names = [n["metadata"]["name"] for n in generated.nodes]
    objects = {"UnderlayIPPool": _pools(node_names)} if config == "ip+pools" else {}
    cluster_input = ClusterInput(nodes=list(generated.nodes), pods=raw_pods, objects=objects, skipped={},
                                 source=f"bench underlay {config}")
    return Simulation(cfg, registry, cluster_input, seed=seed)


def run_once(config: str, nodes: int, pods: int, seed: int, profiler: cProfile.Profile | None = None) -> dict[str, Any]:
    sim = build(config, nodes, pods, seed)
    gc.collect()
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    result = asyncio.run(sim.run())
    if profiler is not None:
        profiler.disable()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    bound = sum(1 for p in result.cluster.pods.values() if p.node_name)
    return {"config": config, "nodes": nodes, "pods": pods, "bound": bound, "seconds": round(elapsed, 3),
            "cpu_seconds": round(cpu, 3), "pods_per_second": round(bound / elapsed, 1),
            "pods_per_cpu_second": round(bound / cpu, 1) if cpu > 0 else None}


def _run_in(src: Path, config: str, a: argparse.Namespace) -> dict[str, Any]:
    """run_once in a fresh process with ``src`` first on the path."""
    code = (f"import json; from bench.underlay import run_once; "
            f"print(json.dumps(run_once({config!r}, {a.nodes}, {a.pods}, {a.seed})))")
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.underlay")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="", help="recorded with the results (e.g. before/after)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--before", metavar="SRC", help="compare with this copy of src/ (see above)")
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args(argv)
    if a.profile:
        for config in CONFIGS:
            prof = cProfile.Profile()
            print(run_once(config, a.nodes, a.pods, a.seed, prof))
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0
    sources = [("before", Path(a.before)), ("after", ROOT / "src")] if a.before else [(a.label, None)]
    rounds: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(a.rounds):
        for config in CONFIGS:
            for label, src in sources:
                run = _run_in(src, config, a) if src is not None else run_once(config, a.nodes, a.pods, a.seed)
                rounds.setdefault((label, config), []).append(run)
    records = []
    for (label, _config), runs in rounds.items():
        best = max(runs, key=lambda r: r["pods_per_cpu_second"])
        records.append({**best, "label": label, "rounds": len(runs),
                        "median_pods_per_cpu_second": statistics.median(r["pods_per_cpu_second"] for r in runs),
                        "median_pods_per_second": statistics.median(r["pods_per_second"] for r in runs),
                        "pods_per_cpu_second_each": [r["pods_per_cpu_second"] for r in runs],
                        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
    for label, _ in sources:
        mine = [r for r in records if r["label"] == label]
        base = next(r["pods_per_cpu_second"] for r in mine if r["config"] == "default")
        defaults = rounds[(label, "default")]
        for rec in mine:
            rec["vs_default"] = round(rec["pods_per_cpu_second"] / base, 3)
            # Paired round by round (the same neighbours' load): this configuration ÷ default.
            paired = [round(r["pods_per_cpu_second"] / d["pods_per_cpu_second"], 3)
                      for r, d in zip(rounds[(label, rec["config"])], defaults, strict=True)]
            rec["vs_default_per_round"] = paired
            rec["vs_default_median"] = statistics.median(paired)
            print(f"{label:8} {rec['config']:9} bound {rec['bound']:5}  best {rec['pods_per_cpu_second']:7.1f} "
                  f"median {rec['median_pods_per_cpu_second']:7.1f} pods/cpu-s  "
                  f"{rec['median_pods_per_second']:7.1f} pods/s wall (median)  {rec['vs_default']:.0%} of default "
                  f"(best); paired per round: median {rec['vs_default_median']:.3f}, "
                  f"range {min(paired):.3f}-{max(paired):.3f}")
    if not a.no_save:
        out = ROOT / "bench" / "results" / f"underlay-{dt.date.today().isoformat()}.json"
        existing = json.loads(out.read_text()) if out.exists() else []
        out.write_text(json.dumps([*existing, *records], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
