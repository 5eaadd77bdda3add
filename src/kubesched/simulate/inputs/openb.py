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

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubesched.simulate.inputs.scenario import PodArrival, Scenario, ScenarioError
from kubesched.snapshot.gpushare.model import GPU_COUNT, GPU_MILLI, GPU_MODEL, MILLI

__all__ = ["NODE_LIST", "POD_LIST", "load_openb", "openb_node", "openb_pod"]

NODE_LIST = "openb_node_list_all_node.csv"
POD_LIST = "openb_pod_list_default.csv"
#: The pods capacity the reference's node YAML gives every node.
PODS_PER_NODE = "1001"
_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time",
                "deletion_time", "scheduled_time")


def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise ScenarioError(f"{path}: missing column {missing[0]!r} (expected {', '.join(columns)})")
            for line, row in enumerate(reader, start=2):
                yield f"{path}:{line}", row
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{path}: cannot read: {e}") from None


def _number(row: dict[str, str], column: str, where: str, empty: float | None = None) -> float:
    text = (row.get(column) or "").strip()
    if not text and empty is not None:
        return empty
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{where} ({row.get('name') or row.get('sn')}): {column} must be a number, "
                            f"got {text!r}") from None
    if value < 0:
        raise ScenarioError(f"{where} ({row.get('name') or row.get('sn')}): {column} must not be negative, "
                            f"got {text!r}")
    return value


def openb_node(row: dict[str, str], where: str) -> dict[str, Any]:
    name = (row.get("sn") or "").strip()
    if not name:
        raise ScenarioError(f"{where}: sn (the node's name) is empty")
    gpus = int(_number(row, "gpu", where))
    model = (row.get("model") or "").strip()
    resources = {"cpu": f"{int(_number(row, 'cpu_milli', where))}m",
                 "memory": f"{int(_number(row, 'memory_mib', where))}Mi", "pods": PODS_PER_NODE}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if gpus:
        resources |= {GPU_COUNT: str(gpus), GPU_MILLI: str(gpus * MILLI)}
        if model:
            labels[GPU_MODEL] = model
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": dict(resources), "allocatable": dict(resources)}}


def openb_pod(row: dict[str, str], where: str, namespace: str = "default") -> dict[str, Any]:
    name = (row.get("name") or "").strip()
    if not name:
        raise ScenarioError(f"{where}: name is empty")
    requests = {"cpu": f"{int(_number(row, 'cpu_milli', where))}m",
                "memory": f"{int(_number(row, 'memory_mib', where))}Mi"}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    gpus = int(_number(row, "num_gpu", where))
    if gpus:
        milli = int(_number(row, "gpu_milli", where, empty=MILLI))
        models = [m for m in (row.get("gpu_spec") or "").split("|") if m.strip()]
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
    nodes = [openb_node(row, where) for where, row in _rows(node_file, _NODE_COLUMNS)]
    if gpu_nodes_only:
        nodes = [n for n in nodes if GPU_COUNT in n["status"]["capacity"]]
    arrivals: list[PodArrival] = []
    for where, row in _rows(pod_file, _POD_COLUMNS):
        created = _number(row, "creation_time", where)
        deleted = _number(row, "deletion_time", where, empty=-1.0)
        started = _number(row, "scheduled_time", where, empty=created)
        lifetime = max(0.0, deleted - max(started, created)) if deleted >= 0 else None
        arrivals.append(PodArrival(created, openb_pod(row, where), lifetime))
    source = f"openb:{pod_file}" + (" (GPU nodes only)" if gpu_nodes_only else "")
    return Scenario(source, nodes, arrivals).sorted()
