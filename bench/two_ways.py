"""The same question, two ways: one what-if answered by ``kubesched simulate`` and by the real
kube-scheduler on a control plane with KWOK nodes (the route kube-scheduler-simulator and KWOK users
take), time to answer side by side and the outcomes compared.

The question: *how many of these 10,000 replicas fit on my 5,000 nodes, and where do they go?*
(default profile). Nodes: 4, 8 and 16 cpu round-robin (4 GiB per cpu, 110 pods), zones
``zone1..3``; every fifth node tainted ``dedicated=infra:NoSchedule`` (the replicas do not tolerate
it). Replicas: 3500m cpu / 4Gi each, so a 4-cpu node holds 1, an 8-cpu node 2, a 16-cpu node 4, and
the cluster holds fewer replicas than asked (9,332 of 10,000 at the full size): every node the
replicas may use ends full whatever the order and the tie-breaks, so the number bound *and* every
node's count are deterministic, and both routes must give exactly the capacity arithmetic's answer.

Both routes start from the same objects: the bench writes them once as a ``v1 List`` (JSON, as
``kubectl get -o json`` prints it).

* **simulator**: ``kubesched simulate --cluster DUMP --output json -q``, one process per run from
  start to exit (interpreter start-up, loading the dump, scheduling, the JSON answer); wall, CPU
  and peak RSS from ``wait4``. It runs as an installed package does, with its .pyc files
  (``time_to_answer.run_once``: ``PYTHONDONTWRITEBYTECODE`` unset; one uncounted warm-up run).
  The outcome is read from the JSON (``summary.scheduled``, ``nodes[].podsAfter``).
* **KWOK + kube-scheduler** (v1.37.1, built by hack/cluster/build.sh), phases timed separately:
  ``control plane`` (certificates, etcd, kube-apiserver, KWOK), ``nodes`` and ``pods`` (created
  through the API from 8 threads with keep-alive connections, no client rate limit: faster than
  ``kubectl apply``), ``schedule`` (kube-scheduler started, default profile, until every replica is
  bound or marked ``PodScheduled=False``: nothing more binds, as a watch on the namespace sees it),
  ``read`` (list the pods, count per node). kube-scheduler gets the benchmark settings of
  bench/live.py (clientConnection qps/burst 5000, exempt from API Priority and Fairness), which only
  make this route faster than a default setup; the bench does not wait for the nodes to be Ready
  (kube-scheduler does not need it). CPU seconds: etcd + kube-apiserver + KWOK + kube-scheduler
  (``/proc``) + the harness's own (creating objects, the watch).

``--size small`` (200 nodes / 400 replicas; tests/integration/test_bench_smoke.py runs it and holds
the outcomes equal), ``full`` (5,000 / 10,000). Each route runs ``--rounds`` times, alternated
(simulator, KWOK, KWOK, simulator, ...). Results are appended to bench/results/two_ways-<date>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import resource
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from bench import common, live, time_to_answer
from bench.templates import HOSTNAME, ZONE
from kubesched.testing import controlplane, kwok_node, pod_manifest
from kubesched.testing.controlplane import ControlPlane

SIZES = {"small": (200, 400), "full": (5000, 10000)}
NAMESPACE = "whatif"
POD_CPU_MILLI = 3500
POD_REQUESTS = {"cpu": f"{POD_CPU_MILLI}m", "memory": "4Gi"}
NODE_CPUS = (4, 8, 16)
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
TARGET_SPEEDUP = 20.0


# -- the question ------------------------------------------------------------------------------------
def node_name(i: int) -> str:
    return f"node-{i:05d}"


def node_cpu(i: int) -> int:
    return NODE_CPUS[i % len(NODE_CPUS)]


def node_tainted(i: int) -> bool:
    return i % 5 == 4


def nodes(n: int) -> list[dict[str, Any]]:
    return [
        kwok_node(node_name(i), cpu=str(node_cpu(i)), memory=f"{4 * node_cpu(i)}Gi", pods=110,
                  labels={HOSTNAME: node_name(i), ZONE: f"zone{i % 3 + 1}"},
                  taints=[TAINT] if node_tainted(i) else ())
        for i in range(n)
    ]


def pods(m: int) -> list[dict[str, Any]]:
    return [pod_manifest(f"replica-{i:05d}", NAMESPACE, requests=POD_REQUESTS, limits=POD_REQUESTS,
                         labels={"app": "replica"}, container_name="app")
            for i in range(m)]


def expected(n: int, m: int) -> dict[str, Any]:
    """The capacity arithmetic: replicas per usable node, and how many of ``m`` fit."""
    per_node = {node_name(i): 0 if node_tainted(i) else node_cpu(i) * 1000 // POD_CPU_MILLI for i in range(n)}
    capacity = sum(per_node.values())
    return {"bound": min(m, capacity), "capacity": capacity, "per_node": per_node if capacity <= m else None}


def write_dump(path: Path, n: int, m: int) -> Path:
    items = [*nodes(n), *pods(m)]
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


# -- route 1: the simulator ----------------------------------------------------------------------------
def simulator_route(dump: Path, workdir: Path) -> dict[str, Any]:
    argv = [*time_to_answer.kubesched_command(), "simulate", "--cluster", str(dump), "--output", "json", "-q"]
    out = workdir / "simulate.json"
    run = time_to_answer.run_once(argv, out)
    doc = orjson.loads(out.read_bytes())
    per_node = {nd["name"]: nd["podsAfter"] for nd in doc["nodes"]}
    return {**run, "argv": "kubesched simulate --cluster DUMP.json --output json -q",
            "bound": doc["summary"]["scheduled"], "unschedulable": doc["summary"]["unschedulable"],
            "loop_seconds": doc["summary"]["wallSeconds"], "per_node": per_node}


# -- route 2: KWOK + kube-scheduler ---------------------------------------------------------------------
class DecisionWatcher(threading.Thread):
    """Follows the namespace's pods until each is bound or marked unschedulable (PodScheduled False)."""

    def __init__(self, c: ControlPlane, resource_version: str, expected_pods: int) -> None:
        super().__init__(daemon=True, name="watch-decisions")
        kc = c.client
        self._connect = lambda: http.client.HTTPSConnection(kc.host, kc.port, context=kc.ctx, timeout=3600)
        self.rv = resource_version
        self.expected = expected_pods
        self.bound: set[str] = set()
        self.unschedulable: set[str] = set()
        self.last_decision = 0.0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._conn: http.client.HTTPSConnection | None = None
        self._closing = False

    def _decided(self) -> int:
        return len(self.bound) + len(self.unschedulable - self.bound)

    def run(self) -> None:
        try:
            while self._decided() < self.expected and not self._closing:
                self._conn = conn = self._connect()
                conn.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?watch=true&timeoutSeconds=3000"
                                    f"&allowWatchBookmarks=true&resourceVersion={self.rv}",
                             headers={"Accept": "application/json"})
                resp = conn.getresponse()
                if resp.status >= 300:
                    raise RuntimeError(f"watch: HTTP {resp.status}: {resp.read()[:300]!r}")
                while self._decided() < self.expected:
                    line = resp.readline()
                    if not line:
                        break
                    ev = orjson.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        raise RuntimeError(f"watch error: {obj}")
                    self.rv = (obj.get("metadata") or {}).get("resourceVersion") or self.rv
                    self._observe(obj)
                conn.close()
        except BaseException as e:
            if not self._closing:
                self.error = e
        finally:
            self.done.set()

    def _observe(self, pod: dict[str, Any]) -> None:
        name = (pod.get("metadata") or {}).get("name")
        if not name:
            return
        if (pod.get("spec") or {}).get("nodeName"):
            if name not in self.bound:
                self.bound.add(name)
                self.last_decision = time.monotonic()
            return
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and name not in self.unschedulable:
                self.unschedulable.add(name)
                self.last_decision = time.monotonic()

    def close(self) -> None:
        self._closing = True
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)  # unblocks the reader's readline


