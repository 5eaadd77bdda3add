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

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched.testing.builders import kwok_node, pod_manifest

NODES_FILE = "openb_node_list_all_node.csv"
TASKS_FILE = "openb_pod_list_default.csv"
GPU = "nvidia.com/gpu"
GPU_MODEL_LABEL = "alibabacloud.com/gpu-card-model"


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file, the row and the field."""


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


def _int(path: Path, row: int, record: dict[str, str], field: str) -> int:
    value = record.get(field)
    if value is None:
        raise TraceError(f"{path}: row {row}: missing field {field!r}")
    try:
        n = int(value)
    except ValueError:
        raise TraceError(f"{path}: row {row} ({record.get('sn') or record.get('name')}): field {field!r}: "
                         f"not an integer: {value!r}") from None
    if n < 0:
        raise TraceError(f"{path}: row {row} ({record.get('sn') or record.get('name')}): field {field!r}: "
                         f"negative: {n}")
    return n


def _rows(path: Path, fields: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [name for name in fields if name not in (reader.fieldnames or ())]
            if missing:
                raise TraceError(f"{path}: header: missing column(s) {', '.join(missing)}")
            return [(i, rec) for i, rec in enumerate(reader, start=2)]
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text at offset {e.start}") from None


def load_trace(directory: str | Path) -> Trace:
    """Read the two CSV files of the openb trace from ``directory``."""
    d = Path(directory)
    nodes_path, tasks_path = d / NODES_FILE, d / TASKS_FILE
    nodes = []
    for row, rec in _rows(nodes_path, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        name = (rec.get("sn") or "").strip()
        if not name:
            raise TraceError(f"{nodes_path}: row {row}: field 'sn': empty node name")
        nodes.append(TraceNode(name, _int(nodes_path, row, rec, "cpu_milli"),
                               _int(nodes_path, row, rec, "memory_mib"), _int(nodes_path, row, rec, "gpu"),
                               (rec.get("model") or "").strip()))
    tasks = []
    for row, rec in _rows(tasks_path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")):
        name = (rec.get("name") or "").strip()
        if not name:
            raise TraceError(f"{tasks_path}: row {row}: field 'name': empty task name")
        num_gpu = _int(tasks_path, row, rec, "num_gpu")
        gpu_milli = _int(tasks_path, row, rec, "gpu_milli")
        # A task sharing a GPU (num_gpu 1, gpu_milli < 1000) takes the whole GPU here.
        gpus = num_gpu if num_gpu or not gpu_milli else 1
        models = tuple(m.strip() for m in (rec.get("gpu_spec") or "").split("|") if m.strip())
        tasks.append(TraceTask(name, _int(tasks_path, row, rec, "cpu_milli"),
                               _int(tasks_path, row, rec, "memory_mib"), gpus, models))
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

