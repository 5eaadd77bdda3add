"""NodeVolumeLimits: no more CSI volumes on a node than its CSINode allows per driver.

Port of pkg/scheduler/framework/plugins/nodevolumelimits/csi.go (CSILimits, Kubernetes v1.37.1):

* PreFilter: Skip for a pod without ``persistentVolumeClaim``/``ephemeral`` volumes;
* Filter: the pod's new volumes (claim → bound PV's ``spec.csi`` driver and volume handle, or for
  an unbound claim its class's provisioner and a per-claim placeholder handle) are added to the
  volumes already used on the node — by the pods there and by VolumeAttachments to it, each
  unique volume counted once — and compared per driver with the CSINode's
  ``spec.drivers[].allocatable.count``: ``node(s) exceed max volume count`` (Unschedulable). With
  VolumeLimitScaling (beta, on in 1.37) a driver whose CSIDriver sets
  ``preventPodSchedulingIfMissing`` must be on the node's CSINode: ``<driver> CSI driver is not
  installed on the node`` (Unschedulable). A missing claim of the pod:
  ``looking up PVC ns/x: persistentvolumeclaim "x" not found`` (UnschedulableAndUnresolvable);
  a node without a CSINode has no limits.

Kept incrementally: per node, the placed pods that use claims (a pod observer on the node table),
so a cycle resolves only those pods' volumes on the candidate nodes.

Not ported: in-tree volumes migrated to CSI (csi-translation-lib: the inline and PV sources of the
removed cloud providers count as no CSI volume here), queueing hints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import FilterPlugin, PreFilterPlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import POD, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.volumebinding.storage import (
    CSI_DRIVER_KIND,
    CSI_NODE_KIND,
    PV_KIND,
    PVC_KIND,
    PVC_RESOURCE,
    STORAGE_CLASS_KIND,
    VOLUME_ATTACHMENT_KIND,
    claim_class,
    not_found,
    pod_volumes,
    volume_is_for_pod,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

NAME = "NodeVolumeLimits"
STATE_KEY = "PreFilter" + NAME
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
#: Upstream prefixes placeholder handles of unbound claims with rand.String(32) per plugin; any
#: value that no real handle uses will do, and a fixed one keeps simulations deterministic.
_PLACEHOLDER_PREFIX = "kubesched-unbound-claim-placeholder"


class _LookupError(Exception):
    def __init__(self, message: str, not_found: bool) -> None:
        super().__init__(message)
        self.not_found = not_found


@dataclass(slots=True)
class _State:
    #: The pod's volumes: unique name (driver/handle) -> driver; None until the first Filter.
    new_volumes: dict[str, str] | None = None
    error: Status | None = None
    #: node name -> {unique name: driver} of its VolumeAttachments (built once per cycle).
    attachments: dict[str, dict[str, str]] | None = None
    #: pod uid -> its volumes (resolved once per cycle).
    resolved: dict[str, dict[str, str]] = field(default_factory=dict)

    def clone(self) -> _State:
        return self


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin):
    name: ClassVar[str] = NAME
    object_kinds = (PVC_KIND, PV_KIND, STORAGE_CLASS_KIND, CSI_NODE_KIND, CSI_DRIVER_KIND, VOLUME_ATTACHMENT_KIND)

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (csi.go): the pod's volume sources."""
        return ((signers.VOLUMES, signers.volumes_signer(pod)),)

    def __init__(self, args: Any, handle: Handle) -> None:
        super().__init__(args, handle)
        #: row -> {uid: placed pod with claims}.
        self._claim_pods: dict[int, dict[str, PodInfo]] = {}
        handle.table.observe_pods(self._observe)

    def _observe(self, row: int, pod: PodInfo, sign: int) -> None:
        if not pod_volumes(pod).claims:
            return
        pods = self._claim_pods.setdefault(row, {})
        if sign > 0:
            pods[pod.uid] = pod
        else:
            pods.pop(pod.uid, None)
            if not pods:
                del self._claim_pods[row]

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(CSI_NODE_KIND.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(POD, ActionType.DELETE),
            ClusterEvent(PVC_KIND.kind, ActionType.ADD),
            ClusterEvent(VOLUME_ATTACHMENT_KIND.kind, ActionType.DELETE),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not pod_volumes(pod).claims:
            return None, Status.skip()
        state.write(STATE_KEY, _State())
        return None, SUCCESS

    # -- resolving volumes --------------------------------------------------------------------
    def _volumes_of(self, pod: PodInfo, new_pod: bool) -> dict[str, str]:
        """filterAttachableVolumes: unique volume name -> driver for the pod's claims."""
        pvcs = self.handle.objects(PVC_KIND.kind)
        out: dict[str, str] = {}
        for claim_name, ephemeral in pod_volumes(pod).claims:
            if not claim_name:
                raise _LookupError("PersistentVolumeClaim had no name", False)
            pvc = pvcs.get(f"{pod.namespace}/{claim_name}")
            if pvc is None:
                if new_pod:
                    raise _LookupError(f"looking up PVC {pod.namespace}/{claim_name}: "
                                       f"{not_found(PVC_RESOURCE, claim_name)}", True)
                continue
            if ephemeral:
                err = volume_is_for_pod(pod, pvc)
                if err:
                    raise _LookupError(err, False)
            driver, handle = self._driver_info(pvc)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        return out

    def _driver_info(self, pvc: Mapping[str, Any]) -> tuple[str, str]:
        """getCSIDriverInfo: (driver, volume handle) of the bound PV, else from the class."""
        pv_name = str((pvc.get("spec") or {}).get("volumeName") or "")
        pv = self.handle.objects(PV_KIND.kind).get(pv_name) if pv_name else None
        if pv is None:
            return self._driver_info_from_class(pvc)
        csi = (pv.get("spec") or {}).get("csi")
        if not isinstance(csi, dict):
            return "", ""  # an in-tree source (CSI migration is not ported)
        return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")

    def _driver_info_from_class(self, pvc: Mapping[str, Any]) -> tuple[str, str]:
        class_name = claim_class(pvc)
        if not class_name:
            return "", ""
        sc = self.handle.objects(STORAGE_CLASS_KIND.kind).get(class_name)
        if sc is None:
            return "", ""
        meta = pvc.get("metadata") or {}
        handle = f"{_PLACEHOLDER_PREFIX}-{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        return str(sc.get("provisioner") or ""), handle

    def _attachments(self, s: _State) -> dict[str, dict[str, str]]:
        """getNodeVolumeAttachmentInfo for every node at once: node -> {unique name: attacher}."""
        if s.attachments is None:
            pvs = self.handle.objects(PV_KIND.kind)
            by_node: dict[str, dict[str, str]] = {}
            for va in self.handle.objects(VOLUME_ATTACHMENT_KIND.kind).values():
                spec = va.get("spec") or {}
                attacher = spec.get("attacher")
                pv_name = (spec.get("source") or {}).get("persistentVolumeName")
                if not attacher or not pv_name:
                    continue
                csi = ((pvs.get(str(pv_name)) or {}).get("spec") or {}).get("csi")
                if not isinstance(csi, dict):
                    continue
                by_node.setdefault(str(spec.get("nodeName") or ""), {})[
                    f"{attacher}/{csi.get('volumeHandle', '')}"] = str(attacher)
            s.attachments = by_node
        return s.attachments

    # -- Filter -------------------------------------------------------------------------------
    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        n = len(rows)
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            s = _State()
        if s.new_volumes is None and s.error is None:
            try:
                s.new_volumes = self._volumes_of(pod, new_pod=True)
            except _LookupError as e:
                s.error = Status.unresolvable(str(e)) if e.not_found else Status.error(str(e))
        if s.error is not None:
            return Verdicts(np.ones(n, dtype=np.int32), [s.error])
        assert s.new_volumes is not None
        if not s.new_volumes:
            return Verdicts.all_pass(n)
        csi_nodes = self.handle.objects(CSI_NODE_KIND.kind)
        drivers = self.handle.objects(CSI_DRIVER_KIND.kind)

        def verdict(row: int) -> Status:
            try:
                return self._filter_node(s, table, row, csi_nodes, drivers)
            except _LookupError as e:
                return Status.error(str(e))

        return Verdicts.from_statuses(n, map(verdict, rows.tolist()))

    def _filter_node(
        self, s: _State, table: NodeTable, row: int, csi_nodes: Mapping[str, dict[str, Any]],
        drivers: Mapping[str, dict[str, Any]],
    ) -> Status:
        assert s.new_volumes is not None
        node_name = table.names[row]
        csi_node = csi_nodes.get(node_name)
        node_drivers = ((csi_node or {}).get("spec") or {}).get("drivers") or []
        for driver in set(s.new_volumes.values()):  # checkCSIDriverOnNode
            obj = drivers.get(driver)
            if obj is None or ((obj.get("spec") or {}).get("preventPodSchedulingIfMissing")) is not True:
                continue
            if not any(d.get("name") == driver for d in node_drivers):
                return Status.unschedulable(f"{driver} CSI driver is not installed on the node")
        limits = {
            str(d.get("name")): int(d["allocatable"]["count"]) for d in node_drivers
            if isinstance(d.get("allocatable"), dict) and isinstance(d["allocatable"].get("count"), int)
        }
        if not limits:
            return SUCCESS
        attached: dict[str, str] = {}
        for uid, placed in (self._claim_pods.get(row) or {}).items():
            vols = s.resolved.get(uid)
            if vols is None:
                vols = s.resolved[uid] = self._volumes_of(placed, new_pod=False)
            attached.update(vols)
        new = {k: d for k, d in s.new_volumes.items() if k not in attached}
        count: dict[str, int] = {}
        for d in attached.values():
            count[d] = count.get(d, 0) + 1
        for key, d in self._attachments(s).get(node_name, {}).items():
            if key not in attached:
                count[d] = count.get(d, 0) + 1
        wanted: dict[str, int] = {}
        for d in new.values():
            wanted[d] = wanted.get(d, 0) + 1
        for d, k in wanted.items():
            limit = limits.get(d)
            if limit is not None and count.get(d, 0) + k > limit:
                return Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return SUCCESS
