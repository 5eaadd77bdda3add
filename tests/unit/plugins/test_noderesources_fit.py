"""NodeResourcesFit: tables ported from upstream fit_test.go (TestEnoughRequests, TestNotEnoughRequests,
TestStorageRequests, TestFitScore), least_allocated_test.go, most_allocated_test.go and
requested_to_capacity_ratio_test.go, with upstream's expected reasons and scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.noderesources import NodeResourcesFit, NodeResourcesFitArgs
from kubesched.plugins.noderesources.resource_allocation import broken_linear_function, is_extended_resource_name
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import node, pod, table_of

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"


def make_plugin(table: NodeTable, args: dict[str, Any] | None = None) -> NodeResourcesFit:
    handle = Handle(table, FakeClock(), WaitingPods())
    return NodeResourcesFit(None if args is None else NodeResourcesFitArgs.model_validate(args), handle)


def rname(key: str) -> str:
    """Keyword-friendly resource names: "example_com__aaa" -> "example.com/aaa"."""
    if "__" not in key:
        return key
    domain, name = key.split("__", 1)
    return f"{domain.replace('_', '.')}/{name}"


def res(cpu_m: int = 0, mem: int = 0, **scalar: int) -> dict[str, Any]:
    """Container resources like upstream's newResourcePod(framework.Resource{...})."""
    requests = {"cpu": f"{cpu_m}m", "memory": str(mem), **{rname(k): str(v) for k, v in scalar.items()}}
    return {"name": "c", "resources": {"requests": requests}}


