"""The openb trace (``kubesched simulate --trace openb:PATH``): Alibaba cluster-trace-gpu-v2023,
the workload of the USENIX ATC '23 paper "Beware of Fragmentation" (Weng et al.), as a scenario.

``PATH`` is the trace directory (``openb_node_list_all_node.csv`` and
``openb_pod_list_default.csv``) or one pod list CSV (``openb_pod_list_gpushare40.csv``, ...) whose
directory holds the node list.

* nodes (``sn, cpu_milli, memory_mib, gpu, model``) become v1 Nodes as the reference's
  ``data/node_yaml/openb_node_list_gpu_node.yaml`` writes them: ``cpu: <milli>m``,
  ``memory: <mib>Mi``, ``pods: 1001``, and on a node with GPUs ``alibabacloud.com/gpu-count``,
  ``alibabacloud.com/gpu-milli`` and the label ``alibabacloud.com/gpu-card-model`` (a CPU-only
  node has none of the three, as the reference reads a missing one as 0);
* tasks (``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, ..., creation_time,
  deletion_time, scheduled_time``) become pods as the reference's ``data/pod_csv_to_yaml.py``:
  requests and limits ``cpu``/``memory``, and for a GPU task the annotations ``gpu-milli``
  (clamped to 0-1000), ``gpu-count`` and, when ``gpu_spec`` names models, ``gpu-card-model``
  (the models joined by ``|``; any of them will do). Each arrives at ``creation_time`` and stays
  ``deletion_time - scheduled_time`` seconds once bound (``deletion_time - creation_time`` for a
  task the trace never scheduled).

The reference's experiments replay the tasks differently: in a seeded random order, one after the
other, never deleted (``inputs/inflation.py`` ``sequential``), on the GPU nodes only
(``openb_node_list_gpu_node.yaml``: 1,213 nodes, all 6,212 GPUs; ``gpu_nodes_only``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubesched.simulate.inputs.scenario import PodArrival, Scenario, ScenarioError
from kubesched.snapshot.gpushare.model import GPU_COUNT, GPU_MILLI, GPU_MODEL, MILLI
from kubesched.traces.openb import NODE_COLUMNS, NODE_LIST, POD_COLUMNS, POD_LIST, OpenbCsvError, OpenbRow, read_rows

__all__ = ["NODE_LIST", "POD_LIST", "load_openb", "openb_node", "openb_pod"]

#: The pods capacity the reference's node YAML gives every node.
PODS_PER_NODE = "1001"


def openb_node(row: OpenbRow) -> dict[str, Any]:
    name = row.name("sn", "the node's name")
    gpus = int(row.number("gpu"))
    model = row.text("model")
    resources = {"cpu": f"{int(row.number('cpu_milli'))}m",
                 "memory": f"{int(row.number('memory_mib'))}Mi", "pods": PODS_PER_NODE}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if gpus:
        resources |= {GPU_COUNT: str(gpus), GPU_MILLI: str(gpus * MILLI)}
        if model:
            labels[GPU_MODEL] = model
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": dict(resources), "allocatable": dict(resources)}}


def openb_pod(row: OpenbRow, namespace: str = "default") -> dict[str, Any]:
    name = row.name("name")
    requests = {"cpu": f"{int(row.number('cpu_milli'))}m",
                "memory": f"{int(row.number('memory_mib'))}Mi"}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    gpus = int(row.number("num_gpu"))
    if gpus:
        milli = int(row.number("gpu_milli", empty=MILLI))
        models = [m for m in row.text("gpu_spec").split("|") if m.strip()]
        meta["annotations"] = {GPU_MILLI: str(min(milli, MILLI)), GPU_COUNT: str(gpus)}
        if models:
            meta["annotations"][GPU_MODEL] = "|".join(m.strip() for m in models)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "main", "image": "openb-task",
                                     "resources": {"requests": requests, "limits": dict(requests)}}]}}


def _files(path: Path) -> tuple[Path, Path]:
    if path.is_dir():
        return path / NODE_LIST, path / POD_LIST
    if path.suffix == ".csv":
        return path.parent / NODE_LIST, path
    raise ScenarioError(f"openb:{path}: not a directory or a pod list .csv")


def load_openb(path: str | Path, gpu_nodes_only: bool = False) -> Scenario:
    """The trace at ``path`` as a scenario (nodes at time 0, every task an arrival)."""
    node_file, pod_file = _files(Path(path))
    for f in (node_file, pod_file):
        if not f.is_file():
            raise ScenarioError(f"openb:{path}: {f} not found")
    try:
        return _scenario(node_file, pod_file, gpu_nodes_only)
    except OpenbCsvError as e:
        raise ScenarioError(str(e)) from None


def _scenario(node_file: Path, pod_file: Path, gpu_nodes_only: bool) -> Scenario:
    nodes = [openb_node(row) for row in read_rows(node_file, NODE_COLUMNS)]
    if gpu_nodes_only:
        nodes = [n for n in nodes if GPU_COUNT in n["status"]["capacity"]]
    arrivals: list[PodArrival] = []
    for row in read_rows(pod_file, POD_COLUMNS):
        created = row.number("creation_time")
        deleted = row.number("deletion_time", empty=-1.0)
        started = row.number("scheduled_time", empty=created)
        lifetime = max(0.0, deleted - max(started, created)) if deleted >= 0 else None
        arrivals.append(PodArrival(created, openb_pod(row), lifetime))
    source = f"openb:{pod_file}" + (" (GPU nodes only)" if gpu_nodes_only else "")
    return Scenario(source, nodes, arrivals).sorted()
