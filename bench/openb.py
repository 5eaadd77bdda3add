"""The openb production GPU trace on a real control plane: kube-scheduler v1.37.1 and `kubesched
run` side by side, the same outcome expected (issue 32 item 1), and the time from process start to
the first bind with the whole trace pending (item 2).

``python -m bench openb [--trace DIR] [--nodes N] [--rounds R] [--contenders kube-scheduler,kubesched]``

Method (one control plane; for each round and each contender, in turn):

* The trace's nodes (``kubesched.testing.openb``: cpu, memory, ``nvidia.com/gpu``, the GPU-model
  label) are KWOK nodes created once; ``--nodes N`` takes the systematic cut with about N of them
  and the matching tasks (every k-th node and task), as the CI-sized differential test does.
* A fresh namespace gets every task as a pending pod for the contender's schedulerName (created in
  bulk, in the trace's order, BEFORE the scheduler starts: a backlog, as after a failover), then the
  scheduler process is started. It runs until settled: every pod bound or marked unschedulable
  (PodScheduled=False), the bound count unchanged for ``--quiet`` seconds. No pod is ever deleted
  and no node changes, so once every pod has had an attempt nothing more can bind.
* Recorded: pods bound (in all and per task size), the unschedulable reasons (the FitError's
  phrases without their node counts), seconds from process start to the first and the last bind.
* Both schedulers use the same identity and clientConnection (qps/burst 5000), exempted from API
  Priority and Fairness as in bench/live.py, with their default profile, leader election off; with
  ``--stock``, both as shipped instead: the default clientConnection (qps 50, burst 100) and leader
  election on (each its own Lease, free when it starts).
* Peak RSS (VmHWM) of the scheduler process, read just before it is stopped, and the CPU seconds it
  had used when its first bind was seen (on a loaded machine the wall time to the first bind is
  mostly waiting for a core; the CPU is the start-up's own cost).
* A contender ``kubesched@DIR`` is kubesched run from the source tree DIR (its PYTHONPATH), e.g.
  the code before a change (``git archive``), side by side with this one.

Results are appended to bench/results/openb-<date>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import common
from bench.live import (
    DEFAULT_NAME,
    KUBESCHED_NAME,
    MEASURE_LABEL,
    BindWatcher,
    Bulk,
    Workload,
    cleanup_namespace,
    exempt_schedulers_from_apf,
    start_contender,
    stop_contender,
)
from bench.parity import comparisons
from kubesched.testing import controlplane
from kubesched.testing.controlplane import ControlPlane
from kubesched.testing.openb import Trace, load_trace, node_object, pod_object, size_class

#: Where the trace is read from unless ``--trace`` / $KUBESCHED_OPENB_TRACE say otherwise.
DEFAULT_TRACE = Path(os.environ.get("KUBESCHED_OPENB_TRACE", str(common.ROOT.parent / "shared/traces/openb")))


def add_trace_options(ap: argparse.ArgumentParser) -> None:
    """``--trace DIR`` and ``--nodes N``, as every openb bench takes them (see :func:`trace_from`)."""
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="directory of the openb CSV files")
    ap.add_argument("--nodes", type=int, default=0, help="cut to about N nodes (0: the whole trace)")


def trace_from(args: argparse.Namespace) -> Trace:
    """The trace ``--trace`` names, cut to ``--nodes`` when given."""
    trace = load_trace(args.trace)
    return trace.cut_to(args.nodes) if args.nodes else trace
CONTENDERS = ("kube-scheduler", "kubesched")
_STARTED = common.now_iso()
_FIT_ERROR = re.compile(r"^0/\d+ nodes are available: (.*?)\.(?: preemption: (.*?)\.?)?$", re.S)
_COUNTED = re.compile(r"^\d+ ")


def reason_phrases(message: str) -> tuple[str, ...]:
    """The phrases of a FitError message without their node counts (``0/305 nodes are available:
    2 Insufficient cpu, 303 Insufficient nvidia.com/gpu. preemption: 0/305 nodes are available: 305 No
    preemption victims found for incoming pod.`` → ``Insufficient cpu``, ``Insufficient nvidia.com/gpu``,
    ``preemption: No preemption victims found for incoming pod``): what must agree between the schedulers
    even when the pods left pending and the node counts differ."""
    m = _FIT_ERROR.match(message.strip())
    if m is None:
        return (message,)
    phrases = [_COUNTED.sub("", p) for p in m.group(1).split(", ")]
    if m.group(2):
        nested = m.group(2).strip()
        inner = reason_phrases(nested + ".") if nested.startswith("0/") else (nested,)
        phrases += ["preemption: " + p for p in inner]
    return tuple(sorted(phrases))


def _unschedulable_message(pod: dict[str, Any]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "")
    return None


#: The counters kept from each scheduler's /metrics (where it has them): attempts by result, pods
#: entering each queue by the event that moved them (kube-scheduler's), OpportunisticBatching's.
COUNTERS = ("scheduler_schedule_attempts_total", "scheduler_queue_incoming_pods_total",
            "scheduler_batch_attempts_total", "scheduler_batch_cache_flushed_total")
_SAMPLE = re.compile(r"^(\w+)(\{[^}]*\})? (\S+)$")


def scraped_counters(text: str) -> dict[str, float]:
    """``COUNTERS``' samples in a /metrics text, by name and labels without the profile's."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or m.group(1) not in COUNTERS:
            continue
        labels = re.sub(r',?profile="[^"]*"', "", m.group(2) or "").replace("{,", "{")
        key = m.group(1) + ("" if labels in ("", "{}") else labels)
        out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def create_nodes(c: ControlPlane, trace: Trace, labels: dict[str, str] | None = None, timeout: float = 600) -> None:
    """The trace's nodes as KWOK nodes (``labels`` added), waited for until Ready."""
    bodies = []
    for n in trace.nodes:
        body = node_object(n)
        body["metadata"]["labels"].update(labels or {})
        bodies.append(body)
    Bulk(c).post_all(lambda b: "/api/v1/nodes", bodies)
    want = {n.name for n in trace.nodes}
    c.wait_for(lambda: want <= c.ready_nodes(), timeout, 1.0, f"{len(want)} openb nodes Ready")