def mk_pod(name: str, *containers: dict[str, Any], init: list[dict[str, Any]] | None = None,
           node_name: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = init
    return pod(name, node_name=node_name, **body)


# Upstream's node for TestEnoughRequests: makeAllocatableResources(10, 20, 32, 5, 20, 5).
def fit_node(pods: int = 32) -> dict[str, Any]:
    return node("n1", cpu="10m", memory="20", pods=pods,
                extra={EXT_A: "5", "ephemeral-storage": "20", HUGE_A: "5"})


def run_filter(p: dict[str, Any], existing: dict[str, Any] | None, args: dict[str, Any] | None = None,
               n: dict[str, Any] | None = None) -> Status:
    existing_pods = [{**existing, "spec": {**existing["spec"], "nodeName": "n1"}}] if existing else []
    table = table_of(n or fit_node(), pods=existing_pods)
    plugin = make_plugin(table, args)
    state = CycleState()
    pi = PodInfo.from_raw(p)
    _, st = plugin.pre_filter(state, pi, table)
    assert st.is_success
    return plugin.filter(state, pi, table.node_info(table.row_of("n1")))  # type: ignore[arg-type]


def U(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, "NodeResourcesFit")


def UU(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, "NodeResourcesFit")


CPU_R, MEM_R = "Insufficient cpu", "Insufficient memory"

ENOUGH_REQUESTS = [
    ("no resources requested always fits", mk_pod("p"), mk_pod("e", res(10, 20)), None, SUCCESS),
    ("too many resources fails", mk_pod("p", res(1, 1)), mk_pod("e", res(10, 20)), None, U(CPU_R, MEM_R)),
    ("too many resources fails due to init container cpu",
     mk_pod("p", res(1, 1), init=[res(3, 1)]), mk_pod("e", res(8, 19)), None, U(CPU_R)),
    ("too many resources fails due to highest init container cpu",
     mk_pod("p", res(1, 1), init=[res(3, 1), res(2, 1)]), mk_pod("e", res(8, 19)), None, U(CPU_R)),
    ("too many resources fails due to init container memory",
     mk_pod("p", res(1, 1), init=[res(1, 3)]), mk_pod("e", res(9, 19)), None, U(MEM_R)),
    ("too many resources fails due to highest init container memory",
     mk_pod("p", res(1, 1), init=[res(1, 3), res(1, 2)]), mk_pod("e", res(9, 19)), None, U(MEM_R)),
    ("init container fits because it's the max, not sum, of containers and init containers",
     mk_pod("p", res(1, 1), init=[res(1, 1)]), mk_pod("e", res(9, 19)), None, SUCCESS),
    ("multiple init containers fit because it's the max, not sum, of containers and init containers",
     mk_pod("p", res(1, 1), init=[res(1, 1), res(1, 1)]), mk_pod("e", res(9, 19)), None, SUCCESS),
    ("both resources fit", mk_pod("p", res(1, 1)), mk_pod("e", res(5, 5)), None, SUCCESS),
    ("one resource memory fits", mk_pod("p", res(2, 1)), mk_pod("e", res(9, 5)), None, U(CPU_R)),
    ("one resource cpu fits", mk_pod("p", res(1, 2)), mk_pod("e", res(5, 19)), None, U(MEM_R)),
    ("equal edge case", mk_pod("p", res(5, 1)), mk_pod("e", res(5, 19)), None, SUCCESS),
    ("equal edge case for init container", mk_pod("p", res(4, 1), init=[res(5, 1)]), mk_pod("e", res(5, 19)),
     None, SUCCESS),
    ("extended resource fits", mk_pod("p", res(example_com__aaa=1)), mk_pod("e", res()), None, SUCCESS),
    ("extended resource fits for init container", mk_pod("p", res(), init=[res(example_com__aaa=1)]),
     mk_pod("e", res()), None, SUCCESS),
    ("extended resource capacity enforced", mk_pod("p", res(1, 1, example_com__aaa=10)),
     mk_pod("e", res(example_com__aaa=0)), None, UU(f"Insufficient {EXT_A}")),
    ("extended resource capacity enforced for init container",
     mk_pod("p", res(), init=[res(1, 1, example_com__aaa=10)]), mk_pod("e", res(example_com__aaa=0)), None,
     UU(f"Insufficient {EXT_A}")),
    ("extended resource allocatable enforced", mk_pod("p", res(1, 1, example_com__aaa=1)),
     mk_pod("e", res(example_com__aaa=5)), None, U(f"Insufficient {EXT_A}")),
    ("extended resource allocatable enforced for multiple containers",
     mk_pod("p", res(1, 1, example_com__aaa=3), res(1, 1, example_com__aaa=3)),
     mk_pod("e", res(example_com__aaa=2)), None, UU(f"Insufficient {EXT_A}")),
    ("extended resource allocatable admits multiple init containers",
     mk_pod("p", res(), init=[res(1, 1, example_com__aaa=3), res(1, 1, example_com__aaa=3)]),
     mk_pod("e", res(example_com__aaa=2)), None, SUCCESS),
    ("extended resource allocatable enforced for multiple init containers",
     mk_pod("p", res(), init=[res(1, 1, example_com__aaa=6), res(1, 1, example_com__aaa=3)]),
     mk_pod("e", res(example_com__aaa=2)), None, UU(f"Insufficient {EXT_A}")),
    ("extended resource allocatable enforced for unknown resource", mk_pod("p", res(1, 1, example_com__bbb=1)),
     mk_pod("e", res()), None, UU(f"Insufficient {EXT_B}")),
    ("kubernetes.io resource capacity enforced", mk_pod("p", res(1, 1, kubernetes_io__something=10)),
     mk_pod("e", res()), None, UU(f"Insufficient {K8S_IO_A}")),
    ("kubernetes.io resource capacity enforced for init container",
     mk_pod("p", res(), init=[res(1, 1, **{"subdomain.kubernetes_io__something": 10})]), mk_pod("e", res()), None,
     UU(f"Insufficient {K8S_IO_B}")),
    ("hugepages resource capacity enforced", mk_pod("p", res(1, 1, **{HUGE_A: 10})), mk_pod("e", res(**{HUGE_A: 0})),
     None, UU(f"Insufficient {HUGE_A}")),
    ("hugepages resource allocatable enforced for multiple containers",
     mk_pod("p", res(1, 1, **{HUGE_A: 3}), res(1, 1, **{HUGE_A: 3})), mk_pod("e", res(**{HUGE_A: 2})), None,
     UU(f"Insufficient {HUGE_A}")),
    ("skip checking ignored extended resource", mk_pod("p", res(1, 1, example_com__bbb=1)), mk_pod("e", res()),
     {"ignoredResources": [EXT_B]}, SUCCESS),
    ("resources + pod overhead fits", mk_pod("p", res(1, 1), overhead={"cpu": "3m", "memory": "13"}),
     mk_pod("e", res(5, 5)), None, SUCCESS),
    ("requests + overhead does not fit for memory", mk_pod("p", res(1, 1), overhead={"cpu": "1m", "memory": "15"}),
     mk_pod("e", res(5, 5)), None, U(MEM_R)),
    ("skip checking ignored extended resource via resource groups",
     mk_pod("p", res(1, 1, example_com__bbb=1, kubernetes_io__something=1)), mk_pod("e", res()),
     {"ignoredResourceGroups": ["example.com"]}, UU(f"Insufficient {K8S_IO_A}")),
    ("skip checking extended resource request with quantity zero via resource groups",
     mk_pod("p", res(1, 1, example_com__aaa=0)), mk_pod("e", res(example_com__aaa=6)), None, SUCCESS),
    ("both pod-level and container-level resources fit",
     mk_pod("p", res(1, 1), resources={"requests": {"cpu": "1m", "memory": "2"}}), mk_pod("e", res(5, 5)), None,
     SUCCESS),
    ("pod-level cpu resource not fit", mk_pod("p", res(1, 1), resources={"requests": {"cpu": "7m", "memory": "2"}}),
     mk_pod("e", res(5, 5)), None, U(CPU_R)),
    ("pod-level memory resource not fit",
     mk_pod("p", res(1, 1), resources={"requests": {"cpu": "3m", "memory": "2"}}), mk_pod("e", res(5, 19)), None,
     U(MEM_R)),
    ("pod-level hugepages resource not fit",
     mk_pod("p", resources={"requests": {"cpu": "3m", "memory": "2", HUGE_A: "10"}}), None, None,
     UU(f"Insufficient {HUGE_A}")),
]


@pytest.mark.parametrize(("name", "p", "existing", "args", "want"), ENOUGH_REQUESTS,
                         ids=[c[0] for c in ENOUGH_REQUESTS])
def test_enough_requests(name: str, p: dict[str, Any], existing: dict[str, Any] | None,
                         args: dict[str, Any] | None, want: Status) -> None:
    assert run_filter(p, existing, args) == want


# TestNotEnoughRequests: node allows one pod and already has one.
NOT_ENOUGH_PODS = [
    ("even without specified resources, predicate fails when there's no space for additional pod",
     mk_pod("p"), mk_pod("e", res(10, 20)), U("Too many pods")),
    ("even if both resources fit, predicate fails when there's no space for additional pod",
     mk_pod("p", res(1, 1)), mk_pod("e", res(5, 5)), U("Too many pods")),
    ("even for equal edge case, predicate fails when there's no space for additional pod",
     mk_pod("p", res(5, 1)), mk_pod("e", res(5, 19)), U("Too many pods")),
    ("even for equal edge case, predicate fails when there's no space for additional pod due to init container",
     mk_pod("p", res(5, 1), init=[res(5, 1)]), mk_pod("e", res(5, 19)), U("Too many pods")),
    ("all reasons of a node are kept, pods first", mk_pod("p", res(1, 1)), mk_pod("e", res(10, 20)),
     U("Too many pods", CPU_R, MEM_R)),
]


@pytest.mark.parametrize(("name", "p", "existing", "want"), NOT_ENOUGH_PODS, ids=[c[0] for c in NOT_ENOUGH_PODS])
def test_not_enough_pods(name: str, p: dict[str, Any], existing: dict[str, Any], want: Status) -> None:
    assert run_filter(p, existing, n=fit_node(pods=1)) == want


def test_storage_requests() -> None:
    # TestStorageRequests: ephemeral-storage allocatable 20.
    eph = {"name": "c", "resources": {"requests": {"ephemeral-storage": "25"}}}
    assert run_filter(mk_pod("p", eph), mk_pod("e", res(2, 10))) == UU("Insufficient ephemeral-storage")
    eph10 = {"name": "c", "resources": {"requests": {"ephemeral-storage": "10"}}}
    used15 = {"name": "c", "resources": {"requests": {"ephemeral-storage": "15"}}}
    assert run_filter(mk_pod("p", eph10), mk_pod("e", used15)) == U("Insufficient ephemeral-storage")
    assert run_filter(mk_pod("p", eph10), mk_pod("e", res(2, 10))) == SUCCESS
    # "pod fit with memory, cpu only": the container requests exactly the 10m/20 the node has.
    assert run_filter(mk_pod("p", res(10, 20)), None) == SUCCESS


def test_filter_batch_groups_rows_by_outcome() -> None:
    nodes = [
        node("big", cpu="4", memory="8Gi"),
        node("small-cpu", cpu="500m", memory="8Gi"),
        node("tiny", cpu="500m", memory="64Mi"),
        node("full", cpu="4", memory="8Gi", pods=1),
        node("big2", cpu="4", memory="8Gi"),
        node("tiny2", cpu="500m", memory="64Mi"),
        node("busy", cpu="2", memory="8Gi"),
    ]
    existing = [pod("x", cpu="1", memory="1Gi", node_name="full"), pod("y", cpu="1500m", node_name="busy")]
    table = table_of(*nodes, pods=existing)
    plugin = make_plugin(table)
    p = PodInfo.from_raw(pod("p", cpu="1", memory="1Gi"))
    state = CycleState()
    plugin.pre_filter(state, p, table)
    rows = table.alive_rows()
    v = plugin.filter_batch(state, p, table, rows)
    by_name = {table.names[r]: (v.statuses[c - 1] if c else SUCCESS) for r, c in zip(rows, v.codes, strict=True)}
    assert by_name["big"] == by_name["big2"] == SUCCESS
    # cpu request exceeds the whole node: preemption cannot help.
    assert by_name["small-cpu"] == UU(CPU_R)
    assert by_name["tiny"] == by_name["tiny2"] == UU(CPU_R, MEM_R)
    assert by_name["full"] == U("Too many pods")
    # enough cpu exists on the node but is taken: preemption could help.
    assert by_name["busy"] == U(CPU_R)
    assert len(v.statuses) == 4  # one Status per distinct outcome, shared by the rows
    # The per-node path (base-class adapter) agrees with the batch.
    for r in rows:
        assert plugin.filter(state, p, table.node_info(r)) == by_name[table.names[r]]


def test_a_node_that_grows_stops_being_unresolvable_for_the_next_pod() -> None:
    table = table_of(node("n", cpu="500m"))
    plugin = make_plugin(table)

    def verdict(name: str) -> Status:
        p = PodInfo.from_raw(pod(name, cpu="1"))
        state = CycleState()
        plugin.pre_filter(state, p, table)
        return plugin.filter(state, p, table.node_info(0))

    assert verdict("a") == UU(CPU_R)  # more than the whole node: preemption cannot help
    table.add_pod(PodInfo.from_raw(pod("x", cpu="1500m", node_name="n")))
    table.upsert_node(node("n", cpu="2"))  # resized: 2 cpu, 1.5 taken
    assert verdict("b") == U(CPU_R)  # now eviction would make room
    table.upsert_node(node("n", cpu="4"))
    assert verdict("c") == SUCCESS


def test_batch_too_big_bits_follow_node_changes_between_pods_of_one_family() -> None:
    # The batch keeps the "request exceeds the whole node" bits per request family until a node
    # changes: a resize between two pods with equal requests must change the second's verdicts
    # exactly as the uncached one-node path (which reads allocatable directly) sees them.
    table = table_of(node("a", cpu="500m"), node("b", cpu="4"), node("c", cpu="500m"))
    table.add_pod(PodInfo.from_raw(pod("x", cpu="3500m", node_name="b")))
    plugin = make_plugin(table)

    def verdicts(name: str) -> list[Status]:
        p = PodInfo.from_raw(pod(name, cpu="1", memory="1Gi"))
        state = CycleState()
        plugin.pre_filter(state, p, table)
        rows = table.alive_rows()
        v = plugin.filter_batch(state, p, table, rows)
        got = [v.statuses[c - 1] if c else SUCCESS for c in v.codes.tolist()]
        assert got == [plugin.filter(state, p, table.node_info(r)) for r in rows.tolist()]
        return got

    assert verdicts("p1") == [UU(CPU_R), U(CPU_R), UU(CPU_R)]
    table.upsert_node(node("a", cpu="2"))  # room now, 1.5 cpu free
    table.upsert_node(node("b", cpu="500m"))  # shrunk below the request: unresolvable
    assert verdicts("p2") == [SUCCESS, UU(CPU_R), UU(CPU_R)]


def test_pre_filter_state_of_extended_requests_is_shared_and_follows_new_columns() -> None:
    # PreFilter states are kept per (table, column count, requests), extended requests included:
    # a second pod asking the same reuses the state, and once a new resource column appears the
    # state is computed again and judges exactly as a fresh plugin (no cached state) does.
    table = table_of(node("a", extra={"example.com/foo": "2"}), node("b"))
    plugin = make_plugin(table)

    def prefiltered(name: str, **requests: str) -> tuple[CycleState, PodInfo]:
        p = PodInfo.from_raw(pod(name, cpu="1", extra_requests=requests))
        state = CycleState()
        plugin.pre_filter(state, p, table)
        return state, p

    first, _ = prefiltered("p1", **{"example.com/foo": "1"})
    second, _ = prefiltered("p2", **{"example.com/foo": "1"})
    assert second.get("PreFilterNodeResourcesFit") is first.get("PreFilterNodeResourcesFit")
    table.upsert_node(node("c", extra={"example.com/bar": "1", "example.com/foo": "1"}))  # a new column
    third, p3 = prefiltered("p3", **{"example.com/foo": "1"})
    assert third.get("PreFilterNodeResourcesFit") is not first.get("PreFilterNodeResourcesFit")
    fresh = make_plugin(table)
    fresh_state = CycleState()
    fresh.pre_filter(fresh_state, p3, table)
    rows = table.alive_rows()
    got = plugin.filter_batch(third, p3, table, rows)
    want = fresh.filter_batch(fresh_state, p3, table, rows)
    assert got.codes.tolist() == want.codes.tolist() == [0, 1, 0]
    assert got.statuses == want.statuses == [UU("Insufficient example.com/foo")]


def test_filter_without_prefilter_is_an_error() -> None:
    table = table_of(node("n1"))
    plugin = make_plugin(table)
    st = plugin.filter(CycleState(), PodInfo.from_raw(pod("p", cpu="1")), table.node_info(0))
    assert st.code == Code.ERROR


def test_many_extended_resources_use_unpacked_grouping() -> None:
    extra = {f"example.com/r{i}": "1" for i in range(40)}
    table = table_of(node("a", extra=extra), node("b"))
    plugin = make_plugin(table)
    p = PodInfo.from_raw(pod("p", extra_requests={k: "1" for k in extra}))
    state = CycleState()
    plugin.pre_filter(state, p, table)
    v = plugin.filter_batch(state, p, table, table.alive_rows())
    assert list(v.codes) == [0, 1]
    assert v.statuses[0].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert len(v.statuses[0].reasons) == 40


def test_events_to_register() -> None:
    plugin = make_plugin(table_of(node("n1")))
    events = plugin.events_to_register()
    assert any(e.matches(ClusterEvent(POD, ActionType.DELETE)) for e in events)
    assert any(e.matches(ClusterEvent(NODE, ActionType.ADD)) for e in events)
    assert any(e.matches(ClusterEvent(NODE, ActionType.UPDATE_NODE_ALLOCATABLE)) for e in events)
    assert not any(e.matches(ClusterEvent(NODE, ActionType.UPDATE_NODE_CONDITION)) for e in events)
    assert not any(e.matches(ClusterEvent(POD, ActionType.ADD)) for e in events)


# -- Score ----------------------------------------------------------------------------------------------


def no_containers(name: str, node_name: str = "") -> dict[str, Any]:
    # st.MakePod().Obj(): no containers at all, so no non-zero defaults either.
    return pod(name, node_name=node_name, containers=[])


def req_pod(name: str, *reqs: tuple[str, str], node_name: str = "", **extra: str) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "resources": {"requests": {"cpu": c, "memory": m, **extra}}}
                  for i, (c, m) in enumerate(reqs)]
    return pod(name, node_name=node_name, containers=containers)


