"""The PodGroup custom resource (scheduling.x-k8s.io/v1alpha1), parsed once per object version."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesched.api.quantity import QuantityError, milli_value, value
from kubesched.framework.objects import ObjectKind
from kubesched.plugins.helpers.pod_group_specs import PodGroupSpecError as PodGroupSpecError
from kubesched.plugins.helpers.pod_group_specs import validate_pod_group_with
from kubesched.snapshot.pod import PodInfo, parse_timestamp

API_GROUP = "scheduling.x-k8s.io"
API_VERSION = f"{API_GROUP}/v1alpha1"
KIND = "PodGroup"
#: Pods join a group with this label; its value is the PodGroup's name in the pod's namespace.
POD_GROUP_LABEL = f"{API_GROUP}/pod-group"


@dataclass(frozen=True, slots=True)
class PodGroup:
    key: str
    namespace: str
    name: str
    min_member: int
    #: spec.minResources: resource name → amount (cpu in millicores, others in units).
    min_resources: dict[str, int]
    #: spec.scheduleTimeoutSeconds (None or 0: the plugin's permitWaitingTimeSeconds).
    schedule_timeout_seconds: int | None
    creation_ts: float
    raw: dict[str, Any]


def group_key(pod: PodInfo) -> str | None:
    """``namespace/name`` of the pod's PodGroup, or None for a pod without the label."""
    name = pod.labels.get(POD_GROUP_LABEL)
    return f"{pod.namespace}/{name}" if name else None


def parse_pod_group(raw: dict[str, Any]) -> PodGroup:
    meta = raw.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    key = f"{namespace}/{name}"
    spec = raw.get("spec") or {}
    if not isinstance(spec, dict):
        raise PodGroupSpecError(f"PodGroup {key}: spec must be an object")
    min_member = spec.get("minMember") or 0
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 0:
        raise PodGroupSpecError(f"PodGroup {key}: spec.minMember must be a non-negative integer, got {min_member!r}")
    resources: dict[str, int] = {}
    raw_res = spec.get("minResources") or {}
    if not isinstance(raw_res, dict):
        raise PodGroupSpecError(f"PodGroup {key}: spec.minResources must be a map of quantities")
    for res, q in raw_res.items():
        try:
            resources[str(res)] = milli_value(q) if res == "cpu" else value(q)
        except QuantityError as e:
            raise PodGroupSpecError(f"PodGroup {key}: spec.minResources.{res}: {e}") from None
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0):
        raise PodGroupSpecError(
            f"PodGroup {key}: spec.scheduleTimeoutSeconds must be a non-negative integer, got {timeout!r}"
        )
    try:
        created = parse_timestamp(meta.get("creationTimestamp"))
    except ValueError:
        raise PodGroupSpecError(
            f"PodGroup {key}: metadata.creationTimestamp {meta.get('creationTimestamp')!r} is not RFC 3339"
        ) from None
    return PodGroup(key, namespace, name, int(min_member), resources, timeout, created, raw)


def validate_pod_group(raw: dict[str, Any]) -> None:
    """Parse ``raw`` as the plugin will; the error names the field, not the object (the caller does)."""
    validate_pod_group_with(parse_pod_group, raw)


def names_a_group(raw_pod: dict[str, Any]) -> bool:
    """Whether a raw pod carries the PodGroup label."""
    return bool(((raw_pod.get("metadata") or {}).get("labels") or {}).get(POD_GROUP_LABEL))


#: Declared by Coscheduling: read in every shell, status written by the live leader.
POD_GROUP_KIND = ObjectKind(
    KIND, API_GROUP, "v1alpha1", "podgroups", namespaced=True, writes_status=True, validate=validate_pod_group,
    needed_by=names_a_group, when_missing="pods that name a group wait for it",
)
