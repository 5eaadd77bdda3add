"""The simulator's ClusterClient.annotate_pod: what ``kubesched run`` does with a merge patch of
metadata.annotations, done on the stored pod (GpuShare's PreBind writes gpu-index through it)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.framework.handle import PodGoneError
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod


def test_annotations_are_merged_into_the_stored_pod_and_kept_by_its_bind() -> None:
    cluster = SimulatedCluster()
    cluster.add_node(node("n1"))
    raw = pod("p", cpu="1")
    raw["metadata"]["annotations"] = {"keep": "me"}
    stored = PodInfo.from_raw(raw)
    cluster.add_pod(stored)
    assumed = stored.with_node("n1")  # the scheduler's copy, as it hands it to PreBind and bind

    asyncio.run(cluster.annotate_pod(assumed, {"alibabacloud.com/gpu-index": "1"}))
    assert cluster.pods[stored.uid].raw["metadata"]["annotations"] == {"keep": "me", "alibabacloud.com/gpu-index": "1"}
    asyncio.run(cluster.bind(assumed, "n1"))
    bound = cluster.pods[stored.uid]
    assert bound.node_name == "n1"
    assert bound.raw["metadata"]["annotations"]["alibabacloud.com/gpu-index"] == "1"


def test_annotating_a_pod_that_is_gone_is_pod_gone() -> None:
    cluster = SimulatedCluster()
    with pytest.raises(PodGoneError, match="pod default/ghost not found"):
        asyncio.run(cluster.annotate_pod(PodInfo.from_raw(pod("ghost")), {"a": "b"}))