def cap(name: str, cpu: str, memory: str, **extra: str) -> dict[str, Any]:
    return node(name, cpu=cpu, memory=memory, extra={rname(k): v for k, v in extra.items()})


def scores(args: dict[str, Any], requested: dict[str, Any], nodes: list[dict[str, Any]],
           existing: list[dict[str, Any]], run_pre_score: bool = True) -> list[int]:
    table = table_of(*nodes, pods=existing)
    plugin = make_plugin(table, args)
    p = PodInfo.from_raw(requested)
    state = CycleState()
    rows = table.alive_rows()
    if run_pre_score:
        assert plugin.pre_score(state, p, table, rows).is_success
    batch = plugin.score_batch(state, p, table, rows)
    assert not isinstance(batch, Status)
    per_node = [plugin.score(state, p, table.node_info(r)) for r in rows]
    assert [s for s, _ in per_node] == list(batch)
    assert all(st.is_success for _, st in per_node)
    return [int(s) for s in batch]


def strategy(t: str, resources: list[dict[str, Any]] | None = None, shape: list[tuple[int, int]] | None = None
             ) -> dict[str, Any]:
    s: dict[str, Any] = {"type": t, "resources": resources or [{"name": "cpu", "weight": 1},
                                                               {"name": "memory", "weight": 1}]}
    if shape is not None:
        s["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": sc} for u, sc in shape]}
    return {"scoringStrategy": s}


