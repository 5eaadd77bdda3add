"""PodTopologySpread's kept state (the counted-node mappings of ``NodeLabelCache.counted_domains``
and the topology index's per-domain sums): one plugin on a table that changes between pods of one
family answers exactly as a fresh plugin on a table built from scratch after each change."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.podtopologyspread import PodTopologySpread
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import node, pod, table_of

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
APP = {"matchLabels": {"app": "web"}}
SERVICES = {"default/web": {"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}}


def _node(name: str, zone: str | None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    n = node(name, taints=taints)
    n["metadata"]["labels"] = {HOST: name, **({ZONE: zone} if zone else {})}
    return n


def _spread(when: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": APP, **extra}


def _incoming(i: int) -> list[PodInfo]:
    """Pods of several families: own hard and soft constraints, a nodeSelector (nodeAffinityPolicy
    Honor), nodeTaintsPolicy Honor with and without a toleration, and the system defaults (the
    selector from the Service)."""
    specs: list[dict[str, Any]] = [
        {"topologySpreadConstraints": [_spread("DoNotSchedule"), _spread("ScheduleAnyway", HOST)]},
        {"topologySpreadConstraints": [_spread("DoNotSchedule"), _spread("ScheduleAnyway")],
         "nodeSelector": {ZONE: "z1"}},
        {"topologySpreadConstraints": [_spread("DoNotSchedule", nodeTaintsPolicy="Honor"),
                                       _spread("ScheduleAnyway", nodeTaintsPolicy="Honor")]},
        {"topologySpreadConstraints": [_spread("DoNotSchedule", nodeTaintsPolicy="Honor"),
                                       _spread("ScheduleAnyway", nodeTaintsPolicy="Honor")],
         "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]},
        {},
    ]
    return [PodInfo.from_raw(pod(f"in-{i}-{k}", labels={"app": "web"}, **spec)) for k, spec in enumerate(specs)]


def _plugin(table: NodeTable) -> PodTopologySpread:
    h = Handle(table, FakeClock(), WaitingPods(), profile_name="p",
               objects=lambda kind: SERVICES if kind == "Service" else {})
    return PodTopologySpread(None, h)


def _answers(pl: PodTopologySpread, table: NodeTable, p: PodInfo) -> tuple[Any, ...]:
    """Per node name: the Filter code and the normalized score (None where PreFilter/PreScore
    skip), plus the PreFilter state's domains and minimum."""
    rows = table.alive_rows()
    names = [table.names[r] for r in rows]
    state = CycleState()
    _, st = pl.pre_filter(state, p, table)
    verdicts: dict[str, int] | None = None
    if st.is_success:
        codes = pl.filter_batch(state, p, table, rows).codes
        verdicts = dict(zip(names, codes.tolist(), strict=True))
    state = CycleState()
    scored: dict[str, int] | None = None
    if pl.pre_score(state, p, table, rows).is_success:
        out = pl.score_batch(state, p, table, rows)
        assert isinstance(out, np.ndarray)
        assert pl.normalize_score(state, p, table, rows, out).is_success
        scored = dict(zip(names, out.tolist(), strict=True))
    return st.code, verdicts, scored


def test_kept_counts_follow_every_change_exactly() -> None:
    nodes = {f"n{i}": _node(f"n{i}", ("z1", "z2", "z3")[i % 3]) for i in range(6)}
    pods: dict[str, dict[str, Any]] = {}
    table = NodeTable(capacity=2)
    for n in nodes.values():
        table.upsert_node(n)
    live = _plugin(table)

    def place(name: str, node_name: str, labels: dict[str, str] | None = None) -> None:
        raw = pod(name, node_name=node_name, labels=labels if labels is not None else {"app": "web"})
        pods[name] = raw
        table.add_pod(PodInfo.from_raw(raw))

    def unplace(name: str) -> None:
        raw = pods.pop(name)
        table.remove_pod(PodInfo.from_raw(raw).uid)

    aside: dict[str, dict[str, Any]] = {}

    def set_node(n: dict[str, Any]) -> None:
        name = n["metadata"]["name"]
        nodes[name] = n
        table.upsert_node(n)
        for pname in [k for k, p in aside.items() if p["spec"]["nodeName"] == name]:
            pods[pname] = aside.pop(pname)  # the table accounts them again with their node

    def drop_node(name: str) -> None:
        del nodes[name]
        table.remove_node(name)
        for pname in [k for k, p in pods.items() if p["spec"]["nodeName"] == name]:
            aside[pname] = pods.pop(pname)  # kept aside by the table, counted nowhere meanwhile

    def terminate(name: str) -> None:
        current = table.pod(PodInfo.from_raw(pods[name]).uid)
        assert current is not None
        raw = copy.deepcopy(current.raw)
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        pods[name] = raw
        table.replace_pod(PodInfo.from_raw(raw, previous=current))

    changes = [
        lambda: place("a", "n0"),
        lambda: place("b", "n1"),
        lambda: place("c", "n1"),
        lambda: place("other", "n2", {"app": "db"}),
        lambda: unplace("b"),
        lambda: set_node(_node("n1", "z3")),  # relabelled into another zone
        lambda: set_node(_node("n2", None)),  # loses its zone label
        lambda: set_node(_node("n3", "z1", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])),
        lambda: place("d", "n3"),
        lambda: place("d2", "n3"),
        lambda: terminate("a"),
        lambda: place("g", "n4"),
        lambda: drop_node("n4"),
        lambda: set_node(_node("n9", "z4")),  # a new zone
        lambda: place("e", "n9"),
        lambda: set_node(_node("n4", "z2")),
    ]
    seen = set()
    for step, change in enumerate(changes):
        change()
        for p in _incoming(step):  # each family asked twice: the second answer comes from kept state
            # A table of its own per pod: the topology index (per table) keeps state too.
            fresh_table = table_of(*nodes.values(), pods=list(pods.values()))
            want = _answers(_plugin(fresh_table), fresh_table, p)
            for _ in range(2):
                got = _answers(live, table, p)
                assert got == want, (step, p.name)
            seen.add(repr(got))
    assert len(seen) > 10  # the changes did change the answers
