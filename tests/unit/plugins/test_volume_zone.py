"""VolumeZone: mirrors volumezone/volume_zone_test.go TestSingleZone and TestWithBinding (same
PVs, claims, nodes and expected statuses)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code
from kubesched.plugins.volumezone import VolumeZone
from kubesched.plugins.volumezone.plugin import ERR_REASON_CONFLICT
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import new_plugin, pod, table_of

BZ, BR = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
Z, R = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"

PVS = {
    "Vol_1": {BZ: "us-west1-a"},
    "Vol_2": {BR: "us-west1", "uselessLabel": "none"},
    "Vol_3": {BR: "us-west1"},
    "Vol_Stable_1": {Z: "us-west1-a"},
    "Vol_Stable_2": {R: "us-west1", "uselessLabel": "none"},
    "Vol_Stable_3": {Z: "us-west1-a", R: "us-west1-a"},
    "Vol_Multi": {Z: "us-west1-a__us-west1-b"},
}
CLAIMS = {"PVC_1": "Vol_1", "PVC_2": "Vol_2", "PVC_3": "Vol_3", "PVC_4": "Vol_not_exist",
          "PVC_Stable_1": "Vol_Stable_1", "PVC_Stable_2": "Vol_Stable_2", "PVC_Stable_3": "Vol_Stable_3",
          "PVC_Multi": "Vol_Multi"}


def objects(extra_claims: dict[str, dict[str, Any]] | None = None,
            classes: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    pvcs = {f"default/{c}": {"metadata": {"name": c, "namespace": "default"}, "spec": {"volumeName": v}}
            for c, v in CLAIMS.items()}
    for name, spec in (extra_claims or {}).items():
        pvcs[f"default/{name}"] = {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
    return {
        "PersistentVolume": {n: {"metadata": {"name": n, "labels": labels}} for n, labels in PVS.items()},
        "PersistentVolumeClaim": pvcs,
        "StorageClass": classes or {},
    }


def with_claims(name: str, *claims: str) -> PodInfo:
    return PodInfo.from_raw(pod(name, volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}}
                                               for c in claims]))


def run(claim: str | None, labels: dict[str, str], objs: dict[str, Any] | None = None) -> tuple[Any, Any]:
    from kubesched.testing import node

    t = table_of(node("host1", labels=labels))
    pl = new_plugin(VolumeZone, table=t, objects=(objs or objects()).get)  # type: ignore[arg-type]
    p = with_claims("pod_1", claim) if claim else PodInfo.from_raw(pod("pod_1"))
    state = CycleState()
    _, pre = pl.pre_filter(state, p, t)
    if not pre.is_success:
        return pre, None
    v = pl.filter_batch(state, p, t, np.array([t.index["host1"]], dtype=np.intp))
    code = int(v.codes[0])
    return pre, (None if code == 0 else v.statuses[code - 1])


NO_LABELS: dict[str, str] = {}
SINGLE_ZONE = [
    ("pod without volume", None, {BZ: "us-west1-a"}, Code.SKIP, None),
    ("node without labels", "PVC_1", NO_LABELS, Code.SUCCESS, None),
    ("beta zone label matched", "PVC_1", {BZ: "us-west1-a", "uselessLabel": "none"}, Code.SUCCESS, None),
    ("beta region label matched", "PVC_2", {BR: "us-west1", "uselessLabel": "none"}, Code.SUCCESS, None),
    ("beta region label doesn't match", "PVC_2", {BR: "no_us-west1", "uselessLabel": "none"}, Code.SUCCESS,
     ERR_REASON_CONFLICT),
    ("beta zone label doesn't match", "PVC_1", {BZ: "no_us-west1-a", "uselessLabel": "none"}, Code.SUCCESS,
     ERR_REASON_CONFLICT),
    ("zone label matched", "PVC_Stable_1", {Z: "us-west1-a", "uselessLabel": "none"}, Code.SUCCESS, None),
    ("region label matched", "PVC_Stable_2", {R: "us-west1", "uselessLabel": "none"}, Code.SUCCESS, None),
    ("region label doesn't match", "PVC_Stable_2", {R: "no_us-west1", "uselessLabel": "none"}, Code.SUCCESS,
     ERR_REASON_CONFLICT),
    ("zone label doesn't match", "PVC_Stable_1", {Z: "no_us-west1-a", "uselessLabel": "none"}, Code.SUCCESS,
     ERR_REASON_CONFLICT),
    ("pv with zone and region, node with only zone", "PVC_Stable_3", {Z: "us-west1-a"}, Code.SUCCESS,
     ERR_REASON_CONFLICT),
    ("pv with zone,node with beta zone", "PVC_Stable_1", {BZ: "us-west1-a"}, Code.SUCCESS, ERR_REASON_CONFLICT),
    ("pv with beta label,node with ga label, matched", "PVC_1", {Z: "us-west1-a"}, Code.SUCCESS, None),
    ("pv with beta label,node with ga label, don't match", "PVC_1", {Z: "us-west1-b"}, Code.SUCCESS,
     ERR_REASON_CONFLICT),
    # TestMultiZone: a PV label may list several zones joined by "__".
    ("multi zone matched", "PVC_Multi", {Z: "us-west1-b"}, Code.SUCCESS, None),
    ("multi zone doesn't match", "PVC_Multi", {Z: "us-west1-c"}, Code.SUCCESS, ERR_REASON_CONFLICT),
]


@pytest.mark.parametrize(("name", "claim", "labels", "pre_code", "reason"), SINGLE_ZONE,
                         ids=[c[0] for c in SINGLE_ZONE])
def test_single_zone(name: str, claim: str | None, labels: dict[str, str], pre_code: Code, reason: str | None) -> None:
    pre, st = run(claim, labels)
    assert pre.code == pre_code
    if reason is None:
        assert st is None
    else:
        assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (reason,)


WAIT = {"metadata": {"name": "Class_Wait"}, "volumeBindingMode": "WaitForFirstConsumer"}
IMMEDIATE = {"metadata": {"name": "Class_Immediate"}, "volumeBindingMode": "Immediate"}
WITH_BINDING = [
    ("label zone failure domain matched", "PVC_1", None),
    ("unbound volume empty storage class", "PVC_EmptySC", "PersistentVolumeClaim had no pv name and storageClass name"),
    ("unbound volume no storage class", "PVC_NoSC", 'storageclass.storage.k8s.io "Class_0" not found'),
    ("unbound volume immediate binding mode", "PVC_ImmediateSC", "PersistentVolume had no name"),
    ("unbound volume wait binding mode", "PVC_WaitSC", None),
    ("pv not found", "PVC_4", 'persistentvolume "Vol_not_exist" not found'),
    ("pvc not found", "PVC_missing", 'persistentvolumeclaim "PVC_missing" not found'),
]


@pytest.mark.parametrize(("name", "claim", "error"), WITH_BINDING, ids=[c[0] for c in WITH_BINDING])
def test_with_binding(name: str, claim: str, error: str | None) -> None:
    objs = objects(
        {"PVC_EmptySC": {"storageClassName": ""}, "PVC_NoSC": {"storageClassName": "Class_0"},
         "PVC_ImmediateSC": {"storageClassName": "Class_Immediate"}, "PVC_WaitSC": {"storageClassName": "Class_Wait"}},
        {"Class_Wait": WAIT, "Class_Immediate": IMMEDIATE},
    )
    pre, st = run(claim, {BZ: "us-west1-a", "uselessLabel": "none"}, objs)
    if error is None:
        assert pre.code in (Code.SUCCESS, Code.SKIP) and st is None
    else:
        assert pre.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and pre.reasons == (error,)
