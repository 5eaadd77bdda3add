"""CPU per pod of ``kubesched extender``'s pod informer handling (issue 32 item 4), no apiserver.

Feeds ``--pods`` pods' watch events, as JSON bytes as the apiserver sends them (a created pod with
the apiserver's defaults and managedFields), through an ExtenderCluster's own informers
(``orjson.loads`` then ``Informer._on_event``: trim, intern, store, handlers), over ``--nodes``
nodes: every pod pending first, then each bound and Running (KWOK), then each deleted. A cluster
with ONE pod informer (non-terminal pods) gets pending ADDED, MODIFIED (bind), MODIFIED
(Running), DELETED; one with TWO (``pending``: ``spec.nodeName=``, ``pods``: ``spec.nodeName!=``)
gets what those watches send: pending ADDED, pending DELETED (the bind: no longer matches), bound
ADDED, bound MODIFIED (Running), bound DELETED.

    python bench/extender_events.py --src src --baseline-src /tmp/base/src --out bench/results/x.json

Each ``--passes`` pass runs each tree in a fresh process, alternated; the median CPU
(``time.process_time``) per pod is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson


def pod_object(i: int, rv: int, node: str = "", phase: str = "Pending", deleting: bool = False) -> dict[str, Any]:
    name = f"pod-{i:05d}"
    spec: dict[str, Any] = {
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80,
                        "protocol": "TCP"}], "resources": {"limits": {"cpu": "100m", "memory": "500Mi"},
                        "requests": {"cpu": "100m", "memory": "500Mi"}}, "terminationMessagePath":
                        "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "securityContext": {}, "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
    }
    status: dict[str, Any] = {"phase": phase, "qosClass": "Guaranteed"}
    if node:
        spec["nodeName"] = node
        status["conditions"] = [{"type": "PodScheduled", "status": "True",
                                 "lastTransitionTime": "2026-11-28T16:00:01Z"}]
    if phase == "Running":
        status.update(hostIP="10.0.0.1", podIP=f"10.1.{i // 250}.{i % 250}", startTime="2026-11-28T16:00:02Z")
        status["conditions"] += [{"type": t, "status": "True", "lastTransitionTime": "2026-11-28T16:00:02Z"}
                                 for t in ("Initialized", "Ready", "ContainersReady")]
        status["containerStatuses"] = [{"name": "pause", "ready": True, "restartCount": 0, "started": True,
                                        "image": "registry.k8s.io/pause:3.10", "imageID": "",
                                        "state": {"running": {"startedAt": "2026-11-28T16:00:02Z"}}}]
    meta: dict[str, Any] = {
        "name": name, "namespace": "bench", "uid": f"00000000-0000-0000-0000-{i:012d}", "resourceVersion": str(rv),
        "creationTimestamp": "2026-11-28T16:00:00Z", "labels": {"bench": "measure"},
        "managedFields": [{"manager": "bench", "operation": "Update", "apiVersion": "v1",
                           "time": "2026-11-28T16:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
    }
    if deleting:
        meta.update(deletionTimestamp="2026-11-28T16:00:09Z", deletionGracePeriodSeconds=0)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def line(etype: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": etype, "object": obj})


def streams(pods: int, nodes: int, two: bool) -> list[tuple[str, bytes]]:
    """(informer, event bytes) in the order the watches deliver them."""
    out: list[tuple[str, bytes]] = []
    pend = "pending" if two else "pods"
    for i in range(pods):
        out.append((pend, line("ADDED", pod_object(i, 1))))
    for i in range(pods):
        node = f"node-{i % nodes:04d}"
        bound = pod_object(i, 2, node)
        if two:
            out += [("pending", line("DELETED", bound)), ("pods", line("ADDED", bound))]
        else:
            out.append(("pods", line("MODIFIED", bound)))
        out.append(("pods", line("MODIFIED", pod_object(i, 3, node, "Running"))))
    for i in range(pods):
        out.append(("pods", line("DELETED", pod_object(i, 4, f"node-{i % nodes:04d}", "Running", deleting=True))))
    return out


def one_pass(pods: int, nodes: int) -> float:
    """CPU seconds per pod of one cluster (whichever kubesched is on the path)."""
    import time
    from typing import cast

    from kubesched.extender.cluster import ExtenderCluster
    from kubesched.kube.api import ApiClient
    from kubesched.testing import node

    cluster = ExtenderCluster(cast(ApiClient, None))  # never started: no API calls
    for n in range(nodes):
        cluster.nodes._on_event({"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Node",
                                                             **node(f"node-{n:04d}")}})
    two = hasattr(cluster, "pending")
    informers = {"pods": cluster.pods, "pending": getattr(cluster, "pending", None)}
    events = [(informers[name], data) for name, data in streams(pods, nodes, two)]
    start = time.process_time()
    for inf, data in events:
        assert inf is not None
        inf._on_event(orjson.loads(data))
    spent = time.process_time() - start
    assert not list(cluster.pending_pods()) and not any(cluster.cache.table.pods[r]
                                                        for r in cluster.cache.table.alive_rows())
    return spent / pods


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=Path("src"))
    ap.add_argument("--baseline-src", type=Path)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(one_pass(args.pods, args.nodes))
        return
    trees = {"src": args.src, **({"baseline": args.baseline_src} if args.baseline_src else {})}
    runs: dict[str, list[float]] = {k: [] for k in trees}
    for _ in range(args.passes):
        for label, src in trees.items():
            env_path = f"{src.resolve()}:{Path(__file__).resolve().parent.parent}"
            got = subprocess.run([sys.executable, __file__, "--one", "--pods", str(args.pods), "--nodes",
                                  str(args.nodes)], env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
                                 check=True, capture_output=True, text=True)
            runs[label].append(float(got.stdout.strip().splitlines()[-1]))
    result: dict[str, Any] = {"loadavg_after": [round(x, 2) for x in os.getloadavg()],
                              "pods": args.pods, "nodes": args.nodes, "passes": args.passes,
                              "cpu_ms_per_pod": {k: [round(v * 1e3, 4) for v in vs] for k, vs in runs.items()},
                              "median_ms_per_pod": {k: round(statistics.median(vs) * 1e3, 4)
                                                    for k, vs in runs.items()}}
    if "baseline" in runs:
        result["ratio"] = round(statistics.median(runs["src"]) / statistics.median(runs["baseline"]), 3)
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
