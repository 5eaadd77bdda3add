"""``python -m kubesched.testing.controlplane``: start a local control plane in the foreground
(``run``), detached (``up``/``down``), or only build its binaries (``build``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from kubesched.testing.controlplane.cluster import ControlPlane
from kubesched.testing.controlplane.node import NodeUnavailable, RealNode
from kubesched.testing.controlplane.paths import ensure_binaries
from kubesched.testing.controlplane.processes import terminate_group

__all__ = ["main"]

PROG = "python -m kubesched.testing.controlplane"
DESCRIPTION = (
    "A real, local Kubernetes control plane for tests and demos: etcd + kube-apiserver + kube-controller-manager "
    "(+ KWOK, + the real kube-scheduler), built from Go modules by hack/cluster/build.sh."
)


def _down(directory: Path) -> int:
    state_file = directory / "cluster.json"
    if not state_file.exists():
        print(f"controlplane: nothing running in {directory} (no cluster.json)")
        return 0
    state = json.loads(state_file.read_text())
    for p in reversed(state.get("processes", [])):
        pid = int(p["pid"])
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue  # gone already
        if os.path.basename(exe) != os.path.basename(p["exe"]):
            continue  # pid reused by something else: not ours
        print(f"controlplane: stopping {p['name']} (pid {pid})")
        terminate_group(pid, None, 10.0)
    state_file.unlink()
    return 0


def _print_banner(c: ControlPlane, scheduler: bool) -> None:
    print(f"controlplane: kubernetes {c.versions['K8S_VERSION']} at {c.server} (etcd {c.etcd_url})")
    print(f"controlplane: logs in {c.logs_dir}")
    if c.controller_manager is not None:
        print("controlplane: kube-controller-manager running (PV binding, namespaces, garbage collection, workloads)")
    if scheduler:
        print("controlplane: kube-scheduler running (schedulerName default-scheduler)")
    print(f"controlplane: kubeconfig {c.kubeconfig}")
    print(f"export KUBECONFIG={c.kubeconfig}")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, help_ in (
        ("up", "start a control plane and leave it running (stop it with `down`)"),
        ("run", "start a control plane in the foreground; Ctrl-C stops everything"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--dir", type=Path, default=None, help="cluster directory (default: a new temp dir)")
        p.add_argument("--nodes", type=int, default=10, help="number of KWOK nodes to create (default 10)")
        p.add_argument("--cpu", default="32")
        p.add_argument("--memory", default="256Gi")
        p.add_argument("--pods", default="110")
        p.add_argument("--no-kwok", action="store_true", help="do not start KWOK")
        p.add_argument(
            "--no-controller-manager", action="store_true", help="do not start kube-controller-manager"
        )
        p.add_argument(
            "--scheduler",
            nargs="?",
            const="",
            default=None,
            metavar="CONFIG",
            help="also start the real kube-scheduler (optionally with this KubeSchedulerConfiguration)",
        )
        p.add_argument("--no-build", action="store_true", help="fail instead of running build.sh")
        if name == "run":  # its processes stop with this one (`down` knows only the control plane's)
            p.add_argument(
                "--real-node", action="store_true",
                help="also run a real node (containerd + kubelet + kube-proxy; root, Debian's containerd, "
                "runc, containernetworking-plugins) and kube-scheduler, so `kubectl apply -k deploy/scheduler` "
                "runs kubesched in the cluster",
            )
        p.add_argument(
            "--foreground", action="store_true", help="stay in the foreground until Ctrl-C (what `run` does)"
        )
    p = sub.add_parser("down", help="stop the control plane started by `up`")
    p.add_argument("--dir", type=Path, required=True)
    sub.add_parser("build", help="build the binaries (hack/cluster/build.sh)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "foreground", False):
        args.cmd = "run"

    if args.cmd == "down":
        return _down(args.dir)
    if args.cmd == "build":
        ensure_binaries()
        return 0

    ensure_binaries(build=not args.no_build)
    if args.dir is not None and (args.dir / "cluster.json").exists():
        print(f"controlplane: {args.dir} has a running cluster; run `down --dir {args.dir}` first", file=sys.stderr)
        return 1
    if args.dir is not None and (args.dir / "etcd-data").exists():
        shutil.rmtree(args.dir / "etcd-data")  # a fresh store every time: ports and certs change
    real_node = getattr(args, "real_node", False)
    c = ControlPlane(args.dir, die_with_parent=args.cmd == "run", real_nodes=real_node)
    node: RealNode | None = None
    t0 = time.monotonic()
    try:
        c.start(with_kwok=not args.no_kwok, with_controller_manager=not args.no_controller_manager)
        if args.nodes:
            c.create_nodes(args.nodes, cpu=args.cpu, memory=args.memory, pods=args.pods, kwok=not args.no_kwok)
        if args.scheduler is not None or real_node:  # a real node's pods need the default scheduler
            c.start_kube_scheduler(args.scheduler or None)
        if real_node:
            node = RealNode(c).start()
            print(f"controlplane: real node {node.name} Ready; import an image (docs/deploy.md) with:\n"
                  f"  ctr --address {node.containerd_socket} -n k8s.io images import "
                  "--base-name docker.io/library/kubesched out/image/kubesched-image.tar")
    except NodeUnavailable as e:
        c.stop()
        print(f"controlplane: cannot run a real node here: {e}", file=sys.stderr)
        return 1
    except BaseException:
        print(c.logs(30), file=sys.stderr)
        if node is not None:
            node.stop()
        c.stop()
        raise
    print(f"controlplane: up in {time.monotonic() - t0:.1f}s with {args.nodes} nodes")
    _print_banner(c, args.scheduler is not None or real_node)
    if args.cmd == "up":
        c.detach()
        print(f"controlplane: stop with: {PROG} down --dir {c.dir}")
        return 0

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    print("controlplane: running; press Ctrl-C to stop")
    try:
        while not stop.wait(1.0):
            for comp in c.running:
                if not comp.alive():
                    print(f"controlplane: {comp.name} exited unexpectedly:\n{comp.tail(40)}", file=sys.stderr)
                    stop.set()
    finally:
        print("controlplane: stopping")
        if node is not None:
            node.stop()
        c.stop()
    return 0
