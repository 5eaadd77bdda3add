"""Load a cluster for ``kubesched simulate --cluster PATH`` from files users already have.

Accepted input (``PATH`` is a file or a directory):

* the output of ``kubectl get nodes,pods -A -o yaml`` / ``-o json``: a ``v1`` ``List`` whose
  ``items`` are the objects; typed lists (``NodeList``, ``PodList``, ... as the API returns them)
  are accepted too, and their items may omit ``apiVersion``/``kind`` (taken from the list);
* a multi-document YAML stream of objects (empty / ``null`` documents are ignored);
* JSON files of the same shapes (one JSON value per file);
* a directory: every ``*.yaml``, ``*.yml`` and ``*.json`` file below it, recursively, in sorted
  path order (files and directories whose name starts with ``.`` are ignored).

What is kept: ``v1`` Nodes, ``v1`` Pods, and the kinds the configured plugins declare
(framework/objects.py; e.g. ``scheduling.x-k8s.io/v1alpha1`` PodGroups when Coscheduling is enabled).
Every other object (Deployments, Services, Events, ...) is counted in :attr:`ClusterInput.skipped`
under ``"<apiVersion> <kind>"`` so the caller can report it once; nothing is dropped silently.

Every Node and Pod is validated by parsing it the way the scheduler will (a throwaway
:class:`~kubesched.snapshot.table.NodeTable` and :meth:`PodInfo.from_raw`); any problem raises
:class:`ClusterInputError` whose message names the file, the document (1-based, in file order),
the list item (``items[i]``, 0-based) when there is one, the object and the field, e.g.::

    dump.yaml: document 1, items[7] (Pod shop/web-1): container "app": requests.cpu: invalid quantity "1x": ...

Normalisation applied to the loaded objects (in place, documented for the simulator):

* a Pod without ``metadata.namespace`` gets ``default``;
* a Pod without ``metadata.uid`` gets the deterministic uid ``sim-<namespace>-<name>``;
* a Pod without ``metadata.creationTimestamp`` gets one so that creation order is file order:
  the k-th such pod (counting in file order, k = 1, 2, ...) is stamped ``base + k`` seconds, where
  ``base`` is the latest creationTimestamp among the pods that have one (or 2024-01-01T00:00:00Z
  when none has). Stamped pods therefore come after every pod that carried a timestamp, in the
  order the files list them.

Terminal pods (``status.phase`` Succeeded or Failed) are kept as they are (the simulator ignores
them) and counted in :attr:`ClusterInput.terminal_pods`. Mirror pods and DaemonSet pods are plain
pods here.

YAML is read as Kubernetes reads it with one exception made explicit: unquoted timestamps stay
strings (PyYAML would turn them into ``datetime`` objects).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml

from kubesched.api.admission import SYSTEM_PRIORITY_CLASSES, AdmissionError, admit_priority, carried_priority_note
from kubesched.api.object_validation import validate_node, validate_pod
from kubesched.api.timestamps import rfc3339
from kubesched.framework.objects import ObjectKind, object_key
from kubesched.simulate.inputs.gc_pause import paused_gc
from kubesched.simulate.inputs.yaml_documents import ManifestLoader, load_documents
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.shapes import check_node_shape, check_pod_shape
from kubesched.snapshot.table import NodeTable

__all__ = ["ClusterInput", "ClusterInputError", "load_cluster"]

_SUFFIXES = (".yaml", ".yml", ".json")
#: --lenient: how many of the skipped objects' errors the warning quotes.
_SHOWN_ERRORS = 5
PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
PRIORITY_CLASS_KIND = "PriorityClass"


def _check_priority_class(raw: dict[str, Any]) -> None:
    value = raw.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"value must be an integer, got {value!r}")


_PRIORITY_CLASS = ObjectKind(PRIORITY_CLASS_KIND, "scheduling.k8s.io", "v1", "priorityclasses", namespaced=False,
                             validate=_check_priority_class)
#: creationTimestamp base used when no pod in the input carries one.
_DEFAULT_BASE_TS = datetime(2024, 1, 1, tzinfo=UTC).timestamp()

class ClusterInputError(ValueError):
    """Input that cannot be loaded; the message names the file, document, item, object and field."""


@dataclass
class ClusterInput:
    #: Raw v1 Node objects, in file order.
    nodes: list[dict[str, Any]]
    #: Raw v1 Pod objects, in file order (bound ones have ``spec.nodeName``).
    pods: list[dict[str, Any]]
    #: Objects of the declared kinds: kind → key (``namespace/name``, or ``name``) → object, in file order.
    objects: dict[str, dict[str, dict[str, Any]]]
    #: ``"<apiVersion> <kind>"`` -> number of objects of that type that are not modelled.
    skipped: dict[str, int]
    #: Where the cluster came from, for reports.
    source: str
    #: How many of ``pods`` are terminal (status.phase Succeeded or Failed).
    terminal_pods: int = 0
    #: Things in the input that load but that the user should hear of (e.g. a pod bound to a node
    #: the input does not have), one line each naming file and object.
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for reports: ``"3 nodes, 12 pods (1 terminal), 2 PodGroup; skipped: 2 apps/v1 Deployment"``."""
        text = f"{len(self.nodes)} nodes, {len(self.pods)} pods"
        if self.terminal_pods:
            text += f" ({self.terminal_pods} terminal)"
        for kind, objs in self.objects.items():
            text += f", {len(objs)} {kind}"
        if self.skipped:
            text += "; skipped: " + ", ".join(f"{n} {t}" for t, n in sorted(self.skipped.items()))
        return text


