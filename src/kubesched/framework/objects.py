"""Cluster objects a plugin reads besides nodes and pods: declared once, on the plugin class.

A plugin lists the kinds it needs in ``object_kinds`` (upstream plugins ask the Handle's
SharedInformerFactory for an informer instead; scheduler-plugins' Coscheduling sets up its own
PodGroup informer). Every shell reads that one declaration and does the rest — the simulator
loads those kinds from a cluster dump, the live scheduler and the extender run an informer for
each and grant themselves RBAC for it — and ``handle.objects(kind)`` answers the same way
everywhere. No shell names a plugin.

A plugin that owns the status of an object (``writes_status=True``) reports changed status fields
from ``Plugin.status_updates()``; the live shell merge-patches them into the status subresource.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import quote

if TYPE_CHECKING:
    from kubesched.snapshot.pod import PodInfo


@dataclass(frozen=True, slots=True)
class ObjectKind:
    """One API resource: ``ObjectKind("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups")``."""

    kind: str
    group: str
    version: str
    resource: str
    namespaced: bool = True
    #: The plugin writes this kind's ``status`` subresource (the live leader patches it), or the
    #: core does for it (the PodGroup cycle's ``PodGroupInitiallyScheduled`` condition).
    writes_status: bool = False
    #: Verbs the plugin uses on the objects themselves besides list/watch (e.g. ``("update",)``
    #: for VolumeBinding's PreBind, which updates PVs and PVCs through an :class:`ObjectWriter`).
    writes: tuple[str, ...] = ()
    #: Verbs the plugin uses on the ``status`` subresource itself, synchronously, through a
    #: :class:`StatusWriter` (e.g. ``("update",)`` for DynamicResources' PreBind, which PUTs a
    #: ResourceClaim's allocation as kube-scheduler does); ``writes_status`` grants ``patch``.
    status_writes: tuple[str, ...] = ()
    #: Verbs on subresources the apiserver authorizes a write against, as ``(subresource, verbs)``
    #: pairs: e.g. ``(("binding", ("update",)),)`` for ResourceClaims, whose ``status.allocation``
    #: and ``status.reservedFor`` v1.37 lets only a caller with ``update`` on the synthetic
    #: ``resourceclaims/binding`` change (pkg/registry/resource/utils.go AuthorizedForBinding).
    subresource_writes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Checks one object as the plugin will read it; raises ValueError naming the field (without
    #: the object: callers prefix file/object). The simulator runs it on every loaded object.
    validate: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False, repr=False)
    #: Whether a pod (raw, after Priority admission) needs objects of this kind, e.g. a pod with a
    #: claim needs PVCs. A cluster dump holding such pods but no object of the kind gets one
    #: warning, ``no <kind>s in the input: <when_missing>`` (``kubectl get`` lists only the kinds
    #: it is asked for, so the kind was most likely not dumped).
    needed_by: Callable[[dict[str, Any]], bool] | None = field(default=None, compare=False, repr=False)
    #: What the plugin does without objects of the kind, for that warning.
    when_missing: str = field(default="", compare=False)
    #: The cluster controller (not the scheduler) that makes objects of this kind for pods, for
    #: the simulator, which runs no controllers: called with each pod as it enters the simulated
    #: cluster (raw) and the stored objects by kind; returns what it would create and the pod
    #: status it would write. E.g. kube-controller-manager's resourceclaim controller stamping a
    #: ResourceClaim from each ResourceClaimTemplate a pod names.
    pod_controller: PodController | None = field(default=None, compare=False, repr=False)
    #: The name shells and ``handle.objects(name)`` know the kind by, and the resource of its
    #: ClusterEvents; defaults to ``kind``. Two API groups that both define a kind need one of them
    #: qualified: the Workload API's PodGroup is ``PodGroup.scheduling.k8s.io`` beside
    #: scheduler-plugins' ``PodGroup``.
    name: str = ""
    #: The feature gate under which the apiserver serves the kind (e.g. ``CompositePodGroup`` for
    #: ``scheduling.k8s.io/v1alpha3`` CompositePodGroups): no shell reads it while the gate is off.
    feature_gate: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.kind)

    @property
    def api_version(self) -> str:
        """As in an object's ``apiVersion``: ``v1`` for the core group, else ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def collection_path(self) -> str:
        """The list/watch path across all namespaces."""
        return self.collection_path_in(None)

    def collection_path_in(self, namespace: str | None) -> str:
        """The list/watch path in one namespace (None, or a cluster-scoped kind: all of them)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is None or not self.namespaced:
            return f"{prefix}/{self.resource}"
        return f"{prefix}/namespaces/{quote(namespace, safe='')}/{self.resource}"

    def object_path(self, key: str, subresource: str = "") -> str:
        """The path of one object by its key (``namespace/name``, or ``name`` for cluster-scoped)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced:
            namespace, _, name = key.partition("/")
            path = f"{prefix}/namespaces/{quote(namespace, safe='')}/{self.resource}/{quote(name, safe='')}"
        else:
            path = f"{prefix}/{self.resource}/{quote(key, safe='')}"
        return f"{path}/{subresource}" if subresource else path


