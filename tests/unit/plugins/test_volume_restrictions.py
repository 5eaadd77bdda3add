"""VolumeRestrictions: mirrors volumerestrictions/volume_restrictions_test.go (TestGCEDiskConflicts,
TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts, TestAccessModeConflicts)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.plugins.volumerestrictions import VolumeRestrictions
from kubesched.plugins.volumerestrictions.plugin import ERR_REASON_DISK_CONFLICT, ERR_REASON_RWOP_CONFLICT
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import new_plugin, node, pod, table_of
from unit.plugins.filter_helpers import pre_filter_then_filter


def vol(source: str, **fields: Any) -> dict[str, Any]:
    return {"name": "v", source: fields}


def run(incoming: dict[str, Any], placed: list[dict[str, Any]],
        pvcs: dict[str, dict[str, Any]] | None = None) -> tuple[Status, Status | None]:
    t = table_of(node("n1"), pods=placed)
    objs = {"PersistentVolumeClaim": pvcs or {}}
    pl = new_plugin(VolumeRestrictions, table=t, objects=objs.get)  # type: ignore[arg-type]
    return pre_filter_then_filter(pl, PodInfo.from_raw(incoming), t)


DISK_CASES = [
    ("gce same disk", vol("gcePersistentDisk", pdName="foo"), vol("gcePersistentDisk", pdName="foo"), True),
    ("gce other disk", vol("gcePersistentDisk", pdName="foo"), vol("gcePersistentDisk", pdName="bar"), False),
    ("gce both read-only", vol("gcePersistentDisk", pdName="foo", readOnly=True),
     vol("gcePersistentDisk", pdName="foo", readOnly=True), False),
    ("aws same volume", vol("awsElasticBlockStore", volumeID="foo"), vol("awsElasticBlockStore", volumeID="foo"), True),
    ("aws other volume", vol("awsElasticBlockStore", volumeID="foo"), vol("awsElasticBlockStore", volumeID="bar"),
     False),
    ("rbd overlapping monitors", vol("rbd", monitors=["a", "b"], pool="foo", image="bar"),
     vol("rbd", monitors=["b", "c"], pool="foo", image="bar"), True),
    ("rbd other image", vol("rbd", monitors=["a", "b"], pool="foo", image="bar"),
     vol("rbd", monitors=["a", "b"], pool="foo", image="baz"), False),
    ("iscsi same iqn", vol("iscsi", targetPortal="127.0.0.1:3260", iqn="iqn.2016-12.server:storage.target01", lun=0),
     vol("iscsi", targetPortal="127.0.0.1:3260", iqn="iqn.2016-12.server:storage.target01", lun=0), True),
    ("iscsi other iqn", vol("iscsi", targetPortal="127.0.0.1:3260", iqn="iqn.2016-12.server:storage.target01", lun=0),
     vol("iscsi", targetPortal="127.0.0.1:3260", iqn="iqn.2017-12.server:storage.target01", lun=0), False),
]


@pytest.mark.parametrize(("name", "incoming", "existing", "conflict"), DISK_CASES, ids=[c[0] for c in DISK_CASES])
def test_disk_conflicts(name: str, incoming: dict[str, Any], existing: dict[str, Any], conflict: bool) -> None:
    pre, st = run(pod("p", volumes=[incoming]), [pod("e", node_name="n1", volumes=[existing])])
    assert pre.is_success
    if conflict:
        assert st is not None and st.code == Code.UNSCHEDULABLE and st.reasons == (ERR_REASON_DISK_CONFLICT,)
    else:
        assert st is None


def test_pod_without_volumes_is_skipped() -> None:
    pre, _ = run(pod("p"), [pod("e", node_name="n1", volumes=[vol("gcePersistentDisk", pdName="foo")])])
    assert pre.code == Code.SKIP


def claim_volume(name: str) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": name}}


RWOP = {"default/claim-with-rwop-1": {"metadata": {"name": "claim-with-rwop-1", "namespace": "default"},
                                      "spec": {"accessModes": ["ReadWriteOncePod"]}},
        "default/claim-with-rwop-2": {"metadata": {"name": "claim-with-rwop-2", "namespace": "default"},
                                      "spec": {"accessModes": ["ReadWriteOncePod"]}}}


def test_read_write_once_pod_in_use_conflicts_on_every_node() -> None:
    pre, st = run(pod("p", volumes=[claim_volume("claim-with-rwop-1")]),
                  [pod("e", node_name="n1", volumes=[claim_volume("claim-with-rwop-1")])], RWOP)
    assert pre.is_success
    assert st is not None and st.code == Code.UNSCHEDULABLE and st.reasons == (ERR_REASON_RWOP_CONFLICT,)


def test_read_write_once_pod_not_in_use_is_skipped() -> None:
    pre, _ = run(pod("p", volumes=[claim_volume("claim-with-rwop-1")]),
                 [pod("e", node_name="n1", volumes=[claim_volume("claim-with-rwop-2")])], RWOP)
    assert pre.code == Code.SKIP


def test_missing_claim_is_unresolvable() -> None:
    pre, _ = run(pod("p", volumes=[claim_volume("nope")]), [], RWOP)
    assert pre.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pre.reasons == ('persistentvolumeclaim "nope" not found',)


def test_in_use_count_follows_pods_leaving_and_preemption_what_ifs() -> None:
    t = table_of(node("n1"), pods=[pod("e", node_name="n1", volumes=[claim_volume("claim-with-rwop-1")])])
    objs = {"PersistentVolumeClaim": RWOP}
    pl = new_plugin(VolumeRestrictions, table=t, objects=objs.get)  # type: ignore[arg-type]
    p = PodInfo.from_raw(pod("p", volumes=[claim_volume("claim-with-rwop-1")]))
    state = CycleState()
    assert pl.pre_filter(state, p, t)[1].is_success
    victim = next(iter(t.pods[0].values()))
    clone = state.clone()
    assert pl.remove_pod(clone, p, victim, t.node_info(0)).is_success  # preemption's what-if
    assert int(pl.filter_batch(clone, p, t, np.array([0], dtype=np.intp)).codes[0]) == 0
    assert int(pl.filter_batch(state, p, t, np.array([0], dtype=np.intp)).codes[0]) != 0
    t.remove_pod(victim.uid)  # the user is gone: the claim is free
    assert pl.pre_filter(CycleState(), p, t)[1].code == Code.SKIP