N4 = cap("node1", "4000", "10000")
N6 = cap("node2", "6000", "10000")
EXISTING_FIT = [req_pod("e1", ("2000", "4000"), node_name="node1"), req_pod("e2", ("1000", "2000"), node_name="node2")]

FIT_SCORE = [
    # TestFitScore
    ("RequestedToCapacityRatio case1", strategy("RequestedToCapacityRatio", shape=[(0, 10), (100, 0)]),
     req_pod("p", ("3000", "5000")), [N4, N6], EXISTING_FIT, [10, 32]),
    ("RequestedToCapacityRatio case2", strategy("RequestedToCapacityRatio", shape=[(0, 0), (100, 10)]),
     req_pod("p", ("3000", "5000")), [N4, N6], EXISTING_FIT, [95, 68]),
    ("MostAllocated", strategy("MostAllocated"), req_pod("p", ("1000", "2000")), [N4, N6], EXISTING_FIT, [67, 36]),
    ("LeastAllocated", strategy("LeastAllocated"), req_pod("p", ("1000", "2000")), [N4, N6], EXISTING_FIT, [32, 63]),
    # least_allocated_test.go TestLeastAllocatedScoringStrategy
    ("least: nothing scheduled, nothing requested", strategy("LeastAllocated"), no_containers("p"),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], [], [100, 100]),
    ("least: nothing scheduled, resources requested, differently sized nodes", strategy("LeastAllocated"),
     req_pod("p", ("1000", "2000"), ("2000", "3000")), [N4, N6], [], [37, 50]),
    ("least: no resources requested, pods scheduled", strategy("LeastAllocated"), no_containers("p"),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [no_containers("a", "node1"), no_containers("b", "node1"), no_containers("c", "node2"),
      no_containers("d", "node2")], [100, 100]),
    ("least: no resources requested, pods scheduled with resources", strategy("LeastAllocated"), no_containers("p"),
     [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "0"), node_name="node1"),
      req_pod("c", ("3000", "0"), node_name="node2"), req_pod("d", ("3000", "5000"), node_name="node2")], [70, 57]),
    ("least: resources requested, pods scheduled with resources", strategy("LeastAllocated"),
     req_pod("p", ("1000", "2000"), ("2000", "3000")),
     [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "5000"), node_name="node2")], [57, 45]),
    ("least: resources requested, pods scheduled with resources, differently sized nodes", strategy("LeastAllocated"),
     req_pod("p", ("1000", "2000"), ("2000", "3000")),
     [cap("node1", "10000", "20000"), cap("node2", "10000", "50000")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "5000"), node_name="node2")], [57, 60]),
    ("least: requested resources exceed node capacity", strategy("LeastAllocated"), req_pod("p", ("3000", "0")),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "5000"), node_name="node2")], [50, 25]),
    ("least: zero node resources, pods scheduled with resources", strategy("LeastAllocated"), no_containers("p"),
     [cap("node1", "0", "0"), cap("node2", "0", "0")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "5000"), node_name="node2")], [0, 0]),
    ("least: different weight on CPU and memory",
     strategy("LeastAllocated", [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]),
     req_pod("p", ("1000", "2000"), ("2000", "3000")), [N4, N6], [], [41, 50]),
    ("least: bypass extended resource if the pod does not request",
     strategy("LeastAllocated", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                                 {"name": "intel.com/foo", "weight": 1}]),
     req_pod("p", ("1000", "2000"), ("2000", "3000")),
     [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", intel_com__foo="4")], [], [50, 50]),
    ("least: honor extended resource if the pod requests",
     strategy("LeastAllocated", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                                 {"name": "intel.com/foo", "weight": 1}]),
     req_pod("p", ("3000", "5000"), **{"intel.com/foo": "2"}),
     [cap("node1", "6000", "10000", intel_com__foo="4"), cap("node2", "6000", "10000", intel_com__foo="10")],
     [], [50, 60]),
    # most_allocated_test.go TestMostAllocatedScoringStrategy
    ("most: nothing scheduled, nothing requested", strategy("MostAllocated"), no_containers("p"),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], [], [0, 0]),
    ("most: nothing scheduled, resources requested, differently sized nodes", strategy("MostAllocated"),
     req_pod("p", ("1000", "2000"), ("2000", "3000")), [N4, N6], [], [62, 50]),
    ("most: no resources requested, pods scheduled with resources", strategy("MostAllocated"), no_containers("p"),
     [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "0"), node_name="node1"),
      req_pod("c", ("3000", "0"), node_name="node2"), req_pod("d", ("3000", "5000"), node_name="node2")], [30, 42]),
    ("most: resources requested, pods scheduled with resources", strategy("MostAllocated"),
     req_pod("p", ("1000", "2000"), ("2000", "3000")),
     [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "5000"), node_name="node2")], [42, 55]),
    ("most: different weight on CPU and memory",
     strategy("MostAllocated", [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]),
     req_pod("p", ("1000", "2000"), ("2000", "3000")), [N4, N6], [], [58, 50]),
    ("most: requested resources at node capacity", strategy("MostAllocated"), req_pod("p", ("5000", "0")),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [req_pod("a", ("3000", "0"), node_name="node1"), req_pod("b", ("3000", "5000"), node_name="node2")], [50, 75]),
]


