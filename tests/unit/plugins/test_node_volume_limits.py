"""NodeVolumeLimits: mirrors nodevolumelimits/csi_test.go TestCSILimits (the CSI cases: bound and
unbound claims, volumes shared with pods already on the node, VolumeAttachments, drivers without a
limit, missing claims, preventPodSchedulingIfMissing)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.status import Code, Status
from kubesched.plugins.nodevolumelimits import NodeVolumeLimits
from kubesched.plugins.nodevolumelimits.plugin import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import new_plugin, node, pod, table_of
from unit.plugins.filter_helpers import pre_filter_then_filter

EBS, GCE = "ebs.csi.aws.com", "pd.csi.storage.gke.io"


def claims_pod(name: str, *claims: str, node_name: str = "") -> dict[str, Any]:
    return pod(name, node_name=node_name,
               volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims])


def world(limit: dict[str, int] | None, attachments: int = 0) -> dict[str, dict[str, dict[str, Any]]]:
    pvcs, pvs = {}, {}
    for i in range(6):
        for driver, prefix in ((EBS, "csi-ebs"), (GCE, "csi-gce")):
            pv = f"{prefix}-{i}"
            pvs[pv] = {"metadata": {"name": pv}, "spec": {"csi": {"driver": driver, "volumeHandle": f"h-{pv}"}}}
            pvcs[f"default/{pv}"] = {"metadata": {"name": pv, "namespace": "default"}, "spec": {"volumeName": pv}}
    pvcs["default/unbound-ebs"] = {"metadata": {"name": "unbound-ebs", "namespace": "default"},
                                   "spec": {"storageClassName": "ebs-sc"}}
    csinode = {"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": d, "nodeID": "n1", "allocatable": {"count": c}} for d, c in (limit or {}).items()]}}
    vas = {f"va-{i}": {"metadata": {"name": f"va-{i}"}, "spec": {
        "attacher": EBS, "nodeName": "n1", "source": {"persistentVolumeName": f"csi-ebs-{5 - i}"}}}
        for i in range(attachments)}
    return {
        "PersistentVolumeClaim": pvcs, "PersistentVolume": pvs,
        "StorageClass": {"ebs-sc": {"metadata": {"name": "ebs-sc"}, "provisioner": EBS}},
        "CSINode": {"n1": csinode} if limit is not None else {},
        "CSIDriver": {}, "VolumeAttachment": vas,
    }


def run(incoming: dict[str, Any], placed: list[dict[str, Any]], objs: dict[str, Any]) -> tuple[Status, Status | None]:
    t = table_of(node("n1"), pods=placed)
    pl = new_plugin(NodeVolumeLimits, table=t, objects=objs.get)
    return pre_filter_then_filter(pl, PodInfo.from_raw(incoming), t)


CASES = [
    ("fits when node volume limit >= new pods CSI volume", ("csi-ebs-0", "csi-ebs-1"), [("csi-ebs-2",)],
     {EBS: 4}, 0, None),
    ("doesn't when node volume limit <= pods CSI volume", ("csi-ebs-0", "csi-ebs-1"), [("csi-ebs-2", "csi-ebs-3")],
     {EBS: 2}, 0, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED),
    ("should when driver does not support volume limits", ("csi-ebs-0", "csi-ebs-1"), [("csi-ebs-2",)],
     {}, 0, None),
    ("count pending PVCs towards volume limit <= pods CSI volume", ("csi-ebs-0",), [("csi-ebs-2", "unbound-ebs")],
     {EBS: 2}, 0, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED),
    ("already-attached volumes are not counted twice", ("csi-ebs-2",), [("csi-ebs-2", "csi-ebs-3")],
     {EBS: 2}, 0, None),
    ("limits are per driver", ("csi-gce-0",), [("csi-ebs-2", "csi-ebs-3")], {EBS: 2, GCE: 1}, 0, None),
    ("VolumeAttachments to the node count", ("csi-ebs-0",), [], {EBS: 2}, 2, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED),
    ("no CSINode: no limits", ("csi-ebs-0", "csi-ebs-1"), [("csi-ebs-2", "csi-ebs-3")], None, 0, None),
]


@pytest.mark.parametrize(("name", "new", "existing", "limit", "vas", "reason"), CASES, ids=[c[0] for c in CASES])
def test_csi_limits(name: str, new: tuple[str, ...], existing: list[tuple[str, ...]], limit: dict[str, int] | None,
                    vas: int, reason: str | None) -> None:
    placed = [claims_pod(f"e{i}", *c, node_name="n1") for i, c in enumerate(existing)]
    pre, st = run(claims_pod("p", *new), placed, world(limit, vas))
    assert pre.is_success
    if reason is None:
        assert st is None
    else:
        assert st is not None and st.code == Code.UNSCHEDULABLE and st.reasons == (reason,)


def test_pod_without_claims_is_skipped() -> None:
    pre, _ = run(pod("p"), [], world({EBS: 1}))
    assert pre.code == Code.SKIP


def test_missing_claim_is_unresolvable() -> None:
    _, st = run(claims_pod("p", "nope"), [], world({EBS: 1}))
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',)


def test_driver_that_must_be_installed_on_the_node() -> None:
    objs = world({GCE: 5})
    objs["CSIDriver"] = {EBS: {"metadata": {"name": EBS}, "spec": {"preventPodSchedulingIfMissing": True}}}
    _, st = run(claims_pod("p", "csi-ebs-0"), [], objs)
    assert st is not None and st.code == Code.UNSCHEDULABLE
    assert st.reasons == (f"{EBS} CSI driver is not installed on the node",)
