"""VolumeZone: keep a pod in the zones and regions its bound PersistentVolumes are labelled with.

Port of pkg/scheduler/framework/plugins/volumezone/volume_zone.go (Kubernetes v1.37.1):

* PreFilter reads the PV of every ``persistentVolumeClaim`` volume; its ``topology.kubernetes.io/
  zone``/``region`` labels (and the deprecated ``failure-domain.beta.kubernetes.io`` ones; a value
  may list several zones joined by ``__``) are the constraints. An unbound claim of a
  ``WaitForFirstConsumer`` class has none yet (VolumeBinding handles it). No constraint: Skip.
  Errors are upstream's: ``persistentvolumeclaim "x" not found``, ``PersistentVolumeClaim had no
  pv name and storageClass name``, ``PersistentVolume had no name``, ``VolumeBindingMode not set
  for StorageClass "x"``, ``storageclass.storage.k8s.io "x" not found``, ``persistentvolume "x"
  not found`` (all UnschedulableAndUnresolvable);
* Filter: a node with none of the four topology labels passes; otherwise, for every constraint,
  the node's value of that label (or of its GA equivalent) must be one of the PV's:
  ``node(s) had no available volume zone`` (UnschedulableAndUnresolvable). Vectorised over the
  rows with the table's label columns.

Not ported: queueing hints, the InPlacePodVerticalScalingSchedulerPreemption alpha check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import FilterPlugin, PreFilterPlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.volumebinding.storage import (
    PV_KIND,
    PV_RESOURCE,
    PVC_KIND,
    PVC_RESOURCE,
    STORAGE_CLASS_KIND,
    STORAGE_CLASS_RESOURCE,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    not_found,
    pod_volumes,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

NAME = "VolumeZone"
STATE_KEY = "PreFilter" + NAME
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
#: volume_zone.go topologyLabels, in order.
TOPOLOGY_LABELS = (LABEL_ZONE_BETA, LABEL_REGION_BETA, LABEL_ZONE, LABEL_REGION)
_GA = {LABEL_REGION_BETA: LABEL_REGION, LABEL_ZONE_BETA: LABEL_ZONE}
#: k8s.io/cloud-provider/volume LabelMultiZoneDelimiter.
MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class _State:
    topologies: tuple[PVTopology, ...]

    def clone(self) -> _State:
        return self


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """volumehelpers.LabelZonesToSet: ``a__b`` -> {a, b}; None when an element is empty."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    return None if any(not z for z in zones) else frozenset(zones)


def pv_topologies(pv: dict[str, Any]) -> list[PVTopology]:
    labels = (pv.get("metadata") or {}).get("labels") or {}
    name = str((pv.get("metadata") or {}).get("name", ""))
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            values = label_zones_to_set(str(labels[key]))
            if values is not None:
                out.append(PVTopology(name, key, values))
    return out


class VolumeZone(PreFilterPlugin, FilterPlugin):
    name: ClassVar[str] = NAME
    object_kinds = (PVC_KIND, PV_KIND, STORAGE_CLASS_KIND)

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (volume_zone.go): the pod's volume sources."""
        return ((signers.VOLUMES, signers.volumes_signer(pod)),)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(STORAGE_CLASS_KIND.kind, ActionType.ADD),
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            ClusterEvent(PVC_KIND.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(PV_KIND.kind, ActionType.ADD | ActionType.UPDATE),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        names = pod_volumes(pod).pvc_names
        if not names:
            return None, Status.skip()
        topologies, st = self._topologies(pod, names)
        if not st.is_success:
            return None, st
        if not topologies:
            return None, Status.skip()
        state.write(STATE_KEY, _State(tuple(topologies)))
        return None, SUCCESS

    def _topologies(self, pod: PodInfo, claim_names: Sequence[str]) -> tuple[list[PVTopology], Status]:
        pvcs = self.handle.objects(PVC_KIND.kind)
        pvs = self.handle.objects(PV_KIND.kind)
        classes = self.handle.objects(STORAGE_CLASS_KIND.kind)
        out: list[PVTopology] = []
        for claim_name in claim_names:
            if not claim_name:
                return [], Status.unresolvable("PersistentVolumeClaim had no name")
            pvc = pvcs.get(f"{pod.namespace}/{claim_name}")
            if pvc is None:
                return [], Status.unresolvable(not_found(PVC_RESOURCE, claim_name))
            pv_name = str((pvc.get("spec") or {}).get("volumeName") or "")
            if not pv_name:
                class_name = claim_class(pvc)
                if not class_name:
                    return [], Status.unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                sc = classes.get(class_name)
                if sc is None:
                    return [], Status.unresolvable(not_found(STORAGE_CLASS_RESOURCE, class_name))
                mode = sc.get("volumeBindingMode")
                if not mode:
                    return [], Status.unresolvable(f'VolumeBindingMode not set for StorageClass "{class_name}"')
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue  # the PV is chosen (or provisioned) for the node: VolumeBinding's part
                return [], Status.unresolvable("PersistentVolume had no name")
            pv = pvs.get(pv_name)
            if pv is None:
                return [], Status.unresolvable(not_found(PV_RESOURCE, pv_name))
            out += pv_topologies(pv)
        return out, SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            topologies, st = self._topologies(pod, pod_volumes(pod).pvc_names)
            if not st.is_success:
                return Verdicts(np.ones(len(rows), dtype=np.int32), [st])
            s = _State(tuple(topologies))
        n = len(rows)
        constrained = np.zeros(n, dtype=np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= table.label_column(key).codes[rows] >= 0
        ok = np.ones(n, dtype=np.bool_)
        for topo in s.topologies:
            col = table.label_column(topo.key)
            codes = col.codes[rows]
            match = np.isin(codes, col.codes_for(topo.values))
            ga = _GA.get(topo.key)
            if ga is not None:  # the node lacks the beta label: its GA label counts
                ga_col = table.label_column(ga)
                match = np.where(codes >= 0, match, np.isin(ga_col.codes[rows], ga_col.codes_for(topo.values)))
            ok &= match
        return Verdicts.from_mask(ok | ~constrained, Status.unresolvable(ERR_REASON_CONFLICT))
