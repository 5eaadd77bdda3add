"""The columnar node table (snapshot/table.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kubesched.snapshot.pod import HostPort, PodInfo
from kubesched.snapshot.table import CPU, MEMORY, PODS, NodeSpecError, NodeTable, Taint
from kubesched.testing import node, pod, pod_info, table_of

GI = 1024**3
MI = 1024**2


def cpu_req(t: NodeTable, name: str) -> int:
    row = t.row_of(name)
    assert row is not None
    return int(t.requested[row, CPU])


def pods_on(t: NodeTable, name: str) -> int:
    row = t.row_of(name)
    assert row is not None
    return int(t.requested[row, PODS])


# ---------------------------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------------------------


def test_upsert_parses_allocatable_labels_and_flags() -> None:
    t = NodeTable()
    row = t.upsert_node(node("n1", cpu="3500m", memory="2Gi", pods=30, labels={"zone": "a"}, unschedulable=True))
    assert t.row_of("n1") == row and len(t) == 1
    assert t.allocatable[row, CPU] == 3500
    assert t.allocatable[row, MEMORY] == 2 * GI
    assert t.allocatable[row, PODS] == 30
    info = t.node_info(row)
    assert info.name == "n1" and info.labels["zone"] == "a" and info.unschedulable
    assert info.allocatable("cpu") == 3500 and info.allocatable("nvidia.com/gpu") == 0
    assert t.alive_rows().tolist() == [row]


def test_update_keeps_pods_and_replaces_allocatable() -> None:
    t = table_of(node("n1", cpu="4"))
    t.add_pod(pod_info("p", cpu="1", node_name="n1"))
    gen = t.generation
    row = t.upsert_node(node("n1", cpu="8", labels={"new": "yes"}))
    assert t.row_of("n1") == row and len(t) == 1
    assert t.allocatable[row, CPU] == 8000
    assert cpu_req(t, "n1") == 1000 and pods_on(t, "n1") == 1
    assert t.labels[row]["new"] == "yes"
    assert t.generation > gen
    assert t.free(np.array([row]))[0, CPU] == 7000


def test_update_dropping_an_extended_resource_zeroes_it() -> None:
    t = table_of(node("n1", extra={"example.com/gpu": "4"}))
    row = t.row_of("n1")
    assert row is not None
    col = t.resource_index["example.com/gpu"]
    assert t.allocatable[row, col] == 4
    t.upsert_node(node("n1"))
    assert t.allocatable[row, col] == 0


def test_remove_node() -> None:
    t = table_of(node("a"), node("b"), node("c"))
    t.remove_node("b")
    assert t.row_of("b") is None and len(t) == 2
    assert t.node_names(t.alive_rows()) == ["a", "c"]
    t.remove_node("b")  # idempotent
    t.remove_node("never-existed")
    assert len(t) == 2


def test_removed_row_is_recycled_clean() -> None:
    t = NodeTable()
    t.upsert_node(node("a"))
    rb = t.upsert_node(
        node(
            "b",
            cpu="16",
            labels={"zone": "z1"},
            unschedulable=True,
            taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
        )
    )
    zone = t.label_column("zone")
    t.add_pod(pod_info("p", cpu="2", node_name="b"))
    t.remove_node("b")
    assert zone.codes[rb] == -1
    rc = t.upsert_node(node("c", cpu="2"))
    assert rc == rb, "the freed row is reused"
    assert t.names[rc] == "c" and t.row_of("c") == rc
    assert t.allocatable[rc, CPU] == 2000
    assert cpu_req(t, "c") == 0 and pods_on(t, "c") == 0
    assert not t.unschedulable[rc]
    assert t.taints(rc) == ()
    assert zone.codes[rc] == -1
    assert t.node_info(rc).pods == []
    assert "zone" not in t.labels[rc]
    assert sorted(t.node_names(t.alive_rows())) == ["a", "c"]


def test_growth_past_initial_capacity() -> None:
    t = NodeTable(capacity=64)
    zone = t.label_column("zone")
    for i in range(200):
        t.upsert_node(node(f"n{i}", cpu=str(i + 1), labels={"zone": f"z{i % 3}"}))
    assert len(t) == 200 and len(t.alive_rows()) == 200
    for i in (0, 63, 64, 127, 128, 199):
        row = t.row_of(f"n{i}")
        assert row is not None
        assert t.allocatable[row, CPU] == (i + 1) * 1000
        assert zone.codes[row] == zone.values[f"z{i % 3}"]
    t.add_pod(pod_info("p", cpu="1", node_name="n199"))
    assert cpu_req(t, "n199") == 1000
    assert t.free(t.alive_rows()).shape == (200, len(t.resource_names))


def test_bad_nodes_are_rejected_with_the_node_and_field_named() -> None:
    t = NodeTable()
    with pytest.raises(NodeSpecError, match=r"metadata\.name"):
        t.upsert_node({"metadata": {}})
    with pytest.raises(NodeSpecError, match=r"node bad: status.allocatable.cpu"):
        t.upsert_node(node("bad", cpu="lots"))
    with pytest.raises(NodeSpecError, match=r"node bad: spec.taints\[0\]"):
        t.upsert_node(node("bad", taints=[{"key": "k", "effect": "Sometimes"}]))
    assert len(t) == 0 and t.row_of("bad") is None


# ---------------------------------------------------------------------------------------------
# Pods
# ---------------------------------------------------------------------------------------------


def test_add_and_remove_pod_update_requested_nonzero_and_pod_count() -> None:
    t = table_of(node("n1"))
    row = t.row_of("n1")
    assert row is not None
    p = pod_info("p", cpu="500m", memory="1Gi", node_name="n1")
    q = pod_info("q", node_name="n1")  # no requests: non-zero defaults for scoring only
    t.add_pod(p)
    t.add_pod(q)
    assert t.requested[row, CPU] == 500 and t.requested[row, MEMORY] == GI
    assert t.requested[row, PODS] == 2
    assert t.nonzero_requested[row].tolist() == [500 + 100, GI + 200 * MI]
    assert {x.name for x in t.node_info(row).pods} == {"p", "q"}
    assert t.pod(p.uid) is p

    assert t.remove_pod(p.uid) is p
    assert t.requested[row, CPU] == 0 and t.requested[row, PODS] == 1
    assert t.nonzero_requested[row].tolist() == [100, 200 * MI]
    assert t.remove_pod(p.uid) is None  # idempotent
    t.remove_pod(q.uid)
    assert t.requested[row].tolist() == [0] * len(t.resource_names)
    assert t.nonzero_requested[row].tolist() == [0, 0]


def test_readding_a_pod_replaces_it_and_can_move_it() -> None:
    t = table_of(node("a"), node("b"))
    raw = pod("p", cpu="1", node_name="a")
    t.add_pod(PodInfo.from_raw(raw))
    t.add_pod(PodInfo.from_raw(raw))
    assert cpu_req(t, "a") == 1000 and pods_on(t, "a") == 1
    moved = PodInfo.from_raw({**raw, "spec": {**raw["spec"], "nodeName": "b"}})
    t.add_pod(moved)
    assert cpu_req(t, "a") == 0 and cpu_req(t, "b") == 1000


def test_pod_without_node_is_rejected() -> None:
    t = table_of(node("a"))
    with pytest.raises(ValueError, match="default/p"):
        t.add_pod(pod_info("p"))


def test_host_ports_are_reference_counted() -> None:
    t = table_of(node("a"))
    row = t.row_of("a")
    assert row is not None
    ports = [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    p1 = pod_info("p1", node_name="a", containers=ports)
    p2 = pod_info("p2", node_name="a", containers=ports)
    hp = HostPort("0.0.0.0", "TCP", 8080)
    t.add_pod(p1)
    t.add_pod(p2)
    assert t.used_ports[row] == {hp: 2} and t.has_used_ports[row]
    t.remove_pod(p1.uid)
    assert t.used_ports[row] == {hp: 1} and t.has_used_ports[row]
    t.remove_pod(p2.uid)
    assert t.used_ports[row] == {} and not t.has_used_ports[row]


def test_pods_without_host_ports_leave_the_used_ports_flag_alone() -> None:
    # Accounting skips the ports bookkeeping of a pod without host ports: the flag must still
    # follow the ported pods around it, whatever order the two kinds come and go in.
    t = table_of(node("a"))
    row = t.row_of("a")
    assert row is not None
    ports = [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    plain1, plain2 = pod_info("plain1", node_name="a"), pod_info("plain2", node_name="a")
    ported = pod_info("ported", node_name="a", containers=ports)
    steps = [
        (t.add_pod, plain1, False), (t.add_pod, ported, True), (t.add_pod, plain2, True),
        (lambda p: t.remove_pod(p.uid), plain1, True), (lambda p: t.remove_pod(p.uid), ported, False),
        (lambda p: t.remove_pod(p.uid), plain2, False), (t.add_pod, ported, True),
    ]
    for apply, p, expected in steps:
        apply(p)
        assert bool(t.has_used_ports[row]) is expected and bool(t.used_ports[row]) is expected


def test_has_used_ports_follows_node_removal_and_growth() -> None:
    ports = [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    t = table_of(node("a"))
    t.add_pod(pod_info("p1", node_name="a", containers=ports))
    t.remove_node("a")
    for i in range(100):  # reuses the freed row, then grows the table past its capacity
        t.upsert_node(node(f"n{i}"))
    assert not t.has_used_ports[: len(t.names)].any()
    t.add_pod(pod_info("p2", node_name="n99", containers=ports))
    assert t.has_used_ports.nonzero()[0].tolist() == [t.index["n99"]]
    assert [bool(u) for u in t.used_ports] == t.has_used_ports.tolist()


def test_all_pods_lists_pods_on_existing_nodes() -> None:
    t = table_of(
        node("a"), node("b"), pods=[pod("x", node_name="a"), pod("y", node_name="b"), pod("z", node_name="ghost")]
    )
    assert sorted(p.name for p in t.all_pods()) == ["x", "y"]


# ---------------------------------------------------------------------------------------------
# Orphans: pods bound to nodes the table does not hold
# ---------------------------------------------------------------------------------------------


def test_pod_bound_to_a_node_that_arrives_later_is_accounted_on_arrival() -> None:
    t = NodeTable()
    p = pod_info("p", cpu="1", node_name="late")
    t.add_pod(p)
    assert t.pod(p.uid) is p
    assert list(t.all_pods()) == []
    t.upsert_node(node("late"))
    assert cpu_req(t, "late") == 1000 and pods_on(t, "late") == 1
    assert t.pod(p.uid) is p


def test_orphan_removed_before_its_node_arrives_is_not_accounted() -> None:
    t = NodeTable()
    p = pod_info("p", cpu="1", node_name="late")
    t.add_pod(p)
    assert t.remove_pod(p.uid) is p
    t.upsert_node(node("late"))
    assert cpu_req(t, "late") == 0 and pods_on(t, "late") == 0


def test_node_removed_and_readded_is_not_double_counted() -> None:
    t = table_of(node("a"))
    p, q = pod_info("p", cpu="1", node_name="a"), pod_info("q", cpu="2", node_name="a")
    t.add_pod(p)
    t.add_pod(q)
    t.remove_node("a")
    assert t.pod(p.uid) is p  # kept aside
    t.remove_pod(q.uid)  # q goes away while the node is gone
    t.upsert_node(node("a"))
    assert cpu_req(t, "a") == 1000 and pods_on(t, "a") == 1
    t.upsert_node(node("a", labels={"x": "y"}))  # an update is not a re-add
    assert cpu_req(t, "a") == 1000
    t.remove_node("a")
    t.upsert_node(node("a"))
    assert cpu_req(t, "a") == 1000 and pods_on(t, "a") == 1


def test_orphan_readded_while_node_absent_counts_once() -> None:
    t = table_of(node("a"))
    raw = pod("p", cpu="1", node_name="a")
    t.add_pod(PodInfo.from_raw(raw))
    t.remove_node("a")
    t.add_pod(PodInfo.from_raw(raw))  # informer resync while the node is gone
    t.upsert_node(node("a"))
    assert cpu_req(t, "a") == 1000 and pods_on(t, "a") == 1


def test_recycled_row_does_not_inherit_orphans() -> None:
    t = table_of(node("a"))
    t.add_pod(pod_info("p", cpu="1", node_name="a"))
    t.remove_node("a")
    t.upsert_node(node("b"))  # takes a's old row
    assert cpu_req(t, "b") == 0
    t.upsert_node(node("a"))
    assert cpu_req(t, "a") == 1000 and cpu_req(t, "b") == 0


# ---------------------------------------------------------------------------------------------
# Label columns, extended resources, taints
# ---------------------------------------------------------------------------------------------


def test_label_column_is_built_lazily_and_kept_up_to_date() -> None:
    t = table_of(node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"}), node("c"))
    col = t.label_column("zone")
    ra, rb, rc = (t.row_of(n) for n in "abc")

    def value(row: int | None) -> str | None:
        assert row is not None
        code = int(col.codes[row])
        return None if code < 0 else {v: k for k, v in col.values.items()}[code]

    assert [value(r) for r in (ra, rb, rc)] == ["z1", "z2", None]
    t.upsert_node(node("a", labels={"zone": "z3"}))
    t.upsert_node(node("b"))  # label removed
    t.upsert_node(node("c", labels={"zone": "z1"}))
    t.upsert_node(node("d", labels={"zone": "z2"}))
    assert [value(r) for r in (ra, rb, rc, t.row_of("d"))] == ["z3", None, "z1", "z2"]
    assert t.label_column("zone") is col
    assert col.codes_for(["z1", "nope"]).tolist() == [col.values["z1"]]


def test_label_column_int_values() -> None:
    t = table_of(node("a", labels={"gen": "3"}), node("b", labels={"gen": "x"}), node("c"))
    col = t.label_column("gen")
    ints = col.int_values()
    rows = [t.row_of(n) for n in "abc"]
    assert ints[rows[0]] == 3
    assert np.isnan(ints[rows[1]]) and np.isnan(ints[rows[2]])
    t.upsert_node(node("c", labels={"gen": "7"}))
    assert col.int_values()[rows[2]] == 7


def test_extended_resource_columns_are_added_on_demand() -> None:
    t = table_of(node("plain"), node("gpu", extra={"nvidia.com/gpu": "2"}))
    assert "nvidia.com/gpu" in t.resource_index
    col = t.resource_index["nvidia.com/gpu"]
    assert t.allocatable[t.row_of("plain"), col] == 0
    assert t.allocatable[t.row_of("gpu"), col] == 2
    p = pod_info("p", node_name="gpu", extra_requests={"nvidia.com/gpu": "1", "example.com/fpga": "1"})
    t.add_pod(p)
    fpga = t.resource_index["example.com/fpga"]
    row = t.row_of("gpu")
    assert t.requested[row, col] == 1 and t.requested[row, fpga] == 1
    assert t.allocatable[row, fpga] == 0
    assert t.free(np.array([row]))[0, fpga] == -1
    assert t.requested.shape == t.allocatable.shape
    t.remove_pod(p.uid)
    assert t.requested[row].tolist() == [0] * len(t.resource_names)


def test_pod_cached_request_vector_follows_new_columns() -> None:
    t = table_of(node("a"))
    p = pod_info("p", cpu="1", node_name="a")
    t.add_pod(p)
    t.upsert_node(node("b", extra={"example.com/x": "1"}))  # adds a column after p was accounted
    t.remove_pod(p.uid)
    assert t.requested[t.row_of("a")].tolist() == [0] * len(t.resource_names)


def test_request_vector_is_per_table() -> None:
    gpu_first = table_of(node("a", extra={"nvidia.com/gpu": "4"}))
    fpga_first = table_of(node("a", extra={"example.com/fpga": "4"}))
    p = pod_info("p", node_name="a", extra_requests={"example.com/fpga": "1"})
    fpga_first.add_pod(p)  # caches a 5-column vector with fpga in column 4
    gpu_first.add_pod(p)  # 5 columns too, but column 4 is nvidia.com/gpu here
    row = gpu_first.row_of("a")
    assert gpu_first.requested[row, gpu_first.resource_index["nvidia.com/gpu"]] == 0


def test_pods_with_equal_requests_share_read_only_vectors() -> None:
    t = table_of(node("a"))
    p, q = pod_info("p", cpu="1", memory="1Gi"), pod_info("q", cpu="1", memory="1Gi")
    assert t.request_vector(p) is t.request_vector(q)  # one vector per distinct requests
    with pytest.raises(ValueError):
        t.request_vector(p)[CPU] = 0  # shared: nobody may change it in place
    assert t.request_vector(pod_info("r", cpu="2")) is not t.request_vector(p)


def test_shared_request_vectors_follow_a_column_added_between_pods_of_equal_requests() -> None:
    """The cached vectors are dropped when a column is added: accounting after the change must
    equal a table that never cached anything (here: one built after the change)."""
    t = table_of(node("a"))
    p = pod_info("p", cpu="1", memory="1Gi", node_name="a")
    t.add_pod(p)
    gpu = pod_info("g", node_name="a", extra_requests={"example.com/gpu": "1"})  # adds a column
    t.add_pod(gpu)
    q = pod_info("q", cpu="1", memory="1Gi", node_name="a")  # same requests as p, one column more
    t.add_pod(q)
    assert len(t.request_vector(q)) == len(t.resource_names)
    fresh = table_of(node("a"))
    for each in (gpu, p, q):
        fresh.add_pod(each)
    row = t.row_of("a")
    assert t.requested[row].tolist() == fresh.requested[fresh.row_of("a")].tolist()
    t.remove_pod(p.uid)  # removes with the new layout
    t.remove_pod(gpu.uid)
    assert t.requested[row].tolist() == [1000, GI, 0, 1, 0]
    assert t.available[row].tolist() == (t.allocatable[row] - t.requested[row]).tolist()
    t.remove_pod(q.uid)
    assert t.requested[row].tolist() == [0] * 5 and t.nonzero_requested[row].tolist() == [0, 0]


def test_taint_sets_are_interned() -> None:
    ns = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    ne = {"key": "spot", "effect": "NoExecute"}
    t = table_of(node("a", taints=[ns]), node("b", taints=[ns]), node("c", taints=[ns, ne]), node("d"))
    ra, rb, rc, rd = (t.row_of(n) for n in "abcd")
    assert t.taint_set_id[ra] == t.taint_set_id[rb] != t.taint_set_id[rc]
    assert t.taint_set_id[rd] == 0 and t.taints(rd) == ()
    assert t.taints(rc) == (Taint("dedicated", "gpu", "NoSchedule"), Taint("spot", "", "NoExecute"))
    n_sets = len(t.taint_sets)
    t.upsert_node(node("e", taints=[ns, ne]))
    assert len(t.taint_sets) == n_sets
    t.upsert_node(node("a"))  # taints removed on update
    assert t.taint_set_id[ra] == 0
    assert str(Taint("dedicated", "gpu", "NoSchedule")) == "{dedicated: gpu}"


def test_resource_matrices_and_their_row_views_stay_one_after_growth_and_new_columns() -> None:
    # The resource matrices are stored resource-major (``*_by_resource``) and ``allocatable`` & co.
    # are their transposed views; growing the rows or adding a resource column replaces the
    # matrices, and the views must follow (else writes through one would miss the other).
    table = NodeTable(capacity=2)
    table.upsert_node(node("a", cpu="2", memory="4Gi"))
    table.add_pod(PodInfo.from_raw(pod("p", cpu="500m", node_name="a")))
    for step in ("grow", "column"):
        if step == "grow":
            for i in range(5):
                table.upsert_node(node(f"n{i}", cpu="1"))
        else:
            table.upsert_node(node("g", cpu="1", extra={"example.com/gpu": "2"}))
        table.add_pod(PodInfo.from_raw(pod(f"q-{step}", cpu="100m", node_name="a")))
        for rows, by_resource in (
            (table.allocatable, table.allocatable_by_resource),
            (table.requested, table.requested_by_resource),
            (table.available, table.available_by_resource),
            (table.nonzero_requested, table.nonzero_requested_by_resource),
        ):
            assert rows.base is by_resource and (rows == by_resource.T).all()
            assert by_resource.flags.c_contiguous
    a = table.row_of("a")
    assert a is not None
    assert table.requested[a, CPU] == 700 and table.available[a, CPU] == 1300
    assert table.allocatable[table.row_of("g"), table.resource_index["example.com/gpu"]] == 2