def _self_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def kwok_route(n: int, m: int, workdir: Path, bin_dir: Path | None = None, timeout: float = 1800.0
               ) -> dict[str, Any]:
    """Start a control plane, create the objects, let kube-scheduler decide every replica, read the outcome."""
    if bin_dir is None:
        bin_dir = controlplane.ensure_binaries(build=True, quiet=True)
    phases: dict[str, float] = {}
    cpu0 = _self_cpu()
    t0 = time.monotonic()
    c = ControlPlane(workdir / "cluster", bin_dir=bin_dir)
    try:
        c.start(with_kwok=True)
        live.exempt_schedulers_from_apf(c)
        phases["control_plane"] = time.monotonic() - t0
        t = time.monotonic()
        bulk = live.Bulk(c)
        bulk.post_all(lambda b: "/api/v1/nodes", nodes(n))
        phases["nodes"] = time.monotonic() - t
        t = time.monotonic()
        c.create_namespace(NAMESPACE)
        bulk.post_all(lambda b: f"/api/v1/namespaces/{NAMESPACE}/pods", pods(m))
        phases["pods"] = time.monotonic() - t
        rv = c.get(f"/api/v1/namespaces/{NAMESPACE}/pods", limit=1)["metadata"]["resourceVersion"]
        watcher = DecisionWatcher(c, rv, m)
        watcher.start()
        t = time.monotonic()
        cfg = live.scheduler_config(c, workdir / "kube-scheduler.yaml", {"schedulerName": live.DEFAULT_NAME},
                                    5000, 5000)
        sched = c.start_kube_scheduler(cfg, extra_args=["--v=0"])
        try:
            deadline = t + timeout
            while not watcher.done.wait(0.5):
                if not sched.alive():
                    raise RuntimeError(f"kube-scheduler exited:\n{sched.tail(30)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"timeout: {len(watcher.bound)} bound, {len(watcher.unschedulable)} "
                                       f"unschedulable of {m} after {timeout:.0f}s")
            if watcher.error is not None:
                raise RuntimeError(f"watch failed: {watcher.error}")
            phases["schedule"] = time.monotonic() - t
            t = time.monotonic()
            items = c.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
            per_node = Counter(p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName"))
            phases["read"] = time.monotonic() - t
            wall = time.monotonic() - t0
            cpu = {comp.name: common.proc_cpu_seconds(comp.pid) or 0.0
                   for comp in (c.etcd, c.apiserver, c.kwok, sched) if comp is not None and comp.pid}
        finally:
            watcher.close()
        cpu["harness"] = _self_cpu() - cpu0
    finally:
        c.stop()
    bound = sum(per_node.values())
    return {
        "wall_seconds": round(wall, 3),
        "phases_seconds": {k: round(v, 3) for k, v in phases.items()},
        "cpu_seconds": round(sum(cpu.values()), 3),
        "cpu_seconds_by_process": {k: round(v, 2) for k, v in cpu.items()},
        "bound": bound,
        "unschedulable": m - bound,
        "loadavg": common.loadavg(),
        "per_node": {node_name(i): per_node.get(node_name(i), 0) for i in range(n)},
    }


# -- both -----------------------------------------------------------------------------------------------
def compare(sim: dict[str, Any], kwok: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    """Outcomes side by side: bound counts, and every node's count where the answer is deterministic."""
    out: dict[str, Any] = {"bound": {"simulator": sim["bound"], "kube-scheduler": kwok["bound"],
                                     "expected": want["bound"]},
                           "bound_equal": sim["bound"] == kwok["bound"]}
    if want["per_node"] is not None:
        differ = sorted(k for k in set(sim["per_node"]) | set(kwok["per_node"])
                        if sim["per_node"].get(k, 0) != kwok["per_node"].get(k, 0))
        out["per_node_compared"] = len(want["per_node"])
        out["per_node_differing"] = len(differ)
        out["per_node_differing_examples"] = {k: [sim["per_node"].get(k, 0), kwok["per_node"].get(k, 0)]
                                              for k in differ[:10]}
        out["per_node_equal_expected"] = sim["per_node"] == want["per_node"] == kwok["per_node"]
    return out


def measure(n: int, m: int, rounds: int, workdir: Path, bin_dir: Path | None = None,
            log: Any = print) -> dict[str, Any]:
    # Not counted: writes the .pyc files, so the timed runs start as an installed package does.
    simulator_route(write_dump(workdir / "warm-up.json", 20, 40), workdir)
    dump = write_dump(workdir / "cluster.json", n, m)
    want = expected(n, m)
    sims: list[dict[str, Any]] = []
    kwoks: list[dict[str, Any]] = []
    for rnd in range(rounds):
        order = ("simulator", "kwok") if rnd % 2 == 0 else ("kwok", "simulator")
        for route in order:
            if route == "simulator":
                r = simulator_route(dump, workdir)
                sims.append(r)
            else:
                r = kwok_route(n, m, workdir / f"kwok-{rnd}", bin_dir)
                kwoks.append(r)
            log(orjson.dumps({"route": route, "round": rnd,
                              **{k: v for k, v in r.items() if k != "per_node"}}).decode())
    comparisons = [compare(s, k, want) for s, k in zip(sims, kwoks, strict=True)]
    sim_wall = statistics.median(r["wall_seconds"] for r in sims)
    kwok_wall = statistics.median(r["wall_seconds"] for r in kwoks)
    phase_names = list(kwoks[0]["phases_seconds"])
    strip = [{k: v for k, v in r.items() if k != "per_node"} for r in (*sims, *kwoks)]
    return {
        "nodes": n,
        "pods": m,
        "dump_bytes": dump.stat().st_size,
        "expected": {k: v for k, v in want.items() if k != "per_node"},
        "simulator": {
            "argv": sims[0]["argv"],
            "children": time_to_answer.WARM_UP,
            "wall_seconds_median": sim_wall,
            "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in sims),
            "peak_rss_mib_median": statistics.median(r["peak_rss_mib"] for r in sims),
            "loop_seconds_median": statistics.median(r["loop_seconds"] for r in sims),
            "runs": strip[: len(sims)],
        },
        "kube-scheduler": {
            "wall_seconds_median": kwok_wall,
            "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in kwoks),
            "phases_seconds_median": {p: statistics.median(r["phases_seconds"][p] for r in kwoks)
                                      for p in phase_names},
            "runs": strip[len(sims):],
        },
        "speedup_wall": round(kwok_wall / sim_wall, 1) if sim_wall else None,
        # CPU is what a loaded, shared machine distorts least (wall shares it with other jobs).
        "cpu_ratio": round(statistics.median(r["cpu_seconds"] for r in kwoks)
                           / statistics.median(r["cpu_seconds"] for r in sims), 1),
        "comparisons": comparisons,
        "outcomes_agree": all(c["bound_equal"] and c.get("per_node_equal_expected", True) for c in comparisons),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench two-ways")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    n, m = SIZES[args.size]
    load_start = common.loadavg()
    with tempfile.TemporaryDirectory(prefix="kubesched-two-ways-") as tmp:
        wd = args.workdir or Path(tmp)
        wd.mkdir(parents=True, exist_ok=True)
        measured = measure(n, m, args.rounds, wd)
    record = {"benchmark": "two-ways", "size": args.size, "date": common.now_iso(), "commit": common.git_commit(),
              "command": common.command_line(), "machine": {**common.machine(), "loadavg_start": load_start,
                                                            "loadavg_end": common.loadavg()},
              "versions": common.versions(), "rounds": args.rounds, **measured}
    msg = (f"two ways, {n} nodes / {m} replicas: simulator {measured['simulator']['wall_seconds_median']:.1f} s, "
           f"KWOK + kube-scheduler {measured['kube-scheduler']['wall_seconds_median']:.1f} s "
           f"(x{measured['speedup_wall']}); outcomes agree: {measured['outcomes_agree']}")
    if not args.no_save:
        msg += f" -> {common.save_result(record, common.RESULTS / f'two_ways-{common.today()}.json')}"
    print(msg)
    return 0 if measured["outcomes_agree"] else 1


def load_records(directory: Path = common.RESULTS) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in sorted(directory.glob("two_ways-*.json")):
        out += orjson.loads(p.read_bytes()).get("results", [])
    return out


def report_section(records: list[dict[str, Any]] | None = None) -> list[str]:
    """BENCHMARKS.md lines: the newest record of the largest size (bench/report.py calls this)."""
    recs = sorted(records if records is not None else load_records(),
                  key=lambda r: (r.get("size") == "full", str(r.get("date", ""))))
    lines = ["## The same question, two ways: simulator vs KWOK + kube-scheduler", ""]
    if not recs:
        return [*lines, "Not run yet (`python -m bench two-ways --size full`).", ""]
    r = recs[-1]
    sim, ks = r["simulator"], r["kube-scheduler"]
    ph = ks["phases_seconds_median"]
    load = r.get("machine", {})
    lines += [
        f"`bench/two_ways.py`: how many of {r['pods']:,} replicas (3500m cpu / 4Gi) fit on {r['nodes']:,} nodes "
        "(4/8/16 cpu, every fifth tainted), and where, default profile: answered by `kubesched simulate` from a "
        "dump of the objects, and by the real kube-scheduler on etcd + kube-apiserver + KWOK nodes (control "
        "plane started, objects created through the API, scheduled until nothing more binds, pods listed). "
        f"Median of {r['rounds']} run(s) per route; 1-minute load average {load.get('loadavg_start', ['–'])[0]} "
        f"at the start, {load.get('loadavg_end', ['–'])[0]} at the end, on a machine shared with other jobs.",
        "",
        "| route | wall s | CPU s | phases (wall s) | bound |",
        "|---|---|---|---|---|",
        f"| `{sim['argv']}` | {sim['wall_seconds_median']:.2f} | {sim['cpu_seconds_median']:.2f} | "
        f"whole process (scheduling loop {sim['loop_seconds_median']:.2f}); peak RSS "
        f"{sim['peak_rss_mib_median']:.0f} MiB | {r['comparisons'][0]['bound']['simulator']:,} |",
        f"| KWOK + kube-scheduler | {ks['wall_seconds_median']:.2f} | {ks['cpu_seconds_median']:.2f} | "
        + ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in ph.items())
        + f" | {r['comparisons'][0]['bound']['kube-scheduler']:,} |",
        "",
    ]
    c = r["comparisons"][0]
    per_node = ("every node's count equal in both and to the capacity arithmetic"
                if c.get("per_node_equal_expected") else f"{c.get('per_node_differing', '?')} nodes differ")
    speed = r.get("speedup_wall")
    met = "met" if speed is not None and speed >= TARGET_SPEEDUP else "**not met**"
    lines += [
        f"Outcomes: {c['bound']['simulator']:,} bound by the simulator, {c['bound']['kube-scheduler']:,} by "
        f"kube-scheduler, {c['bound']['expected']:,} by the arithmetic; {per_node}. Time to answer: the simulator "
        f"is **{speed}x** faster (target ≥ {TARGET_SPEEDUP:g}x: {met}) and uses {_cpu_ratio(r)}x less CPU "
        f"(KWOK route by process: {_by_process(ks)}).",
        "",
        f"Reproduce: `{r.get('command')}` (commit {r.get('commit')}, {str(r.get('date', ''))[:19]}).",
        "",
    ]
    return lines


def _cpu_ratio(r: dict[str, Any]) -> float | str:
    sim, ks = r["simulator"]["cpu_seconds_median"], r["kube-scheduler"]["cpu_seconds_median"]
    return round(ks / sim, 1) if sim else "–"


def _by_process(ks: dict[str, Any]) -> str:
    runs = ks.get("runs") or [{}]
    return ", ".join(f"{k} {v:.0f} s" for k, v in runs[0].get("cpu_seconds_by_process", {}).items())
