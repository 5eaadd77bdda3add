"""GpuShare: Filter, Reserve/Unreserve and PreBind in the gpushare model of the FGD simulator
(hkust-adsl/kubernetes-scheduler-simulator pkg/simulator/plugin/open_gpu_share.go,
pkg/type/open-gpu-share/cache/gpunodeinfo.go)."""

from __future__ import annotations

from kubesched.framework.cycle_state import CycleState
from kubesched.plugins.gpushare import GpuLedger, GpuShare

from .helpers import PROFILE, add_pods, drain, gpu_node, gpu_pod, scheduler


def ledger_of(sched: object) -> GpuLedger:
    return GpuLedger.of(sched.cache.table)  # type: ignore[attr-defined]


def used(sched: object, node_name: str) -> list[int]:
    table = sched.cache.table  # type: ignore[attr-defined]
    row = table.row_of(node_name)
    assert row is not None
    return ledger_of(sched).used(row)


def test_share_pods_pack_on_the_tightest_gpu_and_get_their_index_written() -> None:
    sched, cluster = scheduler()
    cluster.add_node(gpu_node("n1", gpus=2))
    pods = add_pods(cluster, [gpu_pod("a", 600), gpu_pod("b", 300), gpu_pod("c", 500)])
    drain(sched)
    index = {p.name: cluster.pods[p.uid].raw["metadata"]["annotations"]["alibabacloud.com/gpu-index"] for p in pods}
    # a takes GPU 0 (both free: the first); b fits best on GPU 0 (400 left); c needs GPU 1.
    assert index == {"a": "0", "b": "0", "c": "1"}
    assert used(sched, "n1") == [900, 500]


def test_whole_gpu_pods_take_the_first_fully_free_gpus() -> None:
    sched, cluster = scheduler()
    cluster.add_node(gpu_node("n1", gpus=4))
    pods = add_pods(cluster, [gpu_pod("share", 100), gpu_pod("two", 1000, count=2)])
    drain(sched)
    got = {p.name: cluster.pods[p.uid].raw["metadata"]["annotations"]["alibabacloud.com/gpu-index"] for p in pods}
    assert got == {"share": "0", "two": "1-2"}
    assert used(sched, "n1") == [100, 1000, 1000, 0]


def test_filter_reasons_name_gpus_model_and_free_milli() -> None:
    sched, cluster = scheduler()
    for n in (gpu_node("cpu-only", gpus=0), gpu_node("t4", gpus=2, model="T4"), gpu_node("v100", gpus=1)):
        cluster.add_node(n)
    add_pods(cluster, [gpu_pod("busy", 1000, node_name="v100", index="0")])
    pending = add_pods(cluster, [gpu_pod("p", 500, model="V100")])[0]
    drain(sched)
    assert not cluster.pods[pending.uid].node_name
    plugin = sched.frameworks[PROFILE].plugins["GpuShare"]
    assert isinstance(plugin, GpuShare)
    table = sched.cache.table
    state = CycleState()
    assert plugin.pre_filter(state, pending, table)[1].is_success
    rows = table.alive_rows()
    verdicts = plugin.filter_batch(state, pending, table, rows)
    reasons = {
        table.names[r]: (verdicts.statuses[c - 1].reasons[0] if c else "")
        for r, c in zip(rows, verdicts.codes, strict=True)
    }
    assert reasons == {
        "cpu-only": "node(s) didn't have enough GPUs",
        "t4": "node(s) didn't have the requested GPU model",
        "v100": "Insufficient alibabacloud.com/gpu-milli",
    }


def test_bound_pods_are_rebuilt_from_gpu_index_and_pods_without_it_take_the_tightest_gpus() -> None:
    sched, cluster = scheduler()
    cluster.add_node(gpu_node("n1", gpus=4))
    add_pods(cluster, [
        gpu_pod("indexed", 700, node_name="n1", index="2"),
        gpu_pod("whole", 1000, count=2, node_name="n1", index="0-3"),
        gpu_pod("no-index", 200, node_name="n1"),  # bound by someone else, no gpu-index
    ])
    # The reference's NodeResource.Sub: the tightest GPU that fits (GPU 2, 300 left).
    assert used(sched, "n1") == [1000, 0, 900, 1000]
    # A scheduler that starts later rebuilds the same from the table's bound pods.
    assert GpuLedger(sched.cache.table).used(sched.cache.table.row_of("n1") or 0) == [1000, 0, 900, 1000]


