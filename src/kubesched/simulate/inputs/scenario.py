"""A workload over time (``kubesched simulate --scenario FILE``): nodes present at the start, pods
that arrive at given virtual times and leave a given time after they were bound, and node events
(add, remove, cordon, uncordon) at given times. ``engine/timeline.py`` replays it.

The file (YAML or JSON, one document; format in docs/simulator.md)::

    kind: Scenario
    nodes: [<v1 Node>, ...]            # present at time 0
    pods:
      - at: 0                          # arrival, seconds of virtual time
        lifetime: 3600                 # optional: deleted this long after it is bound
        pod: <v1 Pod>
    nodeEvents:
      - {at: 600, action: add, node: <v1 Node>}
      - {at: 900, action: cordon, node: node-a}   # also uncordon, remove

A pod's lifetime counts from its bind, as a job runs for its duration once placed; when every
pod is placed as it arrives this is the trace's deletion time, as the reference simulator replays
deletions (hkust-adsl/kubernetes-scheduler-simulator pkg/simulator/simulator.go
``syncClusterResourceList``: one creation and one deletion event per pod, sorted by time). A pod
never bound never leaves: it is reported pending or unschedulable at the end.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

from kubesched.api.timestamps import rfc3339

__all__ = ["NODE_ACTIONS", "NodeEvent", "PodArrival", "Scenario", "ScenarioError", "load_replay", "load_scenario"]

NodeAction = Literal["add", "remove", "cordon", "uncordon"]
NODE_ACTIONS: tuple[NodeAction, ...] = ("add", "remove", "cordon", "uncordon")


class ScenarioError(ValueError):
    """A scenario that cannot be replayed; the message names the file, entry and field."""


@dataclass(frozen=True)
class PodArrival:
    #: Virtual seconds since the start.
    at: float
    #: The v1 Pod (pending; ``metadata.creationTimestamp`` is set to its arrival when replayed).
    pod: dict[str, Any]
    #: Seconds it stays once bound (None: until the end).
    lifetime: float | None = None


@dataclass(frozen=True)
class NodeEvent:
    at: float
    action: NodeAction
    #: The node's name (the whole object for ``add``: ``node``).
    name: str
    node: dict[str, Any] | None = None


@dataclass
class Scenario:
    #: Where it came from, for reports.
    source: str
    #: Nodes present at time 0.
    nodes: list[dict[str, Any]]
    #: In arrival order (stable: equal times keep file order).
    arrivals: list[PodArrival]
    node_events: list[NodeEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Pods arrive one after the other (one a second) and never leave: the reference's experiments
    #: (``inputs/inflation.py`` ``sequential``); inflation appends its clones after the last.
    sequential: bool = False

    def sorted(self) -> Scenario:
        """The same scenario with arrivals and node events in time order (file order on ties)."""
        return replace(self, arrivals=sorted(self.arrivals, key=lambda a: a.at),
                       node_events=sorted(self.node_events, key=lambda e: e.at))


def arrival_pod(arrival: PodArrival, index: int) -> dict[str, Any]:
    """The pod as it is created at its arrival: a copy with ``creationTimestamp`` at the arrival
    (the queue orders equal priorities by it) and a uid unique in the replay."""
    pod = _deep_copy(arrival.pod)
    meta = pod.setdefault("metadata", {})
    meta["creationTimestamp"] = rfc3339(arrival.at)
    meta.setdefault("uid", f"replay-{index}-{meta.get('namespace') or 'default'}-{meta.get('name')}")
    pod.setdefault("status", {})["phase"] = "Pending"
    (pod.setdefault("spec", {})).pop("nodeName", None)
    return pod


def _deep_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a decoded JSON/YAML object: through orjson (a tenth of ``copy.deepcopy``'s
    time: one per arriving pod), or ``copy.deepcopy`` for what JSON would not give back as it was
    (datetimes and subclasses raise instead of being converted; non-string keys raise)."""
    try:
        copied: dict[str, Any] = orjson.loads(orjson.dumps(
            obj, option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS))
    except TypeError:
        return copy.deepcopy(obj)
    return copied


