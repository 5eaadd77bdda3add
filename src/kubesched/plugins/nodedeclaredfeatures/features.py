"""The node-declared features a pod may need, and how a pod's spec implies them.

Port of k8s.io/component-helpers/nodedeclaredfeatures v0.37.1 (features/registry.go AllFeatures,
each feature's InferForScheduling). A kubelet lists the features it supports in
``status.declaredFeatures``; a pod whose spec uses one of them may only run on a node that lists
it. Of the nine features of v1.37.1 only these three are inferred for scheduling; the other six
(DRANodeAllocatableResources, DRAOptionalNodeOperations, ExtendWebSocketsToKubelet and the three
in-place resize ones) matter to pod updates or other components and never require a node here.
None has a MaxVersion, so the scheduler's version does not drop any.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Spec = Mapping[str, Any]


def _restart_all_containers(spec: Spec) -> bool:
    """restartallcontainers: a container or init container with a restartPolicyRules action
    RestartAllContainers."""
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            for rule in c.get("restartPolicyRules") or ():
                if rule.get("action") == "RestartAllContainers":
                    return True
    return False


def _user_namespaces_host_network(spec: Spec) -> bool:
    """usernamespaceshostnetwork: host network together with a user namespace (hostUsers: false)."""
    return bool(spec.get("hostNetwork")) and spec.get("hostUsers") is False


def _volume_bind_mount_options(spec: Spec) -> bool:
    """volumebindmountoptions: any volumeMount with bindMountOptions, in any kind of container."""
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(key) or ():
            for mount in c.get("volumeMounts") or ():
                if mount.get("bindMountOptions"):
                    return True
    return False


#: Feature name → whether a pod spec requires it, in the registry's (name) order.
FEATURES: dict[str, Callable[[Spec], bool]] = {
    "RestartAllContainersOnContainerExits": _restart_all_containers,
    "UserNamespacesHostNetworkSupport": _user_namespaces_host_network,
    "VolumeBindMountOptions": _volume_bind_mount_options,
}
_BIT = {name: 1 << i for i, name in enumerate(FEATURES)}


def infer_for_scheduling(spec: Spec) -> int:
    """The features the pod needs, as a bit set over FEATURES (upstream InferForPodScheduling)."""
    bits = 0
    for name, infer in FEATURES.items():
        if infer(spec):
            bits |= _BIT[name]
    return bits


def feature_bits(names: Iterable[Any]) -> int:
    """A node's declared features as a bit set (upstream TryMap: unknown names are ignored)."""
    bits = 0
    for name in names:
        bits |= _BIT.get(name, 0) if isinstance(name, str) else 0
    return bits


def feature_names(bits: int) -> list[str]:
    return [name for name, bit in _BIT.items() if bits & bit]
