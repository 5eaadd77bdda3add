"""VolumeRestrictions: inline disks that cannot be shared, and ReadWriteOncePod claims in use.

Port of pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go (v1.37.1):

* disk conflicts: a GCE PD (unless both mounts are read-only), an AWS EBS volume, an iSCSI IQN
  (unless both read-only) or an RBD image (overlapping monitors, same pool and image, unless both
  read-only) already used by a pod on the node: ``node(s) had no available disk``;
* ReadWriteOncePod: a ``persistentVolumeClaim`` with that access mode already used by any placed
  pod in the cluster: ``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod
  access mode already in-use by another pod`` (both Unschedulable: evicting the user helps);
* PreFilter: a claim that does not exist is UnschedulableAndUnresolvable
  (``persistentvolumeclaim "x" not found``); Skip when the pod has neither restricted inline
  disks nor a ReadWriteOncePod claim in use. AddPod/RemovePod keep the in-use count for
  preemption's and nominated pods' what-ifs.

Kept incrementally (a pod observer on the node table): how many placed pods use each claim
(upstream's snapshot ``usedPVCRefCounts``), and per node the pods with restricted inline disks,
so a cycle reads only those.

Not ported: queueing hints, the InPlacePodVerticalScalingSchedulerPreemption alpha check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import FilterPlugin, PreFilterExtensions, PreFilterPlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.volumebinding.storage import (
    PVC_KIND,
    PVC_RESOURCE,
    READ_WRITE_ONCE_POD,
    not_found,
    pod_volumes,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows

NAME = "VolumeRestrictions"
STATE_KEY = "PreFilter" + NAME
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                            "already in-use by another pod")


@dataclass(slots=True)
class _State:
    rwop_claims: frozenset[str]
    conflicting: int

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicting)

    def update_with_pod(self, pod: PodInfo, multiplier: int) -> None:
        self.conflicting += multiplier * sum(1 for name in pod_volumes(pod).pvc_names if name in self.rwop_claims)


def _read_only(src: dict[str, Any]) -> bool:
    return src.get("readOnly") is True


def is_volume_conflict(volume: dict[str, Any], existing_pod: PodInfo) -> bool:
    """isVolumeConflict: ``volume`` of the incoming pod against every volume of a placed pod."""
    for ev in pod_volumes(existing_pod).restricted:
        gce, egce = volume.get("gcePersistentDisk"), ev.get("gcePersistentDisk")
        if gce is not None and egce is not None and gce.get("pdName") == egce.get("pdName") and not (
                _read_only(gce) and _read_only(egce)):
            return True
        ebs, eebs = volume.get("awsElasticBlockStore"), ev.get("awsElasticBlockStore")
        if ebs is not None and eebs is not None and ebs.get("volumeID") == eebs.get("volumeID"):
            return True
        iscsi, eiscsi = volume.get("iscsi"), ev.get("iscsi")
        if iscsi is not None and eiscsi is not None and iscsi.get("iqn") == eiscsi.get("iqn") and not (
                _read_only(iscsi) and _read_only(eiscsi)):
            return True
        rbd, erbd = volume.get("rbd"), ev.get("rbd")
        if (rbd is not None and erbd is not None
                and set(rbd.get("monitors") or ()) & set(erbd.get("monitors") or ())
                and (rbd.get("pool") or "rbd") == (erbd.get("pool") or "rbd")
                and rbd.get("image") == erbd.get("image")
                and not (_read_only(rbd) and _read_only(erbd))):
            return True
    return False


class VolumeRestrictions(PreFilterPlugin, FilterPlugin, PreFilterExtensions):
    name: ClassVar[str] = NAME
    object_kinds = (PVC_KIND,)

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (volume_restrictions.go): the pod's volume sources."""
        return ((signers.VOLUMES, signers.volumes_signer(pod)),)

    def __init__(self, args: Any, handle: Handle) -> None:
        super().__init__(args, handle)
        #: namespace/claim -> placed pods using it (upstream usedPVCRefCounts).
        self._claim_users: Counter[str] = Counter()
        #: row -> {uid: placed pod with restricted inline disks}.
        self._disk_pods: dict[int, dict[str, PodInfo]] = {}
        handle.table.observe_pods(self._observe)

    def _observe(self, row: int, pod: PodInfo, sign: int) -> None:
        vols = pod_volumes(pod)
        if not vols.has_volumes:
            return
        for name in vols.pvc_names:
            key = f"{pod.namespace}/{name}"
            left = self._claim_users[key] + sign
            if left > 0:
                self._claim_users[key] = left
            else:
                del self._claim_users[key]
        if vols.restricted:
            pods = self._disk_pods.setdefault(row, {})
            if sign > 0:
                pods[pod.uid] = pod
            else:
                pods.pop(pod.uid, None)
                if not pods:
                    del self._disk_pods[row]

    def is_claim_used(self, key: str) -> bool:
        return self._claim_users.get(key, 0) > 0

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(POD, ActionType.DELETE),
            ClusterEvent(NODE, ActionType.ADD),
            ClusterEvent(PVC_KIND.kind, ActionType.ADD),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        vols = pod_volumes(pod)
        if not vols.has_volumes:
            return None, Status.skip()
        pvcs = self.handle.objects(PVC_KIND.kind)
        rwop: set[str] = set()
        for claim_name in vols.pvc_names:
            pvc = pvcs.get(f"{pod.namespace}/{claim_name}")
            if pvc is None:
                return None, Status.unresolvable(not_found(PVC_RESOURCE, claim_name))
            if READ_WRITE_ONCE_POD in ((pvc.get("spec") or {}).get("accessModes") or ()):
                rwop.add(claim_name)
        conflicting = sum(1 for name in rwop if self.is_claim_used(f"{pod.namespace}/{name}"))
        if not vols.restricted and conflicting == 0:
            return None, Status.skip()
        state.write(STATE_KEY, _State(frozenset(rwop), conflicting))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return Status.error(f'cannot read "{STATE_KEY}" from cycleState')
        s.update_with_pod(pod_to_add, 1)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return Status.error(f'cannot read "{STATE_KEY}" from cycleState')
        s.update_with_pod(pod_to_remove, -1)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        n = len(rows)
        codes = np.zeros(n, dtype=np.int32)
        restricted = pod_volumes(pod).restricted
        if restricted and self._disk_pods:
            for i, row in enumerate(rows.tolist()):
                placed = self._disk_pods.get(row)
                if placed and any(is_volume_conflict(v, p) for v in restricted for p in placed.values()):
                    codes[i] = 1
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return Verdicts(np.full(n, 2, dtype=np.int32), [Status.unschedulable(ERR_REASON_DISK_CONFLICT),
                                                            Status.error(f'cannot read "{STATE_KEY}" from cycleState')])
        if s.conflicting > 0:
            codes[codes == 0] = 2
        return Verdicts(codes, [Status.unschedulable(ERR_REASON_DISK_CONFLICT),
                                Status.unschedulable(ERR_REASON_RWOP_CONFLICT)])