def test_deleting_a_pod_returns_its_milli() -> None:
    sched, cluster = scheduler()
    cluster.add_node(gpu_node("n1", gpus=1))
    a, b = add_pods(cluster, [gpu_pod("a", 600), gpu_pod("b", 500)])
    drain(sched)
    assert cluster.pods[a.uid].node_name == "n1" and not cluster.pods[b.uid].node_name
    cluster.delete_pod(a.uid)
    drain(sched)
    assert cluster.pods[b.uid].node_name == "n1"
    assert used(sched, "n1") == [500]


def test_invalid_annotations_are_refused_naming_the_annotation() -> None:
    sched, cluster = scheduler()
    cluster.add_node(gpu_node("n1", gpus=2))
    p = add_pods(cluster, [gpu_pod("bad", 500, count=2)])[0]
    plugin = sched.frameworks[PROFILE].plugins["GpuShare"]
    assert isinstance(plugin, GpuShare)
    _, st = plugin.pre_filter(CycleState(), p, sched.cache.table)
    assert st.is_rejected
    assert st.reasons[0] == (
        f"pod {p.key}: annotation alibabacloud.com/gpu-count: invalid value '2': "
        "a pod sharing GPUs (alibabacloud.com/gpu-milli 500 < 1000) may use only one")


def test_a_pod_without_gpu_count_asks_for_no_gpu_as_the_reference_reads_it() -> None:
    # GetGpuCountFromPodAnnotation reads an absent gpu-count as 0, and GetPodResource makes the pod
    # a CPU pod: it schedules on a node without GPUs and holds no GPU.
    sched, cluster = scheduler()
    cluster.add_node(gpu_node("cpu-only", gpus=0))
    raw = gpu_pod("no-count", 500)
    del raw["metadata"]["annotations"]["alibabacloud.com/gpu-count"]
    p = add_pods(cluster, [raw])[0]
    drain(sched)
    bound = cluster.pods[p.uid]
    assert bound.node_name == "cpu-only"
    assert "alibabacloud.com/gpu-index" not in bound.raw["metadata"]["annotations"]


def test_filter_of_a_row_at_a_time_gives_the_verdicts_of_all_rows_at_once() -> None:
    """Filter judges a few rows one by one (an incremental pass's changed rows) and many with
    arrays: for every request (share, whole GPUs, a model, several models, more GPUs than a node
    has), each node's verdict is the same both ways."""
    sched, cluster = scheduler()
    nodes = [gpu_node(f"n{i}", gpus=g, model=m) for i, (g, m) in
             enumerate([(0, "V100"), (1, "V100"), (2, "T4"), (4, "V100"), (8, "T4"), (8, "A100")] * 2)]
    for n in nodes:
        cluster.add_node(n)
    add_pods(cluster, [gpu_pod("a", 1000, node_name="n1", index="0"), gpu_pod("b", 600, node_name="n3", index="1"),
                       gpu_pod("c", 1000, count=2, node_name="n4", index="0-1"),
                       gpu_pod("d", 300, node_name="n8", index="3")])
    drain(sched)
    plugin = sched.frameworks[PROFILE].plugins["GpuShare"]
    assert isinstance(plugin, GpuShare)
    table = sched.cache.table
    rows = table.alive_rows()
    assert len(rows) > 8  # the array path
    for i, (milli, count, model) in enumerate([(500, 1, None), (700, 1, "T4"), (1000, 2, None), (1000, 4, "V100|A100"),
                                                (1000, 8, None), (1000, 9, None), (200, 1, "P100")]):
        pending = add_pods(cluster, [gpu_pod(f"p{i}", milli, count=count, model=model)])[0]
        state = CycleState()
        assert plugin.pre_filter(state, pending, table)[1].is_success
        whole = plugin.filter_batch(state, pending, table, rows)
        for j, row in enumerate(rows.tolist()):
            one = plugin.filter_batch(state, pending, table, rows[j : j + 1])
            assert one.statuses[one.codes[0] - 1] == whole.statuses[whole.codes[j] - 1] if whole.codes[j] else \
                not one.codes[0], (milli, count, model, table.names[row])
