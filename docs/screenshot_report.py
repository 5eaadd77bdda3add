"""Render an example HTML report and screenshot it with headless Chromium → docs/report-screenshot.png.

    python docs/screenshot_report.py [--out docs/report-screenshot.png] [--html report.html] [--nodes 240 --pods 2400]

The data document is synthetic but self-consistent (a small greedy least-allocated placement over
four node pools, with taints and a cordoned node), so the script does not depend on the simulator
runner. Needs /usr/bin/chromium (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kubesched.simulate.report_html import render_html  # noqa: E402

GI = 2**30
POOLS = [
    # name, share, cpu (m), memory, max pods, taint
    ("general", 0.6, 8000, 32 * GI, 110, None),
    ("highmem", 0.2, 8000, 64 * GI, 110, None),
    ("gpu", 0.1, 16000, 64 * GI, 58, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}),
    ("infra", 0.1, 4000, 16 * GI, 58, {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}),
]
APPS = [
    # name, cpu (m), memory, share, tolerates
    ("web-frontend", 250, GI // 2, 0.30, None),
    ("checkout-api", 500, 1 * GI, 0.20, None),
    ("search-indexer", 1500, 6 * GI, 0.12, None),
    ("ml-inference", 3000, 12 * GI, 0.08, "nvidia.com/gpu"),
    ("batch-etl", 1000, 3 * GI, 0.20, None),
    ("log-shipper", 200, GI // 4, 0.05, "dedicated"),
    ("analytics-warehouse-loader", 6000, 40 * GI, 0.05, None),
]
PLUGINS = {
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "PodTopologySpread": 2,
}


def build(n_nodes: int, n_pods: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    nodes: list[dict[str, Any]] = []
    for i in range(n_nodes):
        pool = rng.choices(POOLS, weights=[p[1] for p in POOLS])[0]
        name, _, cpu, mem, maxpods, taint = pool
        zone = "abc"[i % 3]
        nodes.append(
            {
                "name": f"ip-10-{i // 250}-{i % 250}-{rng.randint(1, 254)}.eu-west-1.compute.internal",
                "labels": {
                    "node.kubernetes.io/instance-type": f"{name}.2xlarge",
                    "topology.kubernetes.io/zone": f"eu-west-1{zone}",
                    "pool": name,
                },
                "taints": [taint] if taint else [],
                "unschedulable": i == 3,
                "allocatable": {"cpu": cpu - 200, "memory": mem - GI, "ephemeral-storage": 100 * GI, "pods": maxpods},
                "requestedBefore": {},
                "requestedAfter": {},
                "podsBefore": 0,
                "podsAfter": 0,
                "_pool": name,
            }
        )
    # pre-bound system pods and existing workloads
    used = [{"cpu": 0, "memory": 0, "pods": 0} for _ in nodes]
    for j, n in enumerate(nodes):
        k = rng.randint(3, 25)
        used[j]["cpu"] += int(n["allocatable"]["cpu"] * rng.uniform(0.05, 0.45))
        used[j]["memory"] += int(n["allocatable"]["memory"] * rng.uniform(0.05, 0.5))
        used[j]["pods"] += k
        n["podsBefore"] = k
        n["requestedBefore"] = dict(used[j])
    pre_bound = sum(n["podsBefore"] for n in nodes)
    placements: list[dict[str, Any]] = []
    reasons: dict[str, int] = {}
    t = 0.0
    for i in range(n_pods):
        app = rng.choices(APPS, weights=[a[3] for a in APPS])[0]
        aname, cpu, mem, _, tol = app
        pod = f"prod/{aname}-{rng.getrandbits(32):08x}-{i % 997:03d}"
        t += rng.expovariate(40)
        fails: dict[str, list[str]] = {}
        feasible: list[int] = []
        for j, n in enumerate(nodes):
            taint = n["taints"][0]["key"] if n["taints"] else None
            if n["unschedulable"]:
                fails.setdefault("node(s) were unschedulable", []).append(n["name"])
            elif taint and taint != tol:
                v = n["taints"][0]["value"]
                fails.setdefault(f"node(s) had untolerated taint {{{taint}: {v}}}", []).append(n["name"])
            elif used[j]["cpu"] + cpu > n["allocatable"]["cpu"]:
                fails.setdefault("Insufficient cpu", []).append(n["name"])
            elif used[j]["memory"] + mem > n["allocatable"]["memory"]:
                fails.setdefault("Insufficient memory", []).append(n["name"])
            elif used[j]["pods"] + 1 > n["allocatable"]["pods"]:
                fails.setdefault("Too many pods", []).append(n["name"])
            else:
                feasible.append(j)
        if aname == "batch-etl" and rng.random() < 0.02:
            feasible = []
            fails = {"node(s) didn't match Pod's node affinity/selector": [n["name"] for n in nodes]}
        base = {
            "pod": pod,
            "uid": f"uid-{i}",
            "profile": "default-scheduler" if tol != "nvidia.com/gpu" else "gpu-packer",
            "attempts": 1,
            "time": round(t, 6),
            "evaluatedNodes": len(nodes),
        }
        if not feasible:
            for r in fails:
                reasons[r] = reasons.get(r, 0) + 1
            parts = sorted(((len(v), r) for r, v in fails.items()), key=lambda x: x[1])
            msg = f"0/{len(nodes)} nodes are available: " + ", ".join(f"{c} {r}" for c, r in parts)
            msg += ". preemption: 0/{0} nodes are available: {0} Preemption is not helpful for scheduling.".format(
                len(nodes)
            )
            placements.append(
                {
                    **base,
                    "status": "Unschedulable",
                    "node": None,
                    "attempts": rng.randint(1, 4),
                    "message": msg,
                    "feasibleNodes": 0,
                    "filters": {"NodeResourcesFit": fails},
                    "scores": [],
                }
            )
            continue
        scored = []
        for j in feasible:
            n = nodes[j]
            free_c = 1 - (used[j]["cpu"] + cpu) / n["allocatable"]["cpu"]
            free_m = 1 - (used[j]["memory"] + mem) / n["allocatable"]["memory"]
            fit = int(50 * (free_c + free_m))
            bal = int(100 * (1 - abs(free_c - free_m)))
            plug = {
                "NodeResourcesFit": fit,
                "NodeResourcesBalancedAllocation": bal,
                "ImageLocality": rng.choice([0, 0, 12, 35, 60]),
                "TaintToleration": 300,
                "NodeAffinity": 2 * rng.choice([0, 50, 100]),
                "PodTopologySpread": 2 * rng.randint(40, 100),
            }
            scored.append((sum(plug.values()), j, plug))
        scored.sort(key=lambda s: -s[0])
        _, j, plug = scored[0]
        used[j]["cpu"] += cpu
        used[j]["memory"] += mem
        used[j]["pods"] += 1
        status = "Scheduled" if i < n_pods - 3 else "Pending"
        placements.append(
            {
                **base,
                "status": status,
                "node": nodes[j]["name"] if status == "Scheduled" else None,
                "message": "",
                "feasibleNodes": len(feasible),
                "filters": {},
                "scores": [{"node": nodes[k]["name"], "total": s, "plugins": p} for s, k, p in scored[:5]],
            }
        )
    for j, n in enumerate(nodes):
        n["requestedAfter"] = dict(used[j])
        n["podsAfter"] = used[j]["pods"]
        del n["_pool"]

    def util(key: str, r: str) -> float:
        alloc = sum(n["allocatable"][r] for n in nodes)
        return round(sum(n[key].get(r, 0) for n in nodes) / alloc, 6) if alloc else 0.0

    count = {s: sum(1 for p in placements if p["status"] == s) for s in ("Scheduled", "Unschedulable", "Pending")}
    simulated = count["Scheduled"] + count["Unschedulable"]
    return {
        "schemaVersion": 1,
        "kubeschedVersion": "0.1.0",
        "source": "clusters/prod-eu-west-1.yaml",
        "profiles": ["default-scheduler", "gpu-packer"],
        "summary": {
            "nodes": len(nodes),
            "pods": len(placements) + pre_bound,
            "preBound": pre_bound,
            "simulated": simulated,
            "scheduled": count["Scheduled"],
            "unschedulable": count["Unschedulable"],
            "errors": 0,
            "waiting": 0,
            "pending": count["Pending"],
            "attempts": sum(p["attempts"] for p in placements),
            "virtualSeconds": round(t + 314.0, 6),
            "wallSeconds": 1.84,
            "podsPerSecond": round(simulated / 1.84, 1),
            "interrupted": False,
            "utilisationBefore": {r: util("requestedBefore", r) for r in ("cpu", "memory", "pods")},
            "utilisationAfter": {r: util("requestedAfter", r) for r in ("cpu", "memory", "pods")},
        },
        "skippedObjects": {"apps/v1 Deployment": 42, "batch/v1 Job": 7},
        "reassignedSchedulerNames": {"volcano": 12},
        "unschedulableReasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "nodes": nodes,
        "placements": placements,
    }


def screenshot(html: Path, png: Path, width: int = 1400, height: int = 2400) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={png}",
                html.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "report-screenshot.png")
    ap.add_argument("--html", type=Path, help="also keep the HTML here")
    ap.add_argument("--nodes", type=int, default=240)
    ap.add_argument("--pods", type=int, default=2400)
    ap.add_argument("--height", type=int, default=3300, help="window height (the whole example page)")
    args = ap.parse_args()
    data = build(args.nodes, args.pods)
    t0 = time.perf_counter()
    html = render_html(data)
    print(f"rendered {len(html) / 1024:.0f} KiB in {time.perf_counter() - t0:.3f}s")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(html, encoding="utf-8")
        if args.html:
            args.html.write_text(html, encoding="utf-8")
        screenshot(path, args.out, height=args.height)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