@pytest.mark.parametrize(("name", "args", "requested", "nodes", "existing", "want"), FIT_SCORE,
                         ids=[c[0] for c in FIT_SCORE])
@pytest.mark.parametrize("run_pre_score", [True, False], ids=["prescore", "no-prescore"])
def test_fit_score(name: str, args: dict[str, Any], requested: dict[str, Any], nodes: list[dict[str, Any]],
                   existing: list[dict[str, Any]], want: list[int], run_pre_score: bool) -> None:
    assert scores(args, requested, nodes, existing, run_pre_score) == want


def test_score_uses_non_zero_requests_for_pods_without_requests() -> None:
    # A pod with a container but no requests counts as 100m / 200Mi for scoring (not for Filter).
    n = node("n1", cpu="1", memory="1000Mi")
    got = scores(strategy("LeastAllocated"), pod("p"), [n], [pod("e", node_name="n1")])
    # cpu: (1000 - 200) * 100 / 1000 = 80; memory: (1000Mi - 400Mi) * 100 / 1000Mi = 60
    assert got == [70]


# requested_to_capacity_ratio_test.go TestBrokenLinearFunction
@pytest.mark.parametrize(("points", "cases"), [
    ([(10, 1), (90, 9)], [(0, 1), (10, 1), (15, 1), (40, 4), (90, 9), (100, 9)]),
    ([(0, 2), (40, 10), (100, 0)], [(0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    ([(0, 2), (40, 2), (100, 2)], [(0, 2), (20, 2), (100, 2), (110, 2)]),
])
def test_broken_linear_function(points: list[tuple[int, int]], cases: list[tuple[int, int]]) -> None:
    f = broken_linear_function(points)
    got = f(np.array([p for p, _ in cases], dtype=np.int64))
    assert list(got) == [want for _, want in cases]


def test_broken_linear_function_truncates_toward_zero() -> None:
    # A falling segment: 100 + (0 - 100) * 1 / 3 = 100 - 33 (Go truncation), not 100 - 34 (floor).
    f = broken_linear_function([(0, 100), (3, 0)])
    assert list(f(np.array([1, 2], dtype=np.int64))) == [67, 34]


# requested_to_capacity_ratio_test.go TestRequestedToCapacityRatioScoringStrategy
RTCR = [
    ("nothing scheduled, nothing requested (default - least requested nodes have priority)",
     no_containers("p"), [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], [], [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes (default - least requested nodes have priority)",
     req_pod("p", ("1000", "2000"), ("2000", "3000")), [N4, N6], [], [38, 50]),
    ("no resources requested, pods scheduled with resources (default - least requested nodes have priority)",
     no_containers("p"), [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")],
     [req_pod("a", ("3000", "5000"), node_name="node1"), req_pod("b", ("3000", "5000"), node_name="node2")],
     [38, 50]),
]


@pytest.mark.parametrize(("name", "requested", "nodes", "existing", "want"), RTCR, ids=[c[0] for c in RTCR])
def test_requested_to_capacity_ratio(name: str, requested: dict[str, Any], nodes: list[dict[str, Any]],
                                     existing: list[dict[str, Any]], want: list[int]) -> None:
    args = strategy("RequestedToCapacityRatio", shape=[(0, 10), (100, 0)])
    assert scores(args, requested, nodes, existing) == want


def test_requested_to_capacity_ratio_bin_packing_extended_resources() -> None:
    # After upstream TestResourceBinPackingSingleExtended: shape {0:0, 100:1}, intel.com/foo weight 1.
    args = strategy("RequestedToCapacityRatio", [{"name": "intel.com/foo", "weight": 1}], [(0, 0), (100, 1)])
    n1 = cap("node1", "4000", "10000", intel_com__foo="4")
    n2 = cap("node2", "4000", "10000", intel_com__foo="8")
    assert scores(args, no_containers("p"), [n1, n2], []) == [0, 0]
    # node1: f(2*100/4 = 50) = 5, node2: f(25) = 2 (scaled x10)
    assert scores(args, req_pod("p", ("0", "0"), **{"intel.com/foo": "2"}), [n1, n2], []) == [5, 2]
    ex1 = req_pod("e1", ("0", "0"), node_name="node1", **{"intel.com/foo": "2"})
    ex2 = req_pod("e2", ("0", "0"), node_name="node2", **{"intel.com/foo": "2"})
    assert scores(args, req_pod("p", ("0", "0"), **{"intel.com/foo": "2"}), [n1, n2], [ex1, ex2]) == [10, 5]


# -- args --------------------------------------------------------------------------------------------------


def test_args_defaults() -> None:
    a = NodeResourcesFitArgs()
    assert a.scoring_strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in a.scoring_strategy.resources] == [("cpu", 1), ("memory", 1)]
    b = NodeResourcesFitArgs.model_validate({"scoringStrategy": {"type": "MostAllocated",
                                                                 "resources": [{"name": "cpu"}]}})
    assert [(r.name, r.weight) for r in b.scoring_strategy.resources] == [("cpu", 1)]
    c = NodeResourcesFitArgs.model_validate({"scoringStrategy": {"type": "MostAllocated"}})
    assert [r.name for r in c.scoring_strategy.resources] == ["cpu", "memory"]
    assert NodeResourcesFitArgs.model_validate({"scoringStrategy": None}).scoring_strategy.type == "LeastAllocated"
    # snake_case from Python works too
    assert NodeResourcesFitArgs(ignored_resources=["example.com/x"]).ignored_resources == ["example.com/x"]


@pytest.mark.parametrize(("raw", "message"), [
    ({"ignoredResource": ["x"]}, "ignoredResource"),
    ({"scoringStrategy": {"type": "Foo"}},
     'scoringStrategy.type: Unsupported value: "Foo": supported values: "LeastAllocated", "MostAllocated", '
     '"RequestedToCapacityRatio"'),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "memory", "weight": -1}]}},
     "scoringStrategy.resources[0].weight: Invalid value: -1: resource weight of memory not in valid range (0, 100]"),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
     "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
     "scoringStrategy.requestedToCapacityRatio: Required value"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}},
     "scoringStrategy.shape: Required value: at least one point must be specified"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}},
     "scoringStrategy.shape[1].utilization: Invalid value: 10: values must be sorted in increasing order"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 10, "score": 1}, {"utilization": 10, "score": 2}]}}},
     "values must be sorted in increasing order"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 101, "score": 1}]}}},
     "scoringStrategy.shape[0].utilization: Invalid value: 101: not in valid range [0, 100]"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 10, "score": 11}]}}},
     "scoringStrategy.shape[0].score: Invalid value: 11: not in valid range [0, 10]"),
    ({"ignoredResourceGroups": ["example.com/aa"]},
     "ignoredResourceGroups[0]: Invalid value: \"example.com/aa\": resource group name can't contain '/'"),
    ({"ignoredResources": ["-bad"]}, "ignoredResources[0]: Invalid value: \"-bad\": name part must consist of"),
    ({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weigth": 1}]}}, "weigth"),
])
def test_args_validation_errors(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as e:
        NodeResourcesFitArgs.model_validate(raw)
    assert message in str(e.value)


def test_args_several_errors_are_aggregated() -> None:
    with pytest.raises(ValidationError) as e:
        NodeResourcesFitArgs.model_validate({"scoringStrategy": {"type": "Nope", "resources": [
            {"name": "cpu", "weight": 200}]}})
    assert '[scoringStrategy.type: Unsupported value: "Nope"' in str(e.value)
    assert "scoringStrategy.resources[0].weight: Invalid value: 200" in str(e.value)


def test_is_extended_resource_name() -> None:
    assert is_extended_resource_name("example.com/aaa")
    assert is_extended_resource_name("nvidia.com/gpu")
    assert not is_extended_resource_name("cpu")
    assert not is_extended_resource_name("kubernetes.io/something")
    assert not is_extended_resource_name("subdomain.kubernetes.io/something")
    assert not is_extended_resource_name("hugepages-2Mi")
    assert not is_extended_resource_name("requests.example.com/x")
    assert not is_extended_resource_name("Example.com/x")


def test_batch_verdicts_of_one_family_stay_exact_as_new_outcomes_appear() -> None:
    # The batch maps each packed outcome to its Status through a code table per reasons tuple,
    # grown as outcomes are first seen. Pods of one family filtered one after another while the
    # nodes fill up (new outcomes appear) must get exactly the verdicts of a fresh plugin, and
    # verdicts handed out earlier must keep their statuses.
    rng = np.random.default_rng(3)
    nodes = [node(f"n{i}", cpu=f"{int(c)}m", memory=str(int(m)), pods=int(p)) for i, (c, m, p) in enumerate(
        zip(rng.integers(200, 4000, 40), rng.integers(10**8, 4 * 10**9, 40), rng.integers(1, 6, 40), strict=True)
    )]
    table = table_of(*nodes)
    plugin = make_plugin(table)
    rows = table.alive_rows()

    def per_row(v: Any) -> list[Status]:
        return [v.statuses[c - 1] if c else SUCCESS for c in v.codes.tolist()]

    handed_out = []
    for i in range(30):
        # Two families with reasons tuples of one length (cpu only, memory only), and both.
        requests = [{"cpu": f"{300 + 100 * (i % 4)}m"}, {"memory": str(5 * 10**8)}, {"cpu": "400m", "memory": "1"}]
        p = PodInfo.from_raw(pod(f"p{i}", **requests[i % 3]))
        state, fresh_state = CycleState(), CycleState()
        plugin.pre_filter(state, p, table)
        fresh = make_plugin(table)
        fresh.pre_filter(fresh_state, p, table)
        got = plugin.filter_batch(state, p, table, rows)
        assert per_row(got) == per_row(fresh.filter_batch(fresh_state, p, table, rows))
        handed_out.append((got, per_row(got)))
        table.add_pod(PodInfo.from_raw(pod(f"x{i}", cpu="700m", memory=str(3 * 10**8), node_name=f"n{i % 40}")))
    assert all(per_row(v) == want for v, want in handed_out)


def test_a_few_rows_get_the_batchs_verdicts_codes_and_statuses(monkeypatch: pytest.MonkeyPatch) -> None:
    # Up to eight rows (an incremental pass's changed rows) are packed in Python: the same codes
    # and the same list of statuses, in the same order, as the array path gives for those rows.
    from kubesched.plugins.noderesources import fit as fit_module

    rng = np.random.default_rng(4)
    nodes = [node(f"n{i}", cpu=f"{int(c)}m", memory=str(int(m)), pods=int(p)) for i, (c, m, p) in enumerate(
        zip(rng.integers(200, 4000, 30), rng.integers(10**8, 4 * 10**9, 30), rng.integers(1, 4, 30), strict=True)
    )]
    table = table_of(*nodes, pods=[pod(f"x{i}", cpu="300m", node_name=f"n{i}") for i in range(0, 30, 3)])
    requests = [{"cpu": "900m"}, {"memory": str(2 * 10**9)}, {"cpu": "1500m", "memory": "1"}, {"cpu": "100m"}]
    few, batch = make_plugin(table), make_plugin(table)
    for i in range(60):
        if i % 2:  # fresh plugins: every outcome of the call is new to them (order of registration)
            few, batch = make_plugin(table), make_plugin(table)
        p = PodInfo.from_raw(pod(f"p{i}", **requests[i % len(requests)]))
        rows = np.sort(rng.choice(table.alive_rows(), size=int(rng.integers(2, 9)), replace=False))
        few_state, batch_state = CycleState(), CycleState()
        few.pre_filter(few_state, p, table)
        batch.pre_filter(batch_state, p, table)
        got = few.filter_batch(few_state, p, table, rows)
        with monkeypatch.context() as m:
            m.setattr(fit_module, "_FEW_ROWS", 0)
            want = batch.filter_batch(batch_state, p, table, rows)
        assert got.codes.tolist() == want.codes.tolist() and got.statuses == want.statuses, i
