"""A real, local Kubernetes control plane for tests and demos — like controller-runtime's envtest:
etcd + kube-apiserver (+ kube-controller-manager, + KWOK playing the kubelets, + the real
kube-scheduler), from the binaries
``hack/cluster/build.sh`` builds from pinned Go modules into ``~/.cache/kubesched/k8s-<version>/``.

Stdlib only, plus ``cryptography`` (a dev dependency) for the certificates. The pin, build script
and KWOK stages are read from the ``hack/cluster`` directory of a kubesched source tree (found
above this package or the working directory, or ``$KUBESCHED_CLUSTER_DIR``). As a command::

    python -m kubesched.testing.controlplane up --nodes 10 --dir /tmp/kc   # start, detach, print KUBECONFIG
    python -m kubesched.testing.controlplane down --dir /tmp/kc            # stop what `up` started
    python -m kubesched.testing.controlplane run --nodes 10                # foreground; Ctrl-C stops everything
    python -m kubesched.testing.controlplane run --no-controller-manager   # ... without kube-controller-manager
    python -m kubesched.testing.controlplane run --nodes 10 --scheduler    # ... plus the real kube-scheduler

Python API::

    with ControlPlane(workdir) as c:         # or c.start(with_controller_manager=True); ...; c.stop()
        c.create_nodes(3, cpu="4", memory="8Gi")
        c.create_pod("p", requests={"cpu": "100m"})
        sched = c.start_kube_scheduler()     # default KubeSchedulerConfiguration, leader election off
        c.wait_for(lambda: c.get("/api/v1/namespaces/default/pods/p")["spec"].get("nodeName"))

What is there and what is not (no kubelet):
  * RBAC is on (``--authorization-mode=Node,RBAC``); clients authenticate with certificates signed
    by the generated CA: admin (O=system:masters), system:kube-scheduler, or any identity through
    ``client_kubeconfig()``.
  * Admission plugins ``ServiceAccount`` and ``TaintNodesByCondition`` are disabled: the first
    would need the ``default`` ServiceAccount before the controller manager (if started) creates
    it, the second adds a ``node.kubernetes.io/not-ready`` taint that only the node lifecycle
    controller removes, which is not run.
  * KWOK plays the kubelets of the nodes annotated ``kwok.x-k8s.io/node: fake`` with kwokctl's
    default stages (node ready + lease heartbeat, pod ready/complete/delete): bound pods become
    Running and graceful deletions of their pods complete.
  * kube-controller-manager (``start_controller_manager()``, ``start(with_controller_manager=True)``;
    the CLI and the integration-test fixture start it) runs every default controller but node IPAM
    and node lifecycle (no pod CIDRs, no kubelets): PersistentVolume binding, namespace deletion,
    garbage collection (a pod whose ownerReference names an object that does not exist is deleted),
    ReplicaSet/Deployment/StatefulSet/Job, service accounts, PodDisruptionBudget status. Without
    it nothing garbage-collects: namespaces stay Terminating, ownerReferences do not cascade.
"""

from kubesched.testing.builders import KWOK_ANNOTATION
from kubesched.testing.controlplane.certs import PKI, write_kubeconfig
from kubesched.testing.controlplane.client import ApiError, KubeClient
from kubesched.testing.controlplane.cluster import ControlPlane
from kubesched.testing.controlplane.components import SERVICE_CLUSTER_IP_RANGE
from kubesched.testing.controlplane.paths import (
    BINARIES,
    BinariesUnavailable,
    binaries_up_to_date,
    cluster_dir,
    default_bin_dir,
    ensure_binaries,
    missing_binaries,
    read_versions,
)
from kubesched.testing.controlplane.processes import Component, ComponentDied, free_port, tail_file, wait_for

__all__ = [
    "BINARIES",
    "KWOK_ANNOTATION",
    "PKI",
    "SERVICE_CLUSTER_IP_RANGE",
    "ApiError",
    "BinariesUnavailable",
    "Component",
    "ComponentDied",
    "ControlPlane",
    "KubeClient",
    "binaries_up_to_date",
    "cluster_dir",
    "default_bin_dir",
    "ensure_binaries",
    "free_port",
    "missing_binaries",
    "read_versions",
    "tail_file",
    "wait_for",
    "write_kubeconfig",
]