@runtime_checkable
class ObjectWriter(Protocol):
    """Optional, for plugins that write objects of a kind they declare with ``writes``: a shell's
    ClusterClient that also offers ``update_object`` (the live client and the simulator's do).
    Upstream plugins call the clientset (``Update``) directly."""

    async def update_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the object (an HTTP PUT, ``metadata.resourceVersion`` as the precondition) and
        return it as stored. Raises on a conflict or another API error."""
        ...


@runtime_checkable
class StatusWriter(Protocol):
    """Optional, for plugins that write the status of a kind they declare with ``status_writes``
    in the cycle itself (not through the leader's periodic merge-patches, ``status_updates``): a
    shell's ClusterClient that also offers ``update_object_status`` (the live client and the
    simulator's do). Upstream plugins call the clientset (``UpdateStatus``) directly."""

    async def update_object_status(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the object's ``status`` (an HTTP PUT on the status subresource,
        ``metadata.resourceVersion`` as the precondition) and return the object as stored. Raises
        on a conflict or another API error."""
        ...


@runtime_checkable
class ObjectCreator(Protocol):
    """Optional, for plugins that create and delete objects of a kind they declare with ``writes``
    (``create``, ``delete``): e.g. DynamicResources' claim for extended resources backed by DRA,
    which kube-scheduler creates at PreBind and deletes when the attempt fails. The live client
    and the simulator's offer it. Upstream plugins call the clientset (``Create``, ``Delete``)."""

    async def create_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Create the object (an HTTP POST; ``metadata.generateName`` gives it a name when
        ``metadata.name`` is empty) and return it as stored. Raises on an API error."""
        ...

    async def delete_object(self, kind: ObjectKind, key: str) -> None:
        """Delete the object by key (``namespace/name``); one already gone is not an error."""
        ...


@runtime_checkable
class PodStatusPatcher(Protocol):
    """Optional, for plugins that set a field of a pod's ``status`` at PreBind (DynamicResources:
    ``status.extendedResourceClaimStatus``, as kube-scheduler's ``PatchPodStatus``). The live client
    merge-patches ``pods/status``; the simulator's updates its stored pod."""

    async def patch_pod_status(self, pod: PodInfo, status: Mapping[str, Any]) -> None:
        """Merge ``status`` into the pod's status. Raises PodGoneError when the pod is gone."""
        ...


#: Pods: a plugin may report an Event regarding a pod (``Plugin.object_events`` with this kind's
#: name, key ``namespace/name``), e.g. DynamicResources' BindingConditionsPending.
POD_KIND = ObjectKind("Pod", "", "v1", "pods")


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    """An Event about an object of a declared kind (``Plugin.object_events``), e.g. a PodGroup's
    gang-level failure; the live leader posts it as an ``events.k8s.io/v1`` Event regarding it."""

    kind: str
    #: ``namespace/name`` (``name`` for a cluster-scoped kind).
    key: str
    uid: str
    reason: str
    note: str
    event_type: str = "Warning"
    action: str = "Scheduling"
    #: ``reportingController``: the profile's scheduler name (``handle.profile_name``).
    controller: str = ""


@dataclass(frozen=True, slots=True)
class PodControllerResult:
    """What a pod controller did for one pod: objects of its kind created (raw, with their
    names), and fields of the pod's ``status`` set (empty: the pod is unchanged)."""

    created: tuple[dict[str, Any], ...] = ()
    pod_status: Mapping[str, Any] = field(default_factory=dict)


#: ``controller(pod, objects)``: ``objects(kind)`` is the stored objects of a kind, by key.
PodController = Callable[[dict[str, Any], Callable[[str], Mapping[str, dict[str, Any]]]], PodControllerResult]


class ObjectKindConflictError(ValueError):
    """Two plugins declare the same kind differently (e.g. other versions)."""


def object_key(raw: Mapping[str, Any], namespaced: bool = True) -> str:
    """``namespace/name`` (``default`` when a namespaced object has none), or ``name``."""
    meta = raw.get("metadata") or {}
    name = str(meta.get("name", ""))
    if not namespaced:
        return name
    return f"{meta.get('namespace') or 'default'}/{name}"


def merge_object_kinds(declared: Iterable[ObjectKind]) -> list[ObjectKind]:
    """One entry per kind name, in first-declared order. Two declarations of one name must name the
    same resource; ``writes_status`` is true if any plugin writes it."""
    merged: dict[str, ObjectKind] = {}
    for ok in declared:
        have = merged.get(ok.name)
        if have is None:
            merged[ok.name] = ok
            continue
        if (have.group, have.version, have.resource, have.namespaced) != (
            ok.group, ok.version, ok.resource, ok.namespaced
        ):
            raise ObjectKindConflictError(
                f"kind {ok.name!r} is declared as {have.api_version} {have.resource} and as "
                f"{ok.api_version} {ok.resource}"
            )
        if ok.writes_status and not have.writes_status:
            merged[ok.name] = have = replace(have, writes_status=True)
        if not set(ok.writes) <= set(have.writes):
            merged[ok.name] = have = replace(have, writes=tuple(sorted({*have.writes, *ok.writes})))
        if not set(ok.status_writes) <= set(have.status_writes):
            merged[ok.name] = have = replace(
                have, status_writes=tuple(sorted({*have.status_writes, *ok.status_writes})))
        if not set(ok.subresource_writes) <= set(have.subresource_writes):
            merged[ok.name] = replace(
                have, subresource_writes=tuple(sorted({*have.subresource_writes, *ok.subresource_writes})))
    return list(merged.values())


def kinds_of_plugins(plugin_classes: Iterable[type[Any]]) -> list[ObjectKind]:
    """The merged ``object_kinds`` of these plugin classes."""
    return merge_object_kinds(k for cls in plugin_classes for k in getattr(cls, "object_kinds", ()))


def gated_kinds(kinds: Iterable[ObjectKind], feature_gates: Mapping[str, bool]) -> list[ObjectKind]:
    """The kinds whose feature gate (if any) is on."""
    return [k for k in kinds if not k.feature_gate or feature_gates.get(k.feature_gate)]


def kinds_by_name(kinds: Sequence[ObjectKind]) -> dict[str, ObjectKind]:
    return {k.name: k for k in kinds}
