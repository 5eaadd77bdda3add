"""The openb production GPU trace as Kubernetes objects: nodes and pending pods to compare schedulers
on (the full 1,523-node / 8,152-task bench, ``bench/openb.py``, and a CI-sized cut of it, the
differential test ``tests/integration/test_differential_openb.py``).

The trace (Alibaba's ``cluster-trace-gpu-v2023``, the data of the ATC '23 paper "Beware of
Fragmentation", Weng et al.) is not part of the project: it is read from a directory holding
``openb_node_list_all_node.csv`` (``sn, cpu_milli, memory_mib, gpu, model``) and
``openb_pod_list_default.csv`` (``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, ...``,
tasks in creation order).

How a row becomes an object (as the previous kube-scheduler measurement of issue 32 did):

* a node: allocatable cpu ``<cpu_milli>m``, memory ``<memory_mib>Mi``, 110 pods and
  ``nvidia.com/gpu: <gpu>`` when it has GPUs, labelled ``alibabacloud.com/gpu-card-model: <model>``
  (the reference simulator's label) when it names a model;
* a task: a pending pod requesting cpu and memory, and ``nvidia.com/gpu: <num_gpu>`` as request and
  limit (an extended resource must have both). A task sharing a GPU (``gpu_milli`` < 1000) takes one
  whole GPU: kube-scheduler has no fractional GPUs. A ``gpu_spec`` (models separated by ``|``)
  becomes a required node affinity ``In`` those models.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched.testing.builders import kwok_node, pod_manifest
from kubesched.traces.openb import NODE_COLUMNS, NODE_LIST, POD_LIST, OpenbCsvError, read_rows

NODES_FILE = NODE_LIST
TASKS_FILE = POD_LIST
GPU = "nvidia.com/gpu"
GPU_MODEL_LABEL = "alibabacloud.com/gpu-card-model"


#: A trace file that cannot be read; the message names the file, the row and the column.
TraceError = OpenbCsvError


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TraceTask:
    name: str
    cpu_milli: int
    memory_mib: int
    #: Whole GPUs requested (a shared GPU counts as one).
    gpus: int
    #: Acceptable GPU models (empty: any).
    gpu_models: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Trace:
    nodes: tuple[TraceNode, ...]
    #: In creation order (the file's order).
    tasks: tuple[TraceTask, ...]

    def cut(self, every: int) -> Trace:
        """Every ``every``-th node and every ``every``-th task, in order: a systematic sample, so
        the cut keeps the trace's mix of node shapes and task sizes and its task order, and the
        ratio of demand to capacity."""
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        return Trace(self.nodes[::every], self.tasks[::every])

    def cut_to(self, nodes: int) -> Trace:
        """The systematic cut with about ``nodes`` nodes (at least that many)."""
        return self.cut(max(1, len(self.nodes) // max(nodes, 1)))


def load_trace(directory: str | Path) -> Trace:
    """Read the two CSV files of the openb trace from ``directory``."""
    d = Path(directory)
    nodes = [TraceNode(row.name("sn", "the node's name"), row.integer("cpu_milli"), row.integer("memory_mib"),
                       row.integer("gpu"), row.text("model"))
             for row in read_rows(d / NODES_FILE, NODE_COLUMNS)]
    tasks = []
    for row in read_rows(d / TASKS_FILE, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")):
        name = row.name("name")
        num_gpu = row.integer("num_gpu")
        gpu_milli = row.integer("gpu_milli")
        # A task sharing a GPU (num_gpu 1, gpu_milli < 1000) takes the whole GPU here.
        gpus = num_gpu if num_gpu or not gpu_milli else 1
        models = tuple(m.strip() for m in row.text("gpu_spec").split("|") if m.strip())
        tasks.append(TraceTask(name, row.integer("cpu_milli"), row.integer("memory_mib"), gpus, models))
    return Trace(tuple(nodes), tuple(tasks))


def node_object(node: TraceNode) -> dict[str, Any]:
    """A KWOK node shaped like the trace's."""
    return kwok_node(
        node.name,
        cpu=f"{node.cpu_milli}m",
        memory=f"{node.memory_mib}Mi",
        extended={GPU: str(node.gpus)} if node.gpus else None,
        labels={GPU_MODEL_LABEL: node.model} if node.model else None,
    )


def pod_object(task: TraceTask, namespace: str, scheduler_name: str) -> dict[str, Any]:
    """A pending pod for the task, for the scheduler named ``scheduler_name``."""
    requests = {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"}
    limits: dict[str, str] = {}
    if task.gpus:
        requests[GPU] = limits[GPU] = str(task.gpus)
    affinity = None
    if task.gpu_models:
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "In", "values": list(task.gpu_models)}]}
        ]}}}
    return pod_manifest(task.name, namespace, requests=requests, limits=limits or None,
                        scheduler_name=scheduler_name, labels={"openb.kubesched.io/gpus": str(task.gpus)},
                        affinity=affinity)


def gpu_demand(trace: Trace) -> tuple[int, int]:
    """(GPUs the tasks request, GPUs the nodes have): more demand than capacity is what makes the
    bound count depend on every placement."""
    return sum(t.gpus for t in trace.tasks), sum(n.gpus for n in trace.nodes)


def size_class(task: TraceTask) -> str:
    """How results are broken down: ``cpu`` or ``<n>gpu``, plus the models it is pinned to."""
    base = f"{task.gpus}gpu" if task.gpus else "cpu"
    return f"{base}:{'|'.join(task.gpu_models)}" if task.gpu_models else base

