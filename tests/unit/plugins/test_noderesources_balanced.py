"""NodeResourcesBalancedAllocation: table ported from upstream balanced_allocation_test.go (v1.37.1,
which scores the change of balance, kubernetes#135573) with upstream's expected scores."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code, Status
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFit,
)
from kubesched.plugins.noderesources.resource_allocation import balance_with_and_without, balanced_resource_scorer
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import new_plugin, node, pod, table_of

GPU = "nvidia.com/gpu"


def container(cpu: str, memory: str, **extra: str) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory, **extra}}}


def spec_pod(name: str, node_name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return pod(name, node_name=node_name, containers=list(containers))


# The upstream pod specs (cpu in millicores, memory in bytes).
def cpu_only(name: str, node_name: str = "") -> dict[str, Any]:
    return spec_pod(name, node_name, container("1000m", "0"), container("2000m", "0"))


def cpu_and_memory(name: str, node_name: str = "") -> dict[str, Any]:
    return spec_pod(name, node_name, container("1000m", "2000"), container("2000m", "3000"))


def cpu_memory_gpu(name: str, node_name: str = "") -> dict[str, Any]:
    return spec_pod(name, node_name, container("1000m", "2000"), container("2000m", "3000", **{GPU: "3"}))


def mk(name: str, milli_cpu: int, memory: int, gpu: int | None = None) -> dict[str, Any]:
    # upstream makeNode(name, milliCPU, memory, extended)
    return node(name, cpu=f"{milli_cpu}m", memory=str(memory), extra={GPU: str(gpu)} if gpu is not None else None)


DEFAULT = None
WITH_GPU = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}]}

CASES = [
    # (name, pod, nodes, existing pods, args, expected scores)
    ("nothing scheduled, resources requested, differently sized nodes", cpu_and_memory("p"),
     [mk("node1", 4000, 10000), mk("node2", 6000, 10000)], [], DEFAULT, [68, 75]),
    ("resources requested, pods scheduled with resources", cpu_and_memory("p"),
     [mk("node1", 10000, 20000), mk("node2", 10000, 20000)],
     [cpu_only("a", "node1"), cpu_and_memory("b", "node2")], DEFAULT, [73, 74]),
    ("resources requested, pods scheduled with resources, differently sized nodes", cpu_and_memory("p"),
     [mk("node1", 10000, 20000), mk("node2", 10000, 50000)],
     [cpu_only("a", "node1"), cpu_and_memory("b", "node2")], DEFAULT, [73, 70]),
    ("resources requested, pods scheduled with resources, nodes to reach min/max score",
     spec_pod("p", "", container("0", "2000"), container("0", "3000")),
     [mk("node1", 3000, 5000), mk("node2", 3000, 5000)], [cpu_only("a", "node1")], DEFAULT, [100, 50]),
    ("requested resources at node capacity", cpu_only("p"),
     [mk("node1", 6000, 10000), mk("node2", 6000, 10000)],
     [cpu_only("a", "node1"), cpu_and_memory("b", "node2")], DEFAULT, [62, 62]),
    ("include scalar resource on a node for balanced resource allocation",
     spec_pod("p", "", {"name": "c", "resources": {"requests": {"memory": "0", GPU: "1"}}}),
     [mk("node1", 3500, 40000, gpu=8), mk("node2", 3500, 40000, gpu=8)],
     [cpu_and_memory("a", "node2"), cpu_memory_gpu("b", "node1")], WITH_GPU, [75, 76]),
    ("node without the scalar resource should skip the scalar resource", cpu_and_memory("p"),
     [mk("node1", 3500, 40000, gpu=8), mk("node2", 3500, 40000)], [], WITH_GPU, [56, 56]),
]


def make_plugin(table: Any, args: dict[str, Any] | None) -> NodeResourcesBalancedAllocation:
    parsed = None if args is None else NodeResourcesBalancedAllocationArgs.model_validate(args)
    return NodeResourcesBalancedAllocation(parsed, Handle(table, FakeClock(), WaitingPods()))


@pytest.mark.parametrize(("name", "p", "nodes", "existing", "args", "want"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("run_pre_score", [True, False], ids=["prescore", "no-prescore"])
def test_balanced_allocation(name: str, p: dict[str, Any], nodes: list[dict[str, Any]],
                             existing: list[dict[str, Any]], args: dict[str, Any] | None, want: list[int],
                             run_pre_score: bool) -> None:
    table = table_of(*nodes, pods=existing)
    plugin = make_plugin(table, args)
    pi = PodInfo.from_raw(p)
    state = CycleState()
    rows = table.alive_rows()
    if run_pre_score:
        assert plugin.pre_score(state, pi, table, rows).is_success
    batch = plugin.score_batch(state, pi, table, rows)
    assert not isinstance(batch, Status)
    assert list(batch) == want
    assert [plugin.score(state, pi, table.node_info(r))[0] for r in rows] == want


def test_scores_follow_nodes_gaining_or_losing_a_scored_resource() -> None:
    """ResourceAllocation remembers per node_generation whether every node has every scored
    resource (the scorers' fast path): node updates and adds that change the answer are scored as
    by plugins built afresh, for BalancedAllocation and NodeResourcesFit alike."""
    table = table_of(mk("node1", 4000, 10000), mk("node2", 6000, 10000))
    pi = PodInfo.from_raw(cpu_and_memory("p"))

    def scores(plugins: tuple[Any, ...]) -> list[list[int]]:
        out = []
        for plugin in plugins:
            state = CycleState()
            assert plugin.pre_score(state, pi, table, table.alive_rows()).is_success
            out.append([int(x) for x in plugin.score_batch(state, pi, table, table.alive_rows())])
        return out

    def fresh() -> tuple[Any, ...]:
        return make_plugin(table, None), new_plugin(NodeResourcesFit, table=table)

    kept = fresh()
    first = scores(kept)
    for change in (
        mk("node2", 6000, 0),  # node2 loses its memory
        mk("node3", 0, 10000),  # a node without cpu joins
        mk("node2", 6000, 10000),
        mk("node3", 8000, 10000),  # every node has both again
    ):
        table.upsert_node(change)
        assert scores(kept) == scores(fresh()), change["metadata"]["name"]
    assert scores(kept)[0][:2] == first[0]
    assert scores(kept)[1][:2] == first[1]


def test_best_effort_pod_is_skipped_in_prescore() -> None:
    # "nothing scheduled, nothing requested, skip in PreScore" (kubernetes#129138)
    table = table_of(mk("node1", 4000, 10000), mk("node2", 4000, 10000))
    plugin = make_plugin(table, None)
    state = CycleState()
    for raw in (pod("p", containers=[]), pod("q")):  # no containers / containers without requests
        st = plugin.pre_score(state, PodInfo.from_raw(raw), table, table.alive_rows())
        assert st.code == Code.SKIP
        # Without PreScore, Score returns 0 for such a pod, as upstream.
        assert list(plugin.score_batch(CycleState(), PodInfo.from_raw(raw), table, table.alive_rows())) == [0, 0]


def test_many_nodes_batch_matches_scalar_formula() -> None:
    rng = np.random.default_rng(7)
    alloc = rng.integers(1, 10_000, size=(500, 3)).astype(np.int64)
    alloc[::7, 2] = 0  # some nodes lack the third resource
    req = rng.integers(0, 12_000, size=(500, 3)).astype(np.int64)
    got = balanced_resource_scorer(req.T, alloc.T)


    for i in range(500):  # straight transcription of upstream's loop
        fr = [min(req[i, j] / alloc[i, j], 1.0) for j in range(3) if alloc[i, j] != 0]
        if len(fr) == 2:
            std = abs((fr[0] - fr[1]) / 2)
        elif len(fr) > 2:
            mean = sum(fr) / len(fr)
            std = math.sqrt(sum((f - mean) * (f - mean) for f in fr) / len(fr))
        else:
            std = 0.0
        assert got[i] == int((1 - std) * 100.0)


@pytest.mark.parametrize("resources", [2, 3])
def test_balance_with_and_without_the_pod_is_the_scorer_twice(resources: int) -> None:
    # The two-resource path scores both in one array; the result must be the scorer's, bit for bit.
    rng = np.random.default_rng(11)
    alloc = rng.integers(1, 10_000, size=(resources, 300)).astype(np.int64)
    pod_requests = np.array([700, 1_500, 0][:resources], dtype=np.int64)
    requested = rng.integers(0, 12_000, size=(resources, 300)).astype(np.int64) + pod_requests[:, None]
    for known_nonzero in (True, False):
        with_pod, without_pod = balance_with_and_without(requested, alloc, pod_requests, known_nonzero)
        assert with_pod.tolist() == balanced_resource_scorer(requested, alloc).tolist()
        assert without_pod.tolist() == balanced_resource_scorer(requested - pod_requests[:, None], alloc).tolist()
    alloc[0, ::5] = 0  # some nodes lack a resource: the general path
    with_pod, without_pod = balance_with_and_without(requested, alloc, pod_requests)
    assert with_pod.tolist() == balanced_resource_scorer(requested, alloc).tolist()
    assert without_pod.tolist() == balanced_resource_scorer(requested - pod_requests[:, None], alloc).tolist()


def test_args_defaults_and_validation() -> None:
    assert [(r.name, r.weight) for r in NodeResourcesBalancedAllocationArgs().resources] == [("cpu", 1), ("memory", 1)]
    a = NodeResourcesBalancedAllocationArgs.model_validate({"resources": [{"name": "cpu"}, {"name": GPU}]})
    assert [(r.name, r.weight) for r in a.resources] == [("cpu", 1), (GPU, 1)]
    assert [r.name for r in NodeResourcesBalancedAllocationArgs.model_validate({"resources": []}).resources] == [
        "cpu", "memory"]
    with pytest.raises(ValidationError, match=r"resources\[1\]\.weight: Invalid value: 2: must be 1"):
        NodeResourcesBalancedAllocationArgs.model_validate({"resources": [{"name": "cpu"}, {"name": "memory",
                                                                                            "weight": 2}]})
    with pytest.raises(ValidationError, match=r'resources\[1\]\.name: Duplicate value: "cpu"'):
        NodeResourcesBalancedAllocationArgs.model_validate({"resources": [{"name": "cpu"}, {"name": "cpu"}]})
    with pytest.raises(ValidationError, match="resource"):
        NodeResourcesBalancedAllocationArgs.model_validate({"resource": []})