# -- reading the file -------------------------------------------------------------------------------
def _seconds(value: Any, where: str, what: str, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ScenarioError(f"{where}: {what} must be a non-negative number of seconds, got {value!r}")
    return float(value)


def _object(value: Any, kind: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: must be a v1 {kind} object, got {type(value).__name__}")
    if value.get("kind", kind) != kind:
        raise ScenarioError(f"{where}: kind must be {kind}, got {value.get('kind')!r}")
    name = (value.get("metadata") or {}).get("name") if isinstance(value.get("metadata"), dict) else None
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}: metadata.name is required")
    return {"apiVersion": "v1", "kind": kind, **value}


def _list(doc: dict[str, Any], key: str, where: str) -> list[Any]:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: {key} must be a list")
    return value


def parse_scenario(doc: Any, where: str) -> Scenario:
    """A scenario from its decoded document (``where``: the file, for messages)."""
    if not isinstance(doc, dict):
        raise ScenarioError(f"{where}: a scenario must be a mapping with nodes, pods and nodeEvents")
    if doc.get("kind", "Scenario") != "Scenario":
        raise ScenarioError(f"{where}: kind must be Scenario, got {doc.get('kind')!r}")
    unknown = sorted(set(doc) - {"apiVersion", "kind", "nodes", "pods", "nodeEvents"})
    if unknown:
        raise ScenarioError(f"{where}: unknown field {unknown[0]!r} (known: nodes, pods, nodeEvents)")
    nodes = [_object(n, "Node", f"{where}: nodes[{i}]") for i, n in enumerate(_list(doc, "nodes", where))]
    arrivals: list[PodArrival] = []
    for i, entry in enumerate(_list(doc, "pods", where)):
        at = f"{where}: pods[{i}]"
        if not isinstance(entry, dict):
            raise ScenarioError(f"{at}: must be a mapping with at, pod and optionally lifetime")
        extra = sorted(set(entry) - {"at", "pod", "lifetime"})
        if extra:
            raise ScenarioError(f"{at}: unknown field {extra[0]!r} (known: at, pod, lifetime)")
        arrival = _seconds(entry.get("at"), at, "at")
        assert arrival is not None
        pod = _object(entry.get("pod"), "Pod", f"{at}.pod")
        if (pod.get("spec") or {}).get("nodeName"):
            raise ScenarioError(f"{at}.pod: spec.nodeName is set; an arriving pod is pending (put bound pods "
                                "in a --cluster dump instead)")
        arrivals.append(PodArrival(arrival, pod, _seconds(entry.get("lifetime"), at, "lifetime", allow_none=True)))
    events: list[NodeEvent] = []
    known = {n["metadata"]["name"] for n in nodes}
    for i, entry in enumerate(_list(doc, "nodeEvents", where)):
        at = f"{where}: nodeEvents[{i}]"
        if not isinstance(entry, dict):
            raise ScenarioError(f"{at}: must be a mapping with at, action and node")
        time = _seconds(entry.get("at"), at, "at")
        assert time is not None
        action = entry.get("action")
        if action not in NODE_ACTIONS:
            raise ScenarioError(f"{at}: action must be one of {', '.join(NODE_ACTIONS)}, got {action!r}")
        target = entry.get("node")
        if action == "add":
            node = _object(target, "Node", f"{at}.node")
            known.add(node["metadata"]["name"])
            events.append(NodeEvent(time, "add", node["metadata"]["name"], node))
            continue
        if not isinstance(target, str) or not target:
            raise ScenarioError(f"{at}.node: the name of the node to {action}, got {target!r}")
        if target not in known:
            raise ScenarioError(f"{at}.node: no node {target!r} in nodes or added by an earlier event")
        events.append(NodeEvent(time, action, target))
    return Scenario(where, nodes, arrivals, events).sorted()


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (YAML or JSON)."""
    p = Path(path)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(p.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ScenarioError(f"{p}: cannot read: {e}") from None
    return parse_scenario(doc, str(p))


def load_replay(scenario_path: str | Path | None, trace: str | None, arrivals: str = "trace",
                inflate_to: float | None = None, gpu_nodes_only: bool = False, seed: int = 0) -> Scenario:
    """What ``--scenario``/``--trace`` (with ``--arrivals``, ``--inflate``, ``--gpu-nodes-only``)
    ask for: the scenario, in the reference's sequential order if asked, inflated, all drawn from
    one generator seeded with ``seed`` (inputs/inflation.py)."""
    import numpy as np

    from kubesched.simulate.inputs.inflation import inflate, sequential
    from kubesched.simulate.inputs.openb import load_openb

    if (scenario_path is None) == (trace is None):
        raise ScenarioError("give either --scenario FILE or --trace openb:PATH")
    if trace is not None:
        kind, _, path = trace.partition(":")
        if kind != "openb" or not path:
            raise ScenarioError(f"--trace {trace}: expected openb:PATH (the only trace format read)")
        scenario = load_openb(path, gpu_nodes_only=gpu_nodes_only)
    else:
        assert scenario_path is not None
        if gpu_nodes_only:
            raise ScenarioError("--gpu-nodes-only applies to --trace only")
        scenario = load_scenario(scenario_path)
    rng = np.random.default_rng(seed)
    if arrivals == "sequential":
        scenario = sequential(scenario, rng)
    if inflate_to is not None:
        scenario = inflate(scenario, inflate_to, rng)
    return scenario
