"""The ``scheduler-plugins`` contender of the live ``Gangs`` workload (bench/live.py): kube-scheduler
with scheduler-plugins' Coscheduling — the real plugin, ``sigs.k8s.io/scheduler-plugins`` cmd/scheduler
built from its Go module by hack/cluster/extras/scheduler-plugins.sh as ``kube-scheduler-plugins``.

It runs the same policy as kubesched in that workload: the default plugins plus Coscheduling
(scheduler-plugins' manifests/coscheduling profile: multiPoint, the only QueueSort) with the
Coscheduling args of kubesched's profile (examples/coscheduling.yaml). Identity, qps/burst, the
pods and the measurement are the workload's, as for every other contender.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.testing.controlplane import ControlPlane
from kubesched.testing.controlplane.scheduler_plugins import BINARY, coscheduling_profile

if TYPE_CHECKING:
    from bench.live import Running, Workload

CONTENDER = "scheduler-plugins"


def coscheduling_args(profile: dict[str, Any]) -> dict[str, Any]:
    """The Coscheduling args of a kubesched profile (its pluginConfig), {} when none."""
    for pc in profile.get("pluginConfig") or []:
        if pc.get("name") == "Coscheduling":
            return dict(pc.get("args") or {})
    return {}


def start_scheduler_plugins(c: ControlPlane, wl: Workload, qps: float, burst: int, workdir: Path) -> Running:
    from bench import live

    args = coscheduling_args(wl.kubesched_profile)
    profile = coscheduling_profile(
        live.DEFAULT_NAME,
        permit_waiting_time_seconds=int(args.get("permitWaitingTimeSeconds", 60)),
        pod_group_backoff_seconds=int(args.get("podGroupBackoffSeconds", 0)),
    )
    cfg = live.scheduler_config(c, workdir / "scheduler-plugins.yaml", profile, qps, burst)
    comp = c.start_kube_scheduler(cfg, extra_args=["--v=0"], binary=BINARY)
    url = f"https://127.0.0.1:{live._arg(comp, '--secure-port')}/metrics"
    return live.Running(CONTENDER, {"scheduler": comp}, url, c.pki.admin_tls(), live.DEFAULT_NAME)
