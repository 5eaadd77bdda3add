"""kubesched.testing.openb: the openb trace's rows as nodes and pending pods, the proportional cut,
and bad rows named by file, row and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.snapshot.pod import PodInfo
from kubesched.testing.openb import (
    GPU,
    GPU_MODEL_LABEL,
    NODES_FILE,
    TASKS_FILE,
    TraceError,
    gpu_demand,
    load_trace,
    node_object,
    pod_object,
    size_class,
)

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,96000,393216,8,G2
openb-node-0002,64000,262144,2,T4
openb-node-0003,96000,786432,8,V100M32
"""
TASKS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,10,0
openb-pod-0001,6000,12288,1,460,,LS,Running,1,10,1
openb-pod-0002,4000,8192,0,0,,BE,Running,2,10,2
openb-pod-0003,32000,65536,8,1000,V100M32|G2,LS,Running,3,10,3
"""


def _trace_dir(tmp_path: Path, nodes: str = NODES, tasks: str = TASKS) -> Path:
    (tmp_path / NODES_FILE).write_text(nodes)
    (tmp_path / TASKS_FILE).write_text(tasks)
    return tmp_path


def test_rows_become_kwok_nodes_and_pending_pods(tmp_path: Path) -> None:
    trace = load_trace(_trace_dir(tmp_path))
    assert [n.name for n in trace.nodes] == [f"openb-node-000{i}" for i in range(4)]
    gpu_node = node_object(trace.nodes[1])
    assert gpu_node["status"]["allocatable"] == {"cpu": "96000m", "memory": "393216Mi", "pods": "110", GPU: "8"}
    assert gpu_node["metadata"]["labels"][GPU_MODEL_LABEL] == "G2"
    cpu_node = node_object(trace.nodes[0])
    assert GPU not in cpu_node["status"]["allocatable"] and GPU_MODEL_LABEL not in cpu_node["metadata"]["labels"]

    shared = PodInfo.from_raw(pod_object(trace.tasks[1], "ns", "kubesched"))
    assert shared.scheduler_name == "kubesched" and not shared.node_name
    assert shared.requests.milli_cpu == 6000 and shared.requests.memory == 12288 * 2**20
    assert shared.requests.scalar == {GPU: 1}  # a shared GPU (460 milli) takes a whole one
    assert PodInfo.from_raw(pod_object(trace.tasks[2], "ns", "s")).requests.scalar == {}

    pinned = pod_object(trace.tasks[3], "ns", "s")
    assert pinned["spec"]["containers"][0]["resources"]["limits"] == {GPU: "8"}
    terms = pinned["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "In", "values": ["V100M32", "G2"]}]}]
    assert "affinity" not in pod_object(trace.tasks[0], "ns", "s")["spec"]
    assert [size_class(t) for t in trace.tasks] == ["1gpu", "1gpu", "cpu", "8gpu:V100M32|G2"]
    assert gpu_demand(trace) == (10, 18)


def test_cut_keeps_every_kth_node_and_task_in_order(tmp_path: Path) -> None:
    trace = load_trace(_trace_dir(tmp_path))
    half = trace.cut(2)
    assert [n.name for n in half.nodes] == ["openb-node-0000", "openb-node-0002"]
    assert [t.name for t in half.tasks] == ["openb-pod-0000", "openb-pod-0002"]
    assert trace.cut_to(2) == half and trace.cut_to(100) == trace
    with pytest.raises(ValueError, match="every must be at least 1"):
        trace.cut(0)


@pytest.mark.parametrize(("nodes", "tasks", "message"), [
    (NODES.replace("96000,393216,8", "96000,lots,8"), TASKS,
     r"openb_node_list_all_node.csv:3 \(openb-node-0001\): memory_mib must be an integer, got 'lots'"),
    (NODES, TASKS.replace("openb-pod-0002,4000,8192,0", "openb-pod-0002,4000,8192,-1"),
     r"openb_pod_list_default.csv:4 \(openb-pod-0002\): num_gpu must not be negative, got '-1'"),
    (NODES.replace("sn,", "serial,"), TASKS, r"openb_node_list_all_node.csv: missing column 'sn'"),
    (NODES, TASKS.replace("openb-pod-0001,", ",", 1), r"openb_pod_list_default.csv:3: name is empty"),
])
def test_bad_rows_are_named(tmp_path: Path, nodes: str, tasks: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        load_trace(_trace_dir(tmp_path, nodes, tasks))


def test_missing_trace_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"openb_node_list_all_node.csv: cannot read: No such file"):
        load_trace(tmp_path)