@dataclass
class Outcome:
    """What one scheduler did with the trace."""

    contender: str
    pods: int
    bound: int
    bound_by_size: dict[str, int]
    pending_by_size: dict[str, int]
    #: Reason phrases (node counts dropped) → pending pods whose message had them.
    reasons: dict[str, int]
    first_bind_s: float | None
    last_bind_s: float | None
    settle_s: float
    peak_rss_mib: float | None = None
    #: CPU seconds (user + system) the scheduler process had used when its first bind was seen:
    #: its start-up's cost, which the machine's load does not stretch as it does the wall time.
    cpu_to_first_bind_s: float | None = None
    #: Counters of the scheduler's /metrics read just before it is stopped (``COUNTERS``): how many
    #: attempts failed, which events moved pods to which queue, whether batching hinted.
    counters: dict[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def settle(c: ControlPlane, ns: str, expected: int, timeout: float, quiet: float,
           alive: Callable[[], bool] = lambda: True) -> list[dict[str, Any]]:
    """Poll the namespace's pods until every one is bound or unschedulable and the bound count has
    not moved for ``quiet`` seconds; returns the pods."""
    deadline = time.monotonic() + timeout
    last_bound, since = -1, time.monotonic()
    while True:
        try:
            # A list of 8,000 pods can outlast the client's read timeout on a loaded machine (it
            # did on 2 cores at load 12): ask again rather than lose the run.
            pods = c.client.request("GET", f"/api/v1/namespaces/{ns}/pods", timeout=180)["items"]
        except (TimeoutError, OSError):
            if time.monotonic() > deadline:
                raise
            continue
        bound = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
        decided = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName") or _unschedulable_message(p) is not None)
        now = time.monotonic()
        if bound != last_bound:
            last_bound, since = bound, now
        if len(pods) == expected and decided == expected and now - since >= quiet:
            return pods
        if now > deadline:
            raise TimeoutError(f"{ns}: {bound} bound, {decided} decided of {expected} after {timeout:.0f}s")
        if not alive():
            raise RuntimeError(f"{ns}: the scheduler exited ({bound} bound, {decided} decided of {expected})")
        time.sleep(2.0)


def run_contender(c: ControlPlane, trace: Trace, kind: str, workdir: Path, *, qps: float | None = 5000,
                  burst: int | None = 5000, leader_elect: bool = False,
                  node_selector: dict[str, str] | None = None, timeout: float = 1800, quiet: float = 10.0,
                  log: Callable[[str], None] = print) -> Outcome:
    """The whole trace pending in a fresh namespace, then ``kind`` started; see the module docstring.
    ``node_selector`` confines the pods to the trace's nodes on a shared control plane."""
    ns = f"openb-{uuid.uuid4().hex[:6]}"
    c.create_namespace(ns)
    base, _, src = kind.partition("@")
    sched_name = KUBESCHED_NAME if base == "kubesched" else DEFAULT_NAME
    size_of = {t.name: size_class(t) for t in trace.tasks}
    bodies = []
    for t in trace.tasks:
        body = pod_object(t, ns, sched_name)
        body["metadata"]["labels"][MEASURE_LABEL] = "measure"
        if node_selector:
            body["spec"]["nodeSelector"] = dict(node_selector)
        bodies.append(body)
    try:
        t0 = time.monotonic()
        Bulk(c).post_all(lambda b: f"/api/v1/namespaces/{ns}/pods", bodies)
        log(f"  {kind}: {len(bodies)} pods pending in {ns} ({time.monotonic() - t0:.1f}s)")
        rv = c.get(f"/api/v1/namespaces/{ns}/pods", limit=1)["metadata"]["resourceVersion"]
        scheduler_pid: list[int] = []
        cpu_at_first_bind: list[float | None] = []

        def at_first_bind() -> None:
            if scheduler_pid:
                cpu_at_first_bind.append(common.proc_cpu_seconds(scheduler_pid[0]))

        watcher = BindWatcher(c, ns, rv, len(bodies), on_first=at_first_bind)
        watcher.start()
        started = time.monotonic()
        run = start_contender(c, Workload(base, "openb"), base, qps, burst, workdir, leader_elect=leader_elect,
                              kubesched_src=src or None)
        peak_kib: int | None = None
        counters: dict[str, float] | None = None
        try:
            proc = run.procs["scheduler"]
            if proc.pid is not None:
                scheduler_pid.append(proc.pid)
                if watcher.bound and not cpu_at_first_bind:
                    # It bound before its start returned (kube-scheduler is waited for until
                    # healthy): read now, a little late (more CPU than at its first bind).
                    cpu_at_first_bind.append(common.proc_cpu_seconds(proc.pid))
            pods = settle(c, ns, len(bodies), timeout, quiet, proc.alive)
            settled = time.monotonic() - started
            peak_kib = common.proc_status_kib(proc.pid, "VmHWM")
            counters = scraped_counters(run.scrape())
        finally:
            stop_contender(c, run)
            watcher.close()
        binds = sorted(watcher.bound.values())
        bound_by: Counter[str] = Counter()
        pending_by: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        for p in pods:
            size = size_of[p["metadata"]["name"]]
            if (p.get("spec") or {}).get("nodeName"):
                bound_by[size] += 1
                continue
            pending_by[size] += 1
            for phrase in reason_phrases(_unschedulable_message(p) or ""):
                reasons[phrase] += 1
        out = Outcome(kind, len(bodies), sum(bound_by.values()), dict(sorted(bound_by.items())),
                      dict(sorted(pending_by.items())), dict(reasons.most_common()),
                      round(binds[0] - started, 2) if binds else None,
                      round(binds[-1] - started, 2) if binds else None, round(settled, 1),
                      round(peak_kib / 1024, 1) if peak_kib else None,
                      cpu_at_first_bind[0] if cpu_at_first_bind else None, counters)
        log(f"  {kind}: {out.bound}/{out.pods} bound {out.bound_by_size}, first bind {out.first_bind_s}s "
            f"({out.cpu_to_first_bind_s} CPU s), last {out.last_bind_s}s, peak RSS {out.peak_rss_mib} MiB")
        return out
    finally:
        cleanup_namespace(c, ns, [b["metadata"]["name"] for b in bodies])


@contextlib.contextmanager
def openb_cluster(trace: Trace, workdir: Path, log: Callable[[str], None] = print) -> Iterator[ControlPlane]:
    """A control plane of its own holding the trace's nodes."""
    controlplane.ensure_binaries(build=True, quiet=True)
    c = ControlPlane(workdir / "cluster", apiserver_args=["--delete-collection-workers=4"])
    try:
        t0 = time.monotonic()
        c.start(with_kwok=True)
        exempt_schedulers_from_apf(c)
        create_nodes(c, trace)
        log(f"  control plane + {len(trace.nodes)} openb nodes ready in {time.monotonic() - t0:.1f}s ({c.dir})")
        yield c
    finally:
        c.stop()
        shutil.rmtree(c.dir / "etcd-data", ignore_errors=True)


def grant_kubesched_lease(c: ControlPlane, namespace: str = "kube-system", lease: str = "kubesched") -> None:
    """The leader-election Role ``kubesched run --print-rbac`` prints, bound to the schedulers'
    shared identity (system:kube-scheduler may get and update only the Lease named kube-scheduler)."""
    from kubesched.live.rbac import leader_election_role

    role = leader_election_role("kubesched-leader-election", namespace, lease)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "kubesched-leader-election", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-scheduler"}],
    }
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    c.client.request("POST", f"{base}/roles", role)
    c.client.request("POST", f"{base}/rolebindings", binding)


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.contender, []).append(o)
    summary: dict[str, Any] = {
        kind: {
            "bound": [o.bound for o in runs],
            "spread": [min(o.bound for o in runs), max(o.bound for o in runs)],
            "first_bind_s": [o.first_bind_s for o in runs],
            "last_bind_s": [o.last_bind_s for o in runs],
            "peak_rss_mib": [o.peak_rss_mib for o in runs],
            "cpu_to_first_bind_s": [o.cpu_to_first_bind_s for o in runs],
        }
        for kind, runs in by.items()
    }
    # Whether each kubesched contender's bound count differs from kube-scheduler's by more than the
    # run-to-run noise (bench/parity.py says why the literal spread check is not that test).
    parity = comparisons({kind: [o.bound for o in runs] for kind, runs in by.items()})
    if parity:
        summary["parity"] = parity
    return summary


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench openb", description=__doc__.splitlines()[0])
    add_trace_options(ap)
    ap.add_argument("--rounds", type=int, default=1, help="runs of each contender")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--qps", type=float, default=5000)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--stock", action="store_true",
                    help="both schedulers as shipped: default qps/burst (50/100), leader election on")
    ap.add_argument("--note", default="", help="stored with the result (what code was measured)")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)
    trace = trace_from(args)
    contenders = [k.strip() for k in args.contenders.split(",") if k.strip()]
    workdir = args.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"kubesched-openb-{uuid.uuid4().hex[:6]}"
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"openb: {len(trace.nodes)} nodes, {len(trace.tasks)} tasks, {args.rounds} round(s) of {contenders}")
    outcomes: list[Outcome] = []
    path = common.RESULTS / f"openb-{common.today()}.json"
    record: dict[str, Any] = {}
    with openb_cluster(trace, workdir) as c:
        if args.stock:
            grant_kubesched_lease(c)
        for rnd in range(args.rounds):
            for kind in contenders if rnd % 2 == 0 else reversed(contenders):  # ABBA
                if args.stock:
                    outcomes.append(run_contender(c, trace, kind, workdir, qps=None, burst=None, leader_elect=True))
                else:
                    outcomes.append(run_contender(c, trace, kind, workdir, qps=args.qps, burst=args.burst))
                # Saved after every run (the record replaced): a full round takes ~15 min here.
                record = _record(args, trace, outcomes, complete=False)
                _save(record, path)
    record["complete"] = True
    _save(record, path)
    print(f"openb: {record['summary']}\n  saved to {path}")
    return 0


def _record(args: argparse.Namespace, trace: Trace, outcomes: list[Outcome], complete: bool) -> dict[str, Any]:
    return {
        "benchmark": "openb",
        "when": _STARTED,
        "commit": common.git_commit(),
        "command": common.command_line(),
        "machine": common.machine(),
        "versions": common.versions(),
        "nodes": len(trace.nodes),
        "tasks": len(trace.tasks),
        "note": args.note,
        "stock": args.stock,
        "summary": summarize(outcomes),
        "runs": [o.as_dict() for o in outcomes],
        "complete": complete,
    }


def _save(record: dict[str, Any], path: Path) -> None:
    """Append ``record`` to ``path``, or replace the one of the same run (same "when")."""
    doc: dict[str, Any] = {"results": []}
    if path.exists():
        with contextlib.suppress(ValueError):
            doc = json.loads(path.read_text())
    results = [r for r in doc.get("results", []) if r.get("when") != record["when"]]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"results": [*results, record]}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
