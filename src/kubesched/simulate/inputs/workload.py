"""Workloads for what-if questions (``kubesched capacity --workload FILE``): pod templates with
replica counts, read from the manifests a team already has.

Accepted (YAML or JSON, several documents, ``v1/List``, or a directory of such files):

* ``v1 Pod``: its own template, 1 replica;
* ``apps/v1 Deployment``, ``ReplicaSet``, ``StatefulSet``, ``v1 ReplicationController``:
  ``spec.template`` × ``spec.replicas`` (default 1, as the apiserver defaults it);
* ``batch/v1 Job``: ``spec.template`` × ``spec.parallelism`` (default 1): the pods that run at once;
* ``batch/v1 CronJob``: ``spec.jobTemplate.spec`` as a Job.

A DaemonSet is refused (it runs one pod per eligible node, not a number of replicas); any other kind
is an error naming it. Replicas are created as their controllers would: named ``<name>-<i>``, owned
by the workload, in the workload's namespace, pending, with creation timestamps after every pod of
the cluster; the Priority admission plugin fills their priority from the cluster's PriorityClasses.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.admission import AdmissionError, admit_priority
from kubesched.api.timestamps import rfc3339
from kubesched.simulate.inputs.yaml_documents import ManifestLoader

__all__ = ["PodTemplate", "WorkloadError", "latest_timestamp", "load_workload"]

_SUFFIXES = (".yaml", ".yml", ".json")
#: (apiVersion, kind) → where the pod template is, and which field counts the replicas.
_KINDS: dict[tuple[str, str], tuple[tuple[str, ...], str | None]] = {
    ("v1", "Pod"): ((), None),
    ("apps/v1", "Deployment"): (("spec", "template"), "replicas"),
    ("apps/v1", "ReplicaSet"): (("spec", "template"), "replicas"),
    ("apps/v1", "StatefulSet"): (("spec", "template"), "replicas"),
    ("v1", "ReplicationController"): (("spec", "template"), "replicas"),
    ("batch/v1", "Job"): (("spec", "template"), "parallelism"),
    ("batch/v1", "CronJob"): (("spec", "jobTemplate", "spec", "template"), "parallelism"),
}


class WorkloadError(ValueError):
    """A workload file that cannot be used; the message names the file, document and field."""


def latest_timestamp(pods: list[dict[str, Any]]) -> float:
    """The newest ``creationTimestamp`` among ``pods`` (0 when none has one)."""
    latest = 0.0
    for pod in pods:
        ts = (pod.get("metadata") or {}).get("creationTimestamp")
        if isinstance(ts, str):
            try:
                latest = max(latest, datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp())
            except ValueError:
                continue
    return latest


@dataclass(frozen=True)
class PodTemplate:
    """One workload: its pod template and how many replicas it asks for."""

    kind: str
    api_version: str
    namespace: str
    name: str
    replicas: int
    #: ``{"metadata": ..., "spec": ...}`` of the pods it creates.
    template: dict[str, Any]
    where: str

    @property
    def key(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def replica(self, index: int, created: float, classes: Mapping[str, Mapping[str, Any]],
                never_preempt: bool = False) -> dict[str, Any]:
        """Replica ``index`` as its controller would create it (``never_preempt``: it may not
        evict other pods: the question is what fits in the capacity left)."""
        meta = copy.deepcopy(self.template.get("metadata") or {})
        spec = copy.deepcopy(self.template.get("spec") or {})
        name = self.name if self.kind == "Pod" and index == 0 else f"{self.name}-{index}"
        meta.update(
            name=name,
            namespace=self.namespace,
            uid=f"whatif-{self.kind.lower()}-{self.namespace}-{self.name}-{index}",
            creationTimestamp=rfc3339(created),
        )
        if self.kind != "Pod":
            meta["ownerReferences"] = [{"apiVersion": self.api_version, "kind": self.kind, "name": self.name,
                                        "uid": f"whatif-{self.namespace}-{self.name}", "controller": True}]
        spec.pop("nodeName", None)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}
        try:
            admit_priority(pod, classes)
        except AdmissionError as e:
            raise WorkloadError(f"{self.where} ({self.key}): {e}") from None
        if never_preempt:
            spec["preemptionPolicy"] = "Never"
        return pod


def _documents(path: Path) -> Iterator[tuple[str, Any]]:
    files = sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES) if path.is_dir() else [path]
    for f in files:
        try:
            docs = list(yaml.load_all(f.read_text(encoding="utf-8"), Loader=ManifestLoader))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise WorkloadError(f"{f}: cannot read: {e}") from None
        for i, doc in enumerate(docs, start=1):
            if doc is None:
                continue
            where = f"{f}, document {i}"
            if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                for j, item in enumerate(doc["items"], start=1):
                    yield f"{where}, item {j}", item
            else:
                yield where, doc


def _field(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for part in path:
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def load_workload(path: str | Path) -> list[PodTemplate]:
    """Every workload in ``path`` (a file or a directory), in file order."""
    out: list[PodTemplate] = []
    for where, obj in _documents(Path(path)):
        if not isinstance(obj, dict):
            raise WorkloadError(f"{where}: not an object")
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        meta = obj.get("metadata") or {}
        name = meta.get("name") if isinstance(meta, dict) else None
        if not name or not isinstance(name, str):
            raise WorkloadError(f"{where} ({kind or 'object'}): metadata.name is required")
        if kind == "DaemonSet":
            raise WorkloadError(f"{where} (DaemonSet {name}): a DaemonSet runs one pod per node, not a number of "
                                "replicas; give its pod template as a Pod or Deployment instead")
        spec_of = _KINDS.get((api_version, kind))
        if spec_of is None:
            known = ", ".join(f"{a} {k}" for a, k in _KINDS)
            raise WorkloadError(f"{where}: {api_version} {kind} {name!r} is not a workload (one of: {known})")
        template_path, count_field = spec_of
        template = obj if not template_path else _field(obj, template_path)
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            field = ".".join(template_path) or "spec"
            raise WorkloadError(f"{where} ({kind} {name}): {field}{'.spec' if template_path else ''} is required")
        replicas = 1
        if count_field is not None:
            owner_spec = _field(obj, template_path[:-1]) if template_path else None
            value = owner_spec.get(count_field) if isinstance(owner_spec, Mapping) else None
            if value is not None:
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    spec_path = ".".join(template_path[:-1])
                    raise WorkloadError(f"{where} ({kind} {name}): {spec_path}.{count_field} must be a "
                                        f"non-negative integer, got {value!r}")
                replicas = value
        namespace = str((meta.get("namespace") if isinstance(meta, dict) else None) or "default")
        out.append(PodTemplate(kind, api_version, namespace, name, replicas,
                               {"metadata": template.get("metadata") or {}, "spec": template["spec"]}, where))
    if not out:
        raise WorkloadError(f"{path}: no workload found (Pod, Deployment, ReplicaSet, StatefulSet, Job, CronJob)")
    return out