def load_cluster(path: str | Path, kinds: Sequence[ObjectKind] = (), lenient: bool = False) -> ClusterInput:
    """Load Nodes, Pods and objects of ``kinds`` from a file or a directory (see the module docstring).
    ``lenient``: skip invalid objects (counted in one warning) instead of raising on the first."""
    root = Path(path)
    if root.is_dir():
        files = _find_files(root)
        if not files:
            raise ClusterInputError(f"{root}: directory contains no *.yaml, *.yml or *.json files")
        source = f"{root} ({len(files)} file{'s' if len(files) != 1 else ''})"
    elif root.is_file():
        files = [root]
        source = str(root)
    else:
        raise ClusterInputError(f"{root}: no such file or directory")
    builder = _Builder(kinds={(k.api_version, k.kind): k for k in kinds}, lenient=lenient)
    # Millions of small dicts, none of them garbage: with the cyclic GC on, its collections would
    # scan them again and again (decoding a 200 MB dump of 50,000 nodes took 6.9 s of CPU with it,
    # 1.1 s without; the whole load 9.2 s -> 3.7 s).
    with paused_gc():
        for file in files:
            for doc_no, doc in _documents(file):
                builder.add_document(str(file), doc_no, doc)
        return builder.finish(source)


# -- reading files ----------------------------------------------------------------------------------


def _find_files(root: Path) -> list[Path]:
    found = []
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.suffix.lower() in _SUFFIXES and p.is_file():
            found.append(p)
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def _documents(file: Path) -> Iterator[tuple[int, Any]]:
    """(1-based document number, decoded document) for every document of a file."""
    try:
        data = file.read_bytes()
    except OSError as e:
        raise ClusterInputError(f"{file}: cannot read: {e.strerror or e}") from None
    if file.suffix.lower() == ".json":
        try:
            yield 1, orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise ClusterInputError(f"{file}: line {e.lineno}, column {e.colno}: invalid JSON: {e.msg}") from None
        return
    try:
        yield from enumerate(load_documents(data, ManifestLoader), start=1)
    except yaml.YAMLError as e:
        raise ClusterInputError(f"{file}: {_yaml_error(e)}") from None


def _yaml_error(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None)
    if mark is None or not problem:
        return f"invalid YAML: {e}"
    text = f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {problem}"
    context = getattr(e, "context", None)
    context_mark = getattr(e, "context_mark", None)
    if context and context_mark is not None and context_mark.line != mark.line:
        text += f" ({context} at line {context_mark.line + 1})"
    return text


