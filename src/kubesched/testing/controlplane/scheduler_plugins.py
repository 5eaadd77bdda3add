"""scheduler-plugins' kube-scheduler with Coscheduling on the control plane: the oracle for gangs.

The binary is ``sigs.k8s.io/scheduler-plugins/cmd/scheduler`` (kube-scheduler with the
out-of-tree plugins registered), built from its Go module by
``hack/cluster/extras/scheduler-plugins.sh`` as ``kube-scheduler-plugins`` next to the other
binaries (version: ``SCHEDULER_PLUGINS_VERSION`` in ``hack/cluster/versions.env``).

    from kubesched.testing.controlplane.scheduler_plugins import start_coscheduling_scheduler
    comp = start_coscheduling_scheduler(cp, "gang-oracle", permit_waiting_time_seconds=10)

What it sets up, as scheduler-plugins' ``as-a-second-scheduler`` chart and
``manifests/coscheduling`` do: the PodGroup CRD (``deploy/crds``, the same schema as
scheduler-plugins' ``manifests/coscheduling/crd.yaml``), RBAC for ``system:kube-scheduler`` on
PodGroups, and a profile with Coscheduling at every point it implements (``multiPoint``) and as
the only QueueSort.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kubesched.testing.controlplane.client import ApiError
from kubesched.testing.controlplane.paths import BinariesUnavailable, cluster_dir
from kubesched.testing.controlplane.processes import Component

if TYPE_CHECKING:
    from kubesched.testing.controlplane.cluster import ControlPlane

__all__ = [
    "BINARY",
    "coscheduling_profile",
    "grant_pod_group_access",
    "install_pod_group_crd",
    "start_coscheduling_scheduler",
]

BINARY = "kube-scheduler-plugins"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD_NAME = "podgroups.scheduling.x-k8s.io"
RBAC_NAME = "kubesched-test:scheduler-plugins"


def coscheduling_profile(
    scheduler_name: str, *, permit_waiting_time_seconds: int = 60, pod_group_backoff_seconds: int = 0
) -> dict[str, Any]:
    """A profile as scheduler-plugins' ``manifests/coscheduling/scheduler-config.yaml``: the
    default plugins, plus Coscheduling (multiPoint) as the only QueueSort."""
    return {
        "schedulerName": scheduler_name,
        "plugins": {
            "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
            "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        },
        "pluginConfig": [
            {
                "name": "Coscheduling",
                "args": {
                    "permitWaitingTimeSeconds": permit_waiting_time_seconds,
                    "podGroupBackoffSeconds": pod_group_backoff_seconds,
                },
            }
        ],
    }


def install_pod_group_crd(cp: ControlPlane, timeout: float = 30.0) -> None:
    """Create the PodGroup CRD (if absent) from ``deploy/crds`` and wait until it is Established."""
    path = cluster_dir().parent.parent / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
    crd = yaml.safe_load(path.read_text())
    try:
        cp.api("POST", CRD_PATH, crd)
    except ApiError as e:
        if e.status != 409:
            raise

    def established() -> bool:
        got = cp.get(f"{CRD_PATH}/{CRD_NAME}")
        conds = got.get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    cp.wait_for(established, timeout, 0.2, "PodGroup CRD established")


def grant_pod_group_access(cp: ControlPlane, user: str = "system:kube-scheduler") -> None:
    """What the chart's ClusterRole adds for Coscheduling: PodGroups and their status."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": RBAC_NAME},
        "rules": [
            {
                "apiGroups": ["scheduling.x-k8s.io"],
                "resources": ["podgroups", "podgroups/status"],
                "verbs": ["get", "list", "watch", "update", "patch"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": RBAC_NAME},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RBAC_NAME},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    for path, body in (
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
    ):
        try:
            cp.api("POST", path, body)
        except ApiError as e:
            if e.status != 409:
                raise


def start_coscheduling_scheduler(
    cp: ControlPlane,
    scheduler_names: str | Sequence[str],
    *,
    permit_waiting_time_seconds: int = 60,
    pod_group_backoff_seconds: int = 0,
    config_path: Path | None = None,
    timeout: float = 60.0,
) -> Component:
    """Start scheduler-plugins' scheduler with one Coscheduling profile per name (CRD and RBAC
    installed first) and wait for its /healthz. Stop it with ``cp.stop_component``."""
    binary = cp.bin_dir / BINARY
    if not os.access(binary, os.X_OK):
        raise BinariesUnavailable(f"{binary} is missing: run hack/cluster/build.sh (extras/scheduler-plugins.sh)")
    names = [scheduler_names] if isinstance(scheduler_names, str) else list(scheduler_names)
    install_pod_group_crd(cp)
    grant_pod_group_access(cp)
    profiles = [
        coscheduling_profile(
            n,
            permit_waiting_time_seconds=permit_waiting_time_seconds,
            pod_group_backoff_seconds=pod_group_backoff_seconds,
        )
        for n in names
    ]
    cfg = cp.write_scheduler_config(
        config_path or cp.dir / f"{BINARY}-{names[0]}.yaml",
        scheduler_names=names,
        extra={"profiles": profiles, "clientConnection": {"kubeconfig": str(cp.scheduler_kubeconfig),
                                                          "qps": 200, "burst": 400}},
    )
    return cp.start_kube_scheduler(cfg, binary=BINARY, timeout=timeout)
