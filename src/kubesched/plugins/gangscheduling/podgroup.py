"""The Workload API's PodGroup (``scheduling.k8s.io/v1beta1``), as GangScheduling reads it.

staging/src/k8s.io/api/scheduling/v1beta1/types.go (v1.37.1): a PodGroup's
``spec.schedulingPolicy`` is ``basic: {}`` (no gang constraint) or ``gang: {minCount: N}``; a pod
joins a group through ``spec.schedulingGroup.podGroupName`` (core/v1 PodSchedulingGroup), a group
in the pod's namespace. Workloads (the templates PodGroups are made from) are declared so every
shell reads them; GangScheduling itself reads only PodGroups, as upstream's plugin does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesched.framework.objects import ObjectKind
from kubesched.framework.podgroup import COMPOSITE_POD_GROUP as COMPOSITE_POD_GROUP_GATE
from kubesched.framework.podgroup import COMPOSITE_POD_GROUP_OBJECTS, POD_GROUP_OBJECTS, WORKLOAD_OBJECTS
from kubesched.framework.podgroup import group_key as group_key
from kubesched.framework.podgroup import group_name as group_name
from kubesched.plugins.helpers.pod_group_specs import PodGroupSpecError as PodGroupSpecError
from kubesched.plugins.helpers.pod_group_specs import validate_pod_group_with

API_GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
#: The name the shells and ``handle.objects`` know the kind by: ``PodGroup`` is scheduler-plugins'
#: (Coscheduling), so this one is qualified by its API group.
POD_GROUP = POD_GROUP_OBJECTS
WORKLOAD = WORKLOAD_OBJECTS
#: CompositePodGroups are served by ``scheduling.k8s.io/v1alpha3`` only (alpha, CompositePodGroup gate).
COMPOSITE_VERSION = "v1alpha3"
COMPOSITE_POD_GROUP = COMPOSITE_POD_GROUP_OBJECTS


@dataclass(frozen=True, slots=True)
class PodGroup:
    key: str
    name: str
    #: spec.schedulingPolicy.gang.minCount; None for the ``basic`` policy.
    gang_min_count: int | None

    @property
    def min_count(self) -> int:
        """getMinCount: a basic group counts as a gang of one."""
        return self.gang_min_count if self.gang_min_count is not None else 1


def parse_pod_group(raw: dict[str, Any]) -> PodGroup:
    meta = raw.get("metadata") or {}
    name = str(meta.get("name") or "")
    key = f"{meta.get('namespace') or 'default'}/{name}"
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise PodGroupSpecError(f"PodGroup {key}: spec must be an object")
    policy = spec.get("schedulingPolicy")
    if not isinstance(policy, dict):
        raise PodGroupSpecError(f"PodGroup {key}: spec.schedulingPolicy must be an object with basic or gang")
    gang = policy.get("gang")
    if gang is None:
        if policy.get("basic") is None:
            raise PodGroupSpecError(f"PodGroup {key}: spec.schedulingPolicy must set basic or gang")
        return PodGroup(key, name, None)
    if policy.get("basic") is not None:
        raise PodGroupSpecError(f"PodGroup {key}: spec.schedulingPolicy may set only one of basic and gang")
    min_count = gang.get("minCount") if isinstance(gang, dict) else None
    # validation.go: minCount must be greater than zero.
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        raise PodGroupSpecError(
            f"PodGroup {key}: spec.schedulingPolicy.gang.minCount must be a positive integer, got {min_count!r}"
        )
    return PodGroup(key, name, min_count)


def validate_pod_group(raw: dict[str, Any]) -> None:
    """Parse ``raw`` as the plugin will; the error names the field, not the object (the caller does)."""
    validate_pod_group_with(parse_pod_group, raw)


def names_a_group(raw_pod: dict[str, Any]) -> bool:
    """Whether a raw pod joins a PodGroup (``spec.schedulingGroup.podGroupName``)."""
    group = (raw_pod.get("spec") or {}).get("schedulingGroup")
    return isinstance(group, dict) and bool(group.get("podGroupName"))


@dataclass(frozen=True, slots=True)
class CompositePodGroup:
    key: str
    name: str
    #: spec.schedulingPolicy.gang.minGroupCount; None for the ``basic`` policy.
    gang_min_group_count: int | None

    @property
    def min_count(self) -> int:
        """getMinCount: a basic composite needs one child placed."""
        return self.gang_min_group_count if self.gang_min_group_count is not None else 1


def parse_composite_pod_group(raw: dict[str, Any]) -> CompositePodGroup:
    """A CompositePodGroup (scheduling/v1alpha3 types.go): ``schedulingPolicy`` is ``basic: {}``
    or ``gang: {minGroupCount: N}`` (N >= 1)."""
    meta = raw.get("metadata") or {}
    name = str(meta.get("name") or "")
    key = f"{meta.get('namespace') or 'default'}/{name}"
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise PodGroupSpecError(f"CompositePodGroup {key}: spec must be an object")
    policy = spec.get("schedulingPolicy")
    if not isinstance(policy, dict) or (policy.get("gang") is None) == (policy.get("basic") is None):
        raise PodGroupSpecError(
            f"CompositePodGroup {key}: spec.schedulingPolicy must set exactly one of basic and gang")
    gang = policy.get("gang")
    if gang is None:
        return CompositePodGroup(key, name, None)
    count = gang.get("minGroupCount") if isinstance(gang, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise PodGroupSpecError(
            f"CompositePodGroup {key}: spec.schedulingPolicy.gang.minGroupCount must be a positive integer, "
            f"got {count!r}")
    return CompositePodGroup(key, name, count)


def validate_composite_pod_group(raw: dict[str, Any]) -> None:
    validate_pod_group_with(parse_composite_pod_group, raw)


#: ``writes_status``: the PodGroup cycle writes its ``PodGroupInitiallyScheduled`` condition
#: (framework/podgroup_condition.py; the live shell patches ``podgroups/status``, as upstream).
POD_GROUP_KIND = ObjectKind(
    "PodGroup", API_GROUP, VERSION, "podgroups", namespaced=True, writes_status=True, validate=validate_pod_group,
    needed_by=names_a_group, when_missing="pods that name a group wait for it at PreEnqueue", name=POD_GROUP,
)
WORKLOAD_KIND = ObjectKind("Workload", API_GROUP, VERSION, "workloads", namespaced=True, name=WORKLOAD)
COMPOSITE_POD_GROUP_KIND = ObjectKind(
    "CompositePodGroup", API_GROUP, COMPOSITE_VERSION, "compositepodgroups", namespaced=True,
    validate=validate_composite_pod_group, name=COMPOSITE_POD_GROUP, feature_gate=COMPOSITE_POD_GROUP_GATE,
)