# -- building ---------------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"a boolean ({value!r})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        preview = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({preview!r})"
    return f"a {type(value).__name__}"


def _strip_prefix(message: str, prefix: str) -> str:
    """The message without ``prefix`` (the object, named by the caller already), or without the
    leading "." of a shape check's path (``.metadata.labels: ...``)."""
    if message.startswith(prefix):
        return message[len(prefix) :]
    return message[1:] if message.startswith(".") else message


def _first(errors: list[str]) -> str:
    """One line for an object the apiserver would refuse: its first error, and how many more."""
    more = len(errors) - 1
    return errors[0] + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "")


@dataclass
class _Builder:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    kinds: dict[tuple[str, str], ObjectKind] = field(default_factory=dict)
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    terminal_pods: int = 0
    table: NodeTable = field(default_factory=NodeTable)
    node_at: dict[str, str] = field(default_factory=dict)
    pod_at: dict[str, str] = field(default_factory=dict)
    object_at: dict[tuple[str, str], str] = field(default_factory=dict)
    bound_to: dict[str, str] = field(default_factory=dict)
    uid_at: dict[str, tuple[str, str]] = field(default_factory=dict)
    latest_ts: float | None = None
    unstamped: list[dict[str, Any]] = field(default_factory=list)
    lenient: bool = False
    #: --lenient: the error of every object skipped.
    invalid: list[str] = field(default_factory=list)

    def add_document(self, file: str, doc_no: int, doc: Any) -> None:
        if doc is None:
            return
        self._add(f"{file}: document {doc_no}", doc, None, None)

    def _add(self, where: str, obj: Any, list_api_version: str | None, list_kind: str | None) -> None:
        if not isinstance(obj, dict):
            raise ClusterInputError(
                f"{where}: expected a Kubernetes object (a mapping with apiVersion and kind), got {_type_name(obj)}"
                + (
                    "; put several objects in a v1 List (items: [...]) or in separate YAML documents"
                    if isinstance(obj, list)
                    else ""
                )
            )
        api_version = obj.get("apiVersion", list_api_version)
        kind = obj.get("kind", list_kind)
        missing = [f'"{k}"' for k, v in (("apiVersion", api_version), ("kind", kind)) if not v]
        if missing:
            raise ClusterInputError(f"{where}: not a Kubernetes object: missing {' and '.join(missing)}")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            raise ClusterInputError(f"{where}: apiVersion and kind must be strings")
        if "items" in obj and kind.endswith("List"):
            self._add_list(where, obj, api_version, kind)
            return
        try:
            if api_version == "v1" and kind == "Node":
                self._add_node(where, obj)
            elif api_version == "v1" and kind == "Pod":
                self._add_pod(where, obj)
            elif api_version == PRIORITY_CLASS_API_VERSION and kind == PRIORITY_CLASS_KIND:
                # Always read, whatever the plugins declare: the apiserver's Priority admission
                # plugin needs them (finish() admits every pod).
                self._add_object(where, self.kinds.get((api_version, kind), _PRIORITY_CLASS), obj)
            elif (api_version, kind) in self.kinds:
                self._add_object(where, self.kinds[api_version, kind], obj)
            else:
                key = f"{api_version} {kind}"
                self.skipped[key] = self.skipped.get(key, 0) + 1
        except ClusterInputError as e:
            if not self.lenient:
                raise
            self.invalid.append(str(e))

    def _add_list(self, where: str, obj: dict[str, Any], api_version: str, kind: str) -> None:
        items = obj.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise ClusterInputError(f"{where} ({api_version} {kind}): items must be a list, got {_type_name(items)}")
        # Items of a typed list (PodList from the API) carry no apiVersion/kind: take them from the list.
        item_kind = kind[: -len("List")] if kind != "List" else None
        item_api_version = api_version if item_kind else None
        sep = "." if where.endswith("]") else ", "
        for i, item in enumerate(items):
            self._add(f"{where}{sep}items[{i}]", item, item_api_version, item_kind)

    @staticmethod
    def _metadata(where: str, kind: str, obj: dict[str, Any], namespaced: bool) -> tuple[str, str, dict[str, Any]]:
        """(namespace, name, metadata) after checking their shape."""
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise ClusterInputError(f"{where} ({kind}): metadata must be a mapping, got {_type_name(meta)}")
        name = meta.get("name")
        if not name:
            raise ClusterInputError(f"{where} ({kind}): metadata.name is required")
        if not isinstance(name, str):
            raise ClusterInputError(f"{where} ({kind}): metadata.name must be a string, got {_type_name(name)}")
        if not namespaced:
            return "", name, meta
        namespace = meta.get("namespace")
        if not namespace:
            namespace = meta["namespace"] = "default"
        if not isinstance(namespace, str):
            raise ClusterInputError(
                f"{where} ({kind} {name}): metadata.namespace must be a string, got {_type_name(namespace)}"
            )
        return namespace, name, meta

    def _add_node(self, where: str, obj: dict[str, Any]) -> None:
        _, name, _ = self._metadata(where, "Node", obj, namespaced=False)
        what = f"{where} (Node {name})"
        first = self.node_at.get(name)
        if first is not None:
            raise ClusterInputError(f"{what}: duplicate Node {name}, first defined at {first}")
        try:
            check_node_shape(obj, "")  # the object is named already: paths start at ".metadata"
            if errors := validate_node(obj):
                raise ValueError(_first(errors))
            self.table.upsert_node(obj)
        except (ValueError, TypeError, AttributeError) as e:
            raise ClusterInputError(f"{what}: {_strip_prefix(str(e), f'node {name}: ')}") from None
        self.node_at[name] = where
        self.nodes.append(obj)

    def _add_pod(self, where: str, obj: dict[str, Any]) -> None:
        namespace, name, meta = self._metadata(where, "Pod", obj, namespaced=True)
        key = f"{namespace}/{name}"
        what = f"{where} (Pod {key})"
        first = self.pod_at.get(key)
        if first is not None:
            raise ClusterInputError(f"{what}: duplicate Pod {key}, first defined at {first}")
        try:
            check_pod_shape(obj, "")
            if errors := validate_pod(obj):
                raise ValueError(_first(errors))
            info = PodInfo.from_raw(obj)
        except (ValueError, TypeError, AttributeError) as e:
            raise ClusterInputError(f"{what}: {_strip_prefix(str(e), f'pod {key}: ')}") from None
        uid = meta.get("uid")
        if not uid:
            uid = meta["uid"] = f"sim-{namespace}-{name}"
        uid = str(uid)
        other = self.uid_at.get(uid)
        if other is not None:
            raise ClusterInputError(f"{what}: metadata.uid {uid!r} is also used by Pod {other[0]} at {other[1]}")
        if meta.get("creationTimestamp"):
            if self.latest_ts is None or info.creation_ts > self.latest_ts:
                self.latest_ts = info.creation_ts
        else:
            self.unstamped.append(meta)
        if info.terminal:
            self.terminal_pods += 1
        self.pod_at[key] = where
        if info.node_name and not info.terminal:
            self.bound_to[key] = info.node_name
        self.uid_at[uid] = (key, where)
        self.pods.append(obj)

    def _add_object(self, where: str, declared: ObjectKind, obj: dict[str, Any]) -> None:
        kind = declared.kind
        self._metadata(where, kind, obj, namespaced=declared.namespaced)
        name = declared.name
        key = object_key(obj, declared.namespaced)
        what = f"{where} ({kind} {key})"
        first = self.object_at.get((name, key))
        if first is not None:
            raise ClusterInputError(f"{what}: duplicate {kind} {key}, first defined at {first}")
        if declared.validate is not None:
            try:
                declared.validate(obj)
            except (ValueError, TypeError, AttributeError) as e:
                raise ClusterInputError(f"{what}: {e}") from None
        self.object_at[(name, key)] = where
        self.objects.setdefault(name, {})[key] = obj

    def _admit(self) -> list[str]:
        """Priority admission of the pods that carry no ``spec.priority`` (api/admission.py); the
        warnings about those that do and whose class does not account for it: one line when the
        input has no PriorityClass at all, else one per reason naming the first pod."""
        classes = self.objects.get(PRIORITY_CLASS_KIND, {})
        notes: dict[str, list[str]] = {}
        naming_a_class = 0
        refused: list[dict[str, Any]] = []
        for pod in self.pods:
            spec = pod.get("spec")
            carried = isinstance(spec, dict) and spec.get("priority") is not None
            meta = pod["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            try:
                admit_priority(pod, classes)
            except AdmissionError as e:
                error = f"{self.pod_at[key]} (Pod {key}): {e}"
                if not self.lenient:
                    raise ClusterInputError(error) from None
                self.invalid.append(error)
                refused.append(pod)
                continue
            if not carried:
                continue
            assert isinstance(spec, dict)
            if not classes:
                name = spec.get("priorityClassName")
                naming_a_class += bool(name) and str(name) not in SYSTEM_PRIORITY_CLASSES
            elif (note := carried_priority_note(spec, classes)) is not None:
                notes.setdefault(note, []).append(key)
        if refused:
            self._drop_pods(refused)
        if naming_a_class:
            return ["no PriorityClasses in the input: priorities taken from the pods"]
        return [
            f"{self.pod_at[keys[0]]} (Pod {keys[0]}): {note}: the priority the pod carries is kept"
            + (f" (so for {len(keys) - 1} more pod{'s' if len(keys) > 2 else ''})" if len(keys) > 1 else "")
            for note, keys in notes.items()
        ]

    def _drop_pods(self, dropped: list[dict[str, Any]]) -> None:
        """--lenient: forget pods refused after they were read (by admission)."""
        ids = {id(p) for p in dropped}
        self.pods = [p for p in self.pods if id(p) not in ids]
        for pod in dropped:
            meta = pod["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            self.bound_to.pop(key, None)
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                self.terminal_pods -= 1
        metas = {id(p["metadata"]) for p in dropped}
        self.unstamped = [m for m in self.unstamped if id(m) not in metas]

    def _skipped_invalid(self) -> list[str]:
        """--lenient: one line for every object skipped, with the first few errors."""
        if not self.invalid:
            return []
        n, shown = len(self.invalid), self.invalid[:_SHOWN_ERRORS]
        more = f"; and {n - len(shown)} more" if n > len(shown) else ""
        return [f"skipped {n} invalid object{'s' if n != 1 else ''} (--lenient): " + "; ".join(shown) + more]

    def _missing_kinds(self) -> list[str]:
        """One line per declared kind the input has no object of while some pod needs it."""
        out = []
        for declared in self.kinds.values():
            if declared.needed_by is None or self.objects.get(declared.name):
                continue
            needing = sum(1 for pod in self.pods if declared.needed_by(pod))
            if needing:
                plural = declared.kind + ("es" if declared.kind.endswith("s") else "s")
                out.append(f"no {plural} in the input: {declared.when_missing} "
                           f"({needing} pod{'s' if needing != 1 else ''} affected)")
        return out

    def finish(self, source: str) -> ClusterInput:
        warnings = self._admit()
        warnings[:0] = self._skipped_invalid()
        warnings += self._missing_kinds()
        base = _DEFAULT_BASE_TS if self.latest_ts is None else math.ceil(self.latest_ts)
        for k, meta in enumerate(self.unstamped, start=1):
            meta["creationTimestamp"] = rfc3339(base + k)
        warnings += [
            f"{self.pod_at[key]} (Pod {key}): bound to node {node!r}, which is not in the input: it is left "
            "out of every node's usage (add the Node, or drop spec.nodeName to schedule the pod)"
            for key, node in self.bound_to.items()
            if node not in self.node_at
        ]
        return ClusterInput(
            warnings=warnings,
            nodes=self.nodes,
            pods=self.pods,
            objects=self.objects,
            skipped=self.skipped,
            source=source,
            terminal_pods=self.terminal_pods,
        )
