"""PodTopologySpread: cases ported from upstream's podtopologyspread filtering_test.go
(TestPreFilterState, TestSingleConstraint, TestMultipleConstraints, TestPreFilterDisabled,
TestPreFilterStateAddPod/RemovePod) and scoring_test.go (TestPodTopologySpreadScore), each named
after its upstream case, plus args validation and events."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
from kubesched.plugins.podtopologyspread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PRE_FILTER_STATE_KEY,
    PreFilterState,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import node, pod, table_of

HOST = "kubernetes.io/hostname"
FOO: dict[str, Any] = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR: dict[str, Any] = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


# -- builders (upstream st.MakeNode / st.MakePod) ---------------------------------------------------


def mk_node(name: str, taints: list[dict[str, str]] | None = None, **labels: str) -> dict[str, Any]:
    """A node with exactly ``labels`` (no implicit hostname label, as upstream's MakeNode)."""
    n = node(name, taints=taints)
    n["metadata"]["labels"] = {k.replace("__", "/"): v for k, v in labels.items()}
    return n


def zn(name: str, zone: str, **extra: str) -> dict[str, Any]:
    """``MakeNode().Name(name).Label("zone", zone).Label("node", name)``."""
    return mk_node(name, zone=zone, node=name, **extra)


def tsc(max_skew: int, key: str, when: str, selector: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        c["labelSelector"] = selector
    c.update(extra)
    return c


def spod(name: str, labels: dict[str, str], *constraints: dict[str, Any], **spec: Any) -> PodInfo:
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    return PodInfo.from_raw(pod(name, labels=labels, **spec))


def on(name: str, node_name: str, labels: dict[str, str] | None = None, namespace: str = "default",
       terminating: bool = False) -> dict[str, Any]:
    p = pod(name, node_name=node_name, labels=labels if labels is not None else {"foo": ""}, namespace=namespace)
    if terminating:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return p


def plugin_for(table: NodeTable, args: PodTopologySpreadArgs | None = None,
               objects: dict[str, dict[str, dict[str, Any]]] | None = None) -> PodTopologySpread:
    objs = objects or {}
    h = Handle(table, FakeClock(), WaitingPods(), profile_name="p", objects=lambda kind: objs.get(kind, {}))
    return PodTopologySpread(args, h)


def filter_codes(table: NodeTable, p: PodInfo, args: PodTopologySpreadArgs | None = None,
                 objects: dict[str, dict[str, dict[str, Any]]] | None = None) -> dict[str, Code]:
    pl = plugin_for(table, args, objects)
    state = CycleState()
    _, st = pl.pre_filter(state, p, table)
    assert st.is_success, st
    rows = table.alive_rows()
    verdicts = pl.filter_batch(state, p, table, rows)
    out: dict[str, Code] = {}
    for row, code in zip(rows, verdicts.codes, strict=True):
        out[table.names[row]] = Code.SUCCESS if code == 0 else verdicts.statuses[code - 1].code
        # the per-node form agrees with the batch form
        single = pl.filter(state, p, table.node_info(int(row)))
        assert single.code == out[table.names[row]]
    return out


S, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
FOUR = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
SPREAD_2103 = [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"),
               on("p-y1", "node-y"), on("p-y2", "node-y"), on("p-y3", "node-y")]


# -- TestSingleConstraint ---------------------------------------------------------------------------

SINGLE: list[tuple[str, PodInfo | None, list[dict[str, Any]], list[dict[str, Any]], dict[str, Code]]] = [
    ("no existing pods", spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)), FOUR, [],
     {"node-a": S, "node-b": S, "node-x": S, "node-y": S}),
    ("no existing pods, incoming pod doesn't match itself",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", BAR)),
     FOUR, [], {"node-a": S, "node-b": S, "node-x": S, "node-y": S}),
    ("existing pods in a different namespace do not count",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)),
     FOUR, [on("p-a1", "node-a", namespace="ns1"), on("p-b1", "node-a", namespace="ns2"), on("p-x1", "node-x"),
            on("p-y1", "node-y")],
     {"node-a": S, "node-b": S, "node-x": U, "node-y": U}),
    ("pods spread across zones as 3/3, all nodes fit", spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)),
     FOUR, SPREAD_2103, {"node-a": S, "node-b": S, "node-x": S, "node-y": S}),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)),
     [zn("node-a", "zone1"), mk_node("node-b", zon="zone1", node="node-b"),
      zn("node-x", "zone2"), zn("node-y", "zone2")],
     [on("p-a1", "node-a"), on("p-b1", "node-b"), on("p-x1", "node-x"), on("p-y1", "node-y")],
     {"node-a": S, "node-b": UU, "node-x": U, "node-y": U}),
    ("pod cannot be scheduled as all nodes don't have label 'rack'",
     spod("p", {"foo": ""}, tsc(1, "rack", "DoNotSchedule", FOO)), [zn("node-a", "zone1"), zn("node-x", "zone2")], [],
     {"node-a": UU, "node-x": UU}),
    ("pods spread across nodes as 2/1/0/3, only node-x fits",
     spod("p", {"foo": ""}, tsc(1, "node", "DoNotSchedule", FOO)),
     FOUR, SPREAD_2103, {"node-a": U, "node-b": U, "node-x": S, "node-y": U}),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
     spod("p", {"foo": ""}, tsc(2, "node", "DoNotSchedule", FOO)), FOUR, SPREAD_2103,
     {"node-a": U, "node-b": S, "node-x": S, "node-y": U}),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
     spod("p", {"bar": ""}, tsc(1, "node", "DoNotSchedule", FOO)), FOUR, SPREAD_2103,
     {"node-a": U, "node-b": S, "node-x": S, "node-y": U}),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     spod("p", {"foo": ""}, tsc(1, "node", "DoNotSchedule", FOO), affinity={"nodeAffinity": {
         "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
             {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}]}}}),
     FOUR, SPREAD_2103, {"node-a": S, "node-b": S, "node-x": S, "node-y": U}),
    ("terminating Pods should be excluded", spod("p", {"foo": ""}, tsc(1, "node", "DoNotSchedule", FOO)),
     [mk_node("node-a", node="node-a"), mk_node("node-b", node="node-b")],
     [on("p-a", "node-a", terminating=True), on("p-b", "node-b")], {"node-a": S, "node-b": U}),
    # minDomains (upstream "incoming pod has minDomains..." cases)
    ("pods spread across zone 1/0 with minDomains 3: global minimum is 0, zone1 (1+1-0 > 1) fails",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO, minDomains=3)),
     [zn("node-a", "zone1"), zn("node-x", "zone2")], [on("p-a1", "node-a")], {"node-a": U, "node-x": S}),
    ("pods spread across zone 1/1 with minDomains 3: both zones fail (1+1-0 > 1)",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO, minDomains=3)),
     [zn("node-a", "zone1"), zn("node-x", "zone2")], [on("p-a1", "node-a"), on("p-x1", "node-x")],
     {"node-a": U, "node-x": U}),
    ("pods spread across zone 1/1 with minDomains 2: minimum 1, both fit",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO, minDomains=2)),
     [zn("node-a", "zone1"), zn("node-x", "zone2")], [on("p-a1", "node-a"), on("p-x1", "node-x")],
     {"node-a": S, "node-x": S}),
    # nodeAffinityPolicy / nodeTaintsPolicy (upstream "NodeAffinityPolicy honored/ignored",
    # "NodeTaintsPolicy honored/ignored" cases)
    ("NodeAffinityPolicy honored with labelSelectors (adapted: zone3 fails the nodeSelector)",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO), nodeSelector={"foo": ""}),
     [zn("node-a", "zone1", foo=""), zn("node-x", "zone2", foo=""), zn("node-y", "zone3")],
     [on("p-a", "node-a"), on("p-y1", "node-y"), on("p-y2", "node-y")],
     {"node-a": U, "node-x": S, "node-y": S}),
    ("NodeAffinityPolicy ignored with labelSelectors (adapted: zone3 counts)",
     spod("p",
     {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO, nodeAffinityPolicy="Ignore"), nodeSelector={"foo": ""}),
     [zn("node-a", "zone1", foo=""), zn("node-x", "zone2", foo=""), zn("node-y", "zone3")],
     [on("p-a", "node-a"), on("p-y1", "node-y"), on("p-y2", "node-y")],
     {"node-a": U, "node-x": S, "node-y": U}),
    ("NodeTaintsPolicy honored",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO, nodeTaintsPolicy="Honor")),
     [zn("node-a", "zone1"), zn("node-b", "zone1"),
      mk_node("node-x", taints=[{"key": "foo", "value": "", "effect": "NoSchedule"}], zone="zone2", node="node-x"),
      zn("node-y", "zone3")],
     [on("p-a", "node-a"), on("p-b", "node-b"), on("p-x", "node-x"), on("p-y", "node-y")],
     {"node-a": U, "node-b": U, "node-x": S, "node-y": S}),
    ("NodeTaintsPolicy ignored",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)),
     [zn("node-a", "zone1"), zn("node-b", "zone1"),
      mk_node("node-x", taints=[{"key": "foo", "value": "", "effect": "NoSchedule"}], zone="zone2", node="node-x"),
      zn("node-y", "zone3")],
     [on("p-a", "node-a"), on("p-b", "node-b"), on("p-x", "node-x"), on("p-y", "node-y")],
     {"node-a": U, "node-b": U, "node-x": S, "node-y": S}),
    ("NodeTaintsPolicy honored, the tolerated taint does not exclude the node",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO, nodeTaintsPolicy="Honor"),
          tolerations=[{"key": "foo", "operator": "Exists"}]),
     [zn("node-a", "zone1"), zn("node-b", "zone1"),
      mk_node("node-x", taints=[{"key": "foo", "value": "", "effect": "NoSchedule"}], zone="zone2", node="node-x"),
      zn("node-y", "zone3")],
     [on("p-a", "node-a"), on("p-b", "node-b"), on("p-x", "node-x"), on("p-y", "node-y")],
     {"node-a": U, "node-b": U, "node-x": S, "node-y": S}),
    # matchLabelKeys (upstream "matchLabelKeys ignored when the pod lacks the key" / "merged")
    ("matchLabelKeys: the pod's value of the key is ANDed into the selector",
     spod("p", {"foo": "", "bar": "a"}, tsc(1, "zone", "DoNotSchedule", FOO, matchLabelKeys=["bar"])),
     [zn("node-a", "zone1"), zn("node-x", "zone2")],
     [on("p-a1", "node-a", {"foo": "", "bar": "a"}), on("p-x1", "node-x", {"foo": "", "bar": "b"}),
      on("p-x2", "node-x", {"foo": "", "bar": "b"})],
     {"node-a": U, "node-x": S}),
    ("matchLabelKeys: a key the pod does not have is ignored",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO, matchLabelKeys=["bar"])),
     [zn("node-a", "zone1"), zn("node-x", "zone2")],
     [on("p-a1", "node-a", {"foo": "", "bar": "a"}), on("p-x1", "node-x", {"foo": "", "bar": "b"}),
      on("p-x2", "node-x", {"foo": "", "bar": "b"})],
     {"node-a": S, "node-x": U}),
    ("null labelSelector matches nothing: every node passes",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", None)), [zn("node-a", "zone1"), zn("node-x", "zone2")],
     [on("p-a1", "node-a"), on("p-a2", "node-a")], {"node-a": S, "node-x": S}),
    ("matchLabels and NotIn/DoesNotExist expressions",
     spod("p", {"app": "web"}, tsc(1, "zone", "DoNotSchedule", {"matchLabels": {"app": "web"}, "matchExpressions": [
         {"key": "tier", "operator": "NotIn", "values": ["db"]}, {"key": "canary", "operator": "DoesNotExist"}]})),
     [zn("node-a", "zone1"), zn("node-x", "zone2")],
     [on("a1", "node-a", {"app": "web"}), on("a2", "node-a", {"app": "web", "tier": "fe"}),
      on("x1", "node-x", {"app": "web", "tier": "db"}),
      on("x2", "node-x", {"app": "web", "canary": "1"}), on("x3", "node-x", {"app": "web", "tier": "fe"})],
     {"node-a": U, "node-x": S}),
    ("matchExpressions In",
     spod("p", {"app": "web"}, tsc(1, "zone", "DoNotSchedule", {"matchExpressions": [
         {"key": "app", "operator": "In", "values": ["web", "api"]}]})),
     [zn("node-a", "zone1"), zn("node-x", "zone2")],
     [on("a1", "node-a", {"app": "api"}), on("a2", "node-a", {"app": "web"}), on("x1", "node-x", {"app": "db"})],
     {"node-a": U, "node-x": S}),
]


@pytest.mark.parametrize(("name", "p", "nodes", "existing", "want"), SINGLE, ids=[c[0] for c in SINGLE])
def test_single_constraint(name: str, p: PodInfo, nodes: list[dict[str, Any]], existing: list[dict[str, Any]],
                           want: dict[str, Code]) -> None:
    assert filter_codes(table_of(*nodes, pods=existing), p) == want


# -- TestMultipleConstraints ------------------------------------------------------------------------

MULTI: list[tuple[str, PodInfo, list[dict[str, Any]], list[dict[str, Any]], dict[str, Code]]] = [
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", FOO)),
     FOUR, SPREAD_2103, {"node-a": U, "node-b": U, "node-x": S, "node-y": U}),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", FOO)),
     FOUR, [*SPREAD_2103, on("p-y4", "node-y")], {"node-a": U, "node-b": U, "node-x": U, "node-y": U}),
    ("Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
     spod("p", {"foo": "", "bar": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", BAR)),
     FOUR, [on("p-a1", "node-a", {"foo": ""}), on("p-y1", "node-y", {"bar": ""})],
     {"node-a": U, "node-b": U, "node-x": S, "node-y": U}),
    ("Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
     spod("p", {"foo": "", "bar": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", BAR)),
     FOUR, [on("p-a1", "node-a", {"foo": ""}), on("p-x1", "node-x", {"bar": ""}), on("p-y1", "node-y", {"bar": ""})],
     {"node-a": U, "node-b": U, "node-x": U, "node-y": U}),
    ("Constraints hold different labelSelectors, spreads = [1/2, 0/0/1/2]",
     spod("p", {"foo": "", "bar": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", BAR)),
     FOUR, [on("p-a1", "node-a", {"foo": ""}), on("p-x1", "node-x", {"foo": "", "bar": ""}),
            on("p-y1", "node-y", {"foo": "", "bar": ""}), on("p-y2", "node-y", {"bar": ""})],
     {"node-a": S, "node-b": S, "node-x": U, "node-y": U}),
    ("two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
     spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", FOO)),
     [zn("node-a", "zone1"), zn("node-b", "zone1"), mk_node("node-x", zone="zone2"), zn("node-y", "zone2")],
     [on("p-a1", "node-a"), on("p-y1", "node-y")], {"node-a": U, "node-b": S, "node-x": UU, "node-y": U}),
]


@pytest.mark.parametrize(("name", "p", "nodes", "existing", "want"), MULTI, ids=[c[0] for c in MULTI])
def test_multiple_constraints(name: str, p: PodInfo, nodes: list[dict[str, Any]], existing: list[dict[str, Any]],
                              want: dict[str, Code]) -> None:
    assert filter_codes(table_of(*nodes, pods=existing), p) == want


# -- TestPreFilterState -----------------------------------------------------------------------------


def _domains(table: NodeTable, s: PreFilterState, i: int) -> dict[str, int]:
    col = table.label_column(s.constraints[i].topology_key)
    return {v: int(s.match_num[i][c]) for v, c in col.values.items() if c < len(s.present[i]) and s.present[i][c]}


def _state(table: NodeTable, p: PodInfo, args: PodTopologySpreadArgs | None = None,
           objects: dict[str, dict[str, dict[str, Any]]] | None = None) -> tuple[PreFilterState | None, Any]:
    pl = plugin_for(table, args, objects)
    state = CycleState()
    _, st = pl.pre_filter(state, p, table)
    s = state.get(PRE_FILTER_STATE_KEY)
    return s, st


def test_pre_filter_state_clean_cluster_with_one_spreadconstraint() -> None:
    t = table_of(*FOUR)
    s, _ = _state(t, spod("p", {"foo": "bar"}, tsc(5, "zone", "DoNotSchedule",
                                                    {"matchLabels": {"foo": "bar"}})))
    assert s is not None
    assert _domains(t, s, 0) == {"zone1": 0, "zone2": 0}
    assert s.min_match_num(0) == 0


def test_pre_filter_state_normal_case_with_one_spreadconstraint() -> None:
    t = table_of(*FOUR, pods=[on("p-a1", "node-a"), on("p-a2", "node-a", {"foo": "", "bar": ""}),
                              on("p-x1", "node-x"), on("p-y1", "node-y", {"foo": "", "bar": ""}),
                              on("p-y2", "node-y", {"bar": ""})])
    s, _ = _state(t, spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)))
    assert s is not None
    assert _domains(t, s, 0) == {"zone1": 2, "zone2": 2}


def test_pre_filter_state_namespace_mismatch_doesnt_count() -> None:
    t = table_of(*FOUR, pods=[on("p-a1", "node-a"), on("p-a2", "node-a", namespace="ns1"),
                              on("p-b1", "node-b", namespace="ns2"), on("p-x1", "node-x"),
                              on("p-y1", "node-y", namespace="ns1")])
    s, _ = _state(t, spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)))
    assert s is not None
    assert _domains(t, s, 0) == {"zone1": 1, "zone2": 1}


def test_pre_filter_state_normal_case_with_two_spreadconstraints() -> None:
    t = table_of(*FOUR, pods=[on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"),
                              on("p-y1", "node-y"), on("p-y2", "node-y"), on("p-y3", "node-y"),
                              on("p-y4", "node-y")])
    s, _ = _state(t, spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", FOO)))
    assert s is not None
    assert _domains(t, s, 0) == {"zone1": 3, "zone2": 4}
    assert _domains(t, s, 1) == {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}
    assert s.min_match_num(0) == 3 and s.min_match_num(1) == 0


def test_pre_filter_state_soft_spreadconstraints_should_be_bypassed() -> None:
    t = table_of(*FOUR)
    s, st = _state(t, spod("p", {"foo": ""}, tsc(1, "zone", "ScheduleAnyway", FOO)))
    assert st.code == Code.SKIP and s is None


def test_pre_filter_state_different_labelselectors_spread_across_zones_and_nodes() -> None:
    # "different labelSelectors - simple version"
    t = table_of(zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2"),
                 pods=[on("p-a", "node-a", {"foo": ""}), on("p-b", "node-b", {"bar": ""})])
    s, _ = _state(t, spod("p", {"foo": "", "bar": ""}, tsc(1, "zone", "DoNotSchedule", FOO),
                          tsc(1, "node", "DoNotSchedule", BAR)))
    assert s is not None
    assert _domains(t, s, 0) == {"zone1": 1, "zone2": 0}
    assert _domains(t, s, 1) == {"node-a": 0, "node-b": 1, "node-y": 0}


def test_pre_filter_state_nodes_failing_node_affinity_are_not_counted() -> None:
    # "two spreadConstraints, and with podAffinity" → nodeAffinity on zone In [zone1]
    t = table_of(*FOUR, pods=[on("p-a1", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y")])
    p = spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", FOO),
             affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                 {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["zone2"]}]}]}}})
    s, _ = _state(t, p)
    assert s is not None
    assert _domains(t, s, 0) == {"zone1": 2}
    assert _domains(t, s, 1) == {"node-a": 1, "node-b": 1}


def test_pre_filter_state_default_constraints_and_a_service() -> None:
    # "default constraints and a service"
    args = PodTopologySpreadArgs.model_validate({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]})
    svc = {"default/svc": {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"foo": "bar"}}}}
    t = table_of(mk_node("node-a", node="node-a", rack="r1"))
    s, st = _state(t, spod("p", {"foo": "bar"}), args, {"Service": svc})
    assert st.is_success and s is not None
    assert [(c.max_skew, c.topology_key) for c in s.constraints] == [(3, "node"), (5, "rack")]
    assert all(c.selector.matches({"foo": "bar"}) and not c.selector.matches({"foo": "x"}) for c in s.constraints)


def test_pre_filter_state_default_constraints_and_a_service_that_doesnt_match() -> None:
    args = PodTopologySpreadArgs.model_validate({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]})
    svc = {"default/svc": {"metadata": {"name": "svc"}, "spec": {"selector": {"baz": "kep"}}}}
    t = table_of(mk_node("node-a", node="node-a"))
    s, st = _state(t, spod("p", {"foo": "bar"}), args, {"Service": svc})
    assert st.code == Code.SKIP and s is None


def test_pre_filter_state_default_constraints_pod_has_own_constraints() -> None:
    # "default constraints and a service, but pod has constraints"
    args = PodTopologySpreadArgs.model_validate({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]})
    svc = {"default/svc": {"metadata": {"name": "svc"}, "spec": {"selector": {"foo": "bar"}}}}
    t = table_of(mk_node("node-a", node="node-a", zone="z"))
    s, _ = _state(t, spod("p", {"foo": "bar", "baz": "tar"}, tsc(1, "zone", "DoNotSchedule",
                                                                 {"matchLabels": {"baz": "tar"}}),
                          tsc(2, "planet", "ScheduleAnyway", {"matchLabels": {"fot": "rok"}})), args, {"Service": svc})
    assert s is not None
    assert [(c.max_skew, c.topology_key) for c in s.constraints] == [(1, "zone")]


def test_pre_filter_state_default_soft_constraints_and_a_service() -> None:
    # "default soft constraints and a service": no hard ones → Skip
    args = PodTopologySpreadArgs.model_validate({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"}]})
    svc = {"default/svc": {"metadata": {"name": "svc"}, "spec": {"selector": {"foo": "bar"}}}}
    s, st = _state(table_of(mk_node("node-a", node="node-a")), spod("p", {"foo": "bar"}), args, {"Service": svc})
    assert st.code == Code.SKIP and s is None


def test_default_selector_from_replicaset_owner() -> None:
    args = PodTopologySpreadArgs.model_validate({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]})
    rs = {"default/rs": {"metadata": {"name": "rs"}, "spec": {"selector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["web"]}]}}}}
    t = table_of(zn("node-a", "zone1"), zn("node-x", "zone2"), pods=[on("w1", "node-a", {"app": "web"})])
    raw = pod("p", labels={"app": "web"})
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                           "controller": True, "uid": "u"}]
    p = PodInfo.from_raw(raw)
    s, st = _state(t, p, args, {"ReplicaSet": rs})
    assert st.is_success and s is not None
    assert _domains(t, s, 0) == {"zone1": 1, "zone2": 0}
    assert filter_codes(t, p, args, {"ReplicaSet": rs}) == {"node-a": U, "node-x": S}


def test_pre_filter_skip_for_pod_without_constraints() -> None:
    # TestPreFilterDisabled's counterpart: no constraints (System defaults are all soft) → Skip.
    t = table_of(*FOUR)
    s, st = _state(t, spod("p", {"foo": ""}))
    assert st.code == Code.SKIP and s is None


def test_invalid_selector_is_an_error() -> None:
    t = table_of(*FOUR)
    _, st = _state(t, spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", {"matchExpressions": [
        {"key": "foo", "operator": "In", "values": []}]})))
    assert st.code == Code.ERROR
    assert "obtaining pod's hard topology spread constraints" in st.message


def test_filter_reasons_are_upstreams() -> None:
    t = table_of(zn("node-a", "zone1"), mk_node("node-b"), zn("node-x", "zone2"),
                 pods=[on("a1", "node-a"), on("a2", "node-a")])
    p = spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO))
    pl = plugin_for(t)
    state = CycleState()
    pl.pre_filter(state, p, t)
    st_a = pl.filter(state, p, t.node_info(t.row_of("node-a") or 0))
    st_b = pl.filter(state, p, t.node_info(t.row_of("node-b") or 0))
    assert st_a.code == U and st_a.reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
    assert st_b.code == UU and st_b.reasons == (ERR_REASON_NODE_LABEL_NOT_MATCH,)
    assert ERR_REASON_CONSTRAINTS_NOT_MATCH == "node(s) didn't match pod topology spread constraints"
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == (
        "node(s) didn't match pod topology spread constraints (missing required label)")


def test_filter_without_pre_filter_state_is_an_error() -> None:
    t = table_of(*FOUR)
    pl = plugin_for(t)
    p = spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO))
    st = pl.filter(CycleState(), p, t.node_info(0))
    assert st.code == Code.ERROR


# -- TestPreFilterStateAddPod / RemovePod -----------------------------------------------------------


def test_add_pod_node_a_and_node_b_are_in_same_zone() -> None:
    # "node a and b both impact current min match"
    t = table_of(zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"))
    p = spod("p", {"foo": ""}, tsc(1, "node", "DoNotSchedule", FOO))
    pl = plugin_for(t)
    state = CycleState()
    pl.pre_filter(state, p, t)
    s = state.read(PRE_FILTER_STATE_KEY)
    assert s.min_match_num(0) == 0
    added = PodInfo.from_raw(on("p-a1", "node-a"))
    st = pl.add_pod(state, p, added, t.node_info(t.row_of("node-a") or 0))
    assert st.is_success
    assert _domains(t, s, 0) == {"node-a": 1, "node-b": 0, "node-x": 0}
    assert s.min_match_num(0) == 0
    for name in ("node-b", "node-x"):
        pl.add_pod(state, p, PodInfo.from_raw(on(f"p-{name}", name)), t.node_info(t.row_of(name) or 0))
    assert s.min_match_num(0) == 1
    # a pod of another namespace, or one not matching the selector, changes nothing
    pl.add_pod(state, p, PodInfo.from_raw(on("o", "node-a", namespace="other")), t.node_info(0))
    pl.add_pod(state, p, PodInfo.from_raw(on("o2", "node-a", {"bar": ""})), t.node_info(0))
    assert _domains(t, s, 0) == {"node-a": 1, "node-b": 1, "node-x": 1}
    pl.remove_pod(state, p, added, t.node_info(t.row_of("node-a") or 0))
    assert _domains(t, s, 0) == {"node-a": 0, "node-b": 1, "node-x": 1}
    assert s.min_match_num(0) == 0


def test_add_pod_on_node_missing_a_key_is_ignored_and_clone_isolates() -> None:
    # "add a pod to a node which doesn't have the topology key"
    t = table_of(zn("node-a", "zone1"), mk_node("node-b", zone="zone1"))
    p = spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO), tsc(1, "node", "DoNotSchedule", FOO))
    pl = plugin_for(t)
    state = CycleState()
    pl.pre_filter(state, p, t)
    s = state.read(PRE_FILTER_STATE_KEY)
    pl.add_pod(state, p, PodInfo.from_raw(on("x", "node-b")), t.node_info(t.row_of("node-b") or 0))
    assert _domains(t, s, 0) == {"zone1": 0}
    cloned = state.clone()
    pl.add_pod(cloned, p, PodInfo.from_raw(on("y", "node-a")), t.node_info(t.row_of("node-a") or 0))
    assert _domains(t, cloned.read(PRE_FILTER_STATE_KEY), 0) == {"zone1": 1}
    assert _domains(t, s, 0) == {"zone1": 0}
    assert pl.pre_filter_extensions() is pl


def test_remove_pod_then_filter_sees_the_new_minimum() -> None:
    # "pods spread across 2/1, removing a pod from node-a lets node-a pass again"
    t = table_of(zn("node-a", "zone1"), zn("node-x", "zone2"),
                 pods=[on("a1", "node-a"), on("a2", "node-a"), on("x1", "node-x")])
    p = spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO))
    pl = plugin_for(t)
    state = CycleState()
    pl.pre_filter(state, p, t)
    row_a = t.row_of("node-a") or 0
    assert pl.filter(state, p, t.node_info(row_a)).code == U
    victim = t.pods[row_a][next(iter(t.pods[row_a]))]
    pl.remove_pod(state, p, victim, t.node_info(row_a))
    assert pl.filter(state, p, t.node_info(row_a)).is_success


# -- TestPodTopologySpreadScore ---------------------------------------------------------------------


def mk_host(name: str, **labels: str) -> dict[str, Any]:
    n = mk_node(name, **labels)
    n["metadata"]["labels"][HOST] = name
    return n


def scores(nodes: list[dict[str, Any]], failed: list[dict[str, Any]], existing: list[dict[str, Any]], p: PodInfo,
           args: PodTopologySpreadArgs | None = None,
           objects: dict[str, dict[str, dict[str, Any]]] | None = None) -> dict[str, int]:
    t = table_of(*nodes, *failed, pods=existing)
    pl = plugin_for(t, args, objects)
    state = CycleState()
    rows = np.array([t.row_of(n["metadata"]["name"]) for n in nodes], dtype=np.intp)
    st = pl.pre_score(state, p, t, rows)
    assert st.is_success, st
    out = pl.score_batch(state, p, t, rows)
    assert not isinstance(out, type(st))
    assert isinstance(out, np.ndarray)
    assert pl.normalize_score(state, p, t, rows, out).is_success
    return {t.names[r]: int(s) for r, s in zip(rows, out, strict=True)}


def foo_pods(**per_node: int) -> list[dict[str, Any]]:
    out = []
    for n, k in per_node.items():
        for i in range(k):
            out.append(on(f"p-{n}{i}", n.replace("_", "-")))
    return out


SCORE: list[tuple[str, PodInfo, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]] = [
    ("one constraint on node, no existing pods", spod("p", {"foo": ""}, tsc(1, HOST, "ScheduleAnyway", FOO)),
     [mk_host("node-a"), mk_host("node-b")], [], [], {"node-a": 100, "node-b": 100}),
    ("one constraint on node, only one node is candidate", spod("p", {"foo": ""}, tsc(1, HOST, "ScheduleAnyway", FOO)),
     [mk_host("node-a")], [mk_host("node-b")], foo_pods(node_a=2, node_b=1), {"node-a": 100}),
    ("one constraint on node, all nodes have the same number of matching pods",
     spod("p", {"foo": ""}, tsc(1, HOST, "ScheduleAnyway", FOO)), [mk_host("node-a"), mk_host("node-b")], [],
     foo_pods(node_a=1, node_b=1), {"node-a": 100, "node-b": 100}),
    ("one constraint on node, all 4 nodes are candidates", spod("p", {"foo": ""}, tsc(1, HOST, "ScheduleAnyway", FOO)),
     [mk_host("node-a"), mk_host("node-b"), mk_host("node-c"), mk_host("node-d")], [],
     foo_pods(node_a=2, node_b=1, node_d=3), {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
    ("one constraint on node, null selector", spod("p", {"foo": ""}, tsc(1, HOST, "ScheduleAnyway", None)),
     [mk_host("node-a"), mk_host("node-b"), mk_host("node-c"), mk_host("node-d")], [],
     foo_pods(node_a=2, node_b=1, node_d=3), {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2",
     spod("p", {"foo": ""}, tsc(2, HOST, "ScheduleAnyway", FOO)),
     [mk_host("node-a"), mk_host("node-b"), mk_host("node-c"), mk_host("node-d")], [],
     foo_pods(node_a=2, node_b=1, node_d=3), {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=3",
     spod("p", {"foo": ""}, tsc(3, HOST, "ScheduleAnyway", FOO)),
     [mk_host("node-a"), mk_host("node-b"), mk_host("node-c"), mk_host("node-d")], [],
     foo_pods(node_a=4, node_b=3, node_c=2, node_d=1), {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
    ("one constraint on node, 3 out of 4 nodes are candidates",
     spod("p", {"foo": ""}, tsc(1, HOST, "ScheduleAnyway", FOO)),
     [mk_host("node-a"), mk_host("node-b"), mk_host("node-x")], [mk_host("node-y")],
     foo_pods(node_a=4, node_b=2, node_x=1, node_y=3), {"node-a": 33, "node-b": 83, "node-x": 100}),
    ("one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
     spod("p", {"foo": ""}, tsc(1, HOST, "ScheduleAnyway", FOO)),
     [mk_host("node-a"), mk_node("node-b", n="node-b"), mk_host("node-x")], [mk_host("node-y")],
     foo_pods(node_a=4, node_b=2, node_x=1, node_y=3), {"node-a": 16, "node-b": 0, "node-x": 100}),
    ("one constraint on zone, 3 out of 4 nodes are candidates",
     spod("p", {"foo": ""}, tsc(1, "zone", "ScheduleAnyway", FOO)),
     [mk_host("node-a", zone="zone1"), mk_host("node-b", zone="zone1"), mk_host("node-x", zone="zone2")],
     [mk_host("node-y", zone="zone2")],
     foo_pods(node_a=4, node_b=2, node_x=1, node_y=3), {"node-a": 75, "node-b": 75, "node-x": 100}),
]


@pytest.mark.parametrize(("name", "p", "nodes", "failed", "existing", "want"), SCORE, ids=[c[0] for c in SCORE])
def test_pod_topology_spread_score(name: str, p: PodInfo, nodes: list[dict[str, Any]], failed: list[dict[str, Any]],
                                   existing: list[dict[str, Any]], want: dict[str, int]) -> None:
    assert scores(nodes, failed, existing, p) == want


def test_score_system_defaulting_nodes_dont_have_zone_pods_match_service() -> None:
    # "system defaulting, nodes don't have zone, pods match service"
    svc = {"default/s": {"metadata": {"name": "s"}, "spec": {"selector": {"foo": ""}}}}
    got = scores([mk_host("node-a"), mk_host("node-b"), mk_host("node-c"), mk_host("node-d")], [],
                 foo_pods(node_a=4, node_b=3, node_c=2, node_d=1), spod("p", {"foo": ""}),
                 objects={"Service": svc})
    assert got == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_score_skip_without_soft_constraints_and_without_matching_service() -> None:
    t = table_of(mk_host("node-a"))
    pl = plugin_for(t)
    st = pl.pre_score(CycleState(), spod("p", {"foo": ""}), t, t.alive_rows())
    assert st.code == Code.SKIP
    st = pl.pre_score(CycleState(), spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO)), t, t.alive_rows())
    assert st.code == Code.SKIP


def test_score_two_constraints_on_zone_and_node_2_out_of_4_candidates() -> None:
    # "two Constraints on zone and node, 2 out of 4 nodes are candidates": spread 2/~1~/2/~4~
    got = scores([mk_host("node-a", zone="zone1"), mk_host("node-x", zone="zone2")],
                 [mk_host("node-b", zone="zone1"), mk_host("node-y", zone="zone2")],
                 foo_pods(node_a=2, node_b=1, node_x=2, node_y=4),
                 spod("p", {"foo": ""}, tsc(1, "zone", "ScheduleAnyway", FOO), tsc(1, HOST, "ScheduleAnyway", FOO)))
    assert got == {"node-a": 100, "node-x": 63}


def test_pods_written_alike_with_match_label_keys_keep_their_own_selector() -> None:
    """Pods written alike share their parsed constraints, except through matchLabelKeys, which read
    each pod's own labels: the same constraint judged for bar=a and bar=b pods gives each its own
    verdicts, in either order."""
    t = table_of(zn("node-a", "zone1"), zn("node-x", "zone2"),
                 pods=[on("p-a1", "node-a", {"foo": "", "bar": "a"}), on("p-x1", "node-x", {"foo": "", "bar": "b"}),
                       on("p-x2", "node-x", {"foo": "", "bar": "b"})])
    want = {"a": {"node-a": U, "node-x": S}, "b": {"node-a": S, "node-x": U}}
    for order in ("ab", "ba"):
        for bar in order:
            p = spod(f"p-{bar}", {"foo": "", "bar": bar}, tsc(1, "zone", "DoNotSchedule", FOO, matchLabelKeys=["bar"]))
            assert filter_codes(t, p) == want[bar]


def test_relabelled_node_is_seen_by_the_next_cycle() -> None:
    """The nodes' topology labels are read once per node change (not per pod): a node moved to
    another zone, or losing its zone label, changes the next cycle's scores and verdicts exactly as
    on a table built with the new labels."""
    nodes = [mk_host("node-a", zone="zone1"), mk_host("node-b", zone="zone1"), mk_host("node-x", zone="zone2")]
    existing = foo_pods(node_a=1, node_b=3, node_x=1)
    soft = spod("p", {"foo": ""}, tsc(1, "zone", "ScheduleAnyway", FOO))
    hard = spod("p", {"foo": ""}, tsc(1, "zone", "DoNotSchedule", FOO))
    t = table_of(*nodes, pods=existing)
    pl = plugin_for(t)

    def run(table: NodeTable, plugin: PodTopologySpread) -> tuple[list[int], list[int]]:
        rows = table.alive_rows()
        state = CycleState()
        assert plugin.pre_score(state, soft, table, rows).is_success
        out = plugin.score_batch(state, soft, table, rows)
        assert isinstance(out, np.ndarray)
        assert plugin.normalize_score(state, soft, table, rows, out).is_success
        state = CycleState()
        assert plugin.pre_filter(state, hard, table)[1].is_success
        return out.tolist(), plugin.filter_batch(state, hard, table, rows).codes.tolist()

    before = run(t, pl)
    for moved in (mk_host("node-b", zone="zone2"), mk_host("node-b")):
        t.upsert_node(moved)
        fresh = table_of(*nodes[:1], moved, *nodes[2:], pods=existing)
        after = run(t, pl)
        assert after == run(fresh, plugin_for(fresh))
        assert after != before
        before = after


# -- args -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "msg"), [
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].topologyKey: Required value: can not be empty"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]},
     "defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]},
     'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: '
     '"DoNotSchedule", "ScheduleAnyway"'),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     'defaultConstraints[1]: Duplicate value: "{zone, DoNotSchedule}"'),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]},
     "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for "
     "each pod"),
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    ({"defaultingType": "Other"}, 'defaultingType: Unsupported value: "Other": supported values: "System", "List"'),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "-bad", "whenUnsatisfiable": "DoNotSchedule"}]},
     'defaultConstraints[0].topologyKey: Invalid value: "-bad": name part must consist of'),
])
def test_args_validation(raw: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValidationError) as e:
        PodTopologySpreadArgs.model_validate(raw)
    assert msg in str(e.value)


def test_args_several_errors_aggregate() -> None:
    with pytest.raises(ValidationError) as e:
        PodTopologySpreadArgs.model_validate({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": -1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]})
    assert ("[defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf), "
            "defaultConstraints[0].topologyKey: Required value: can not be empty]") in str(e.value)


def test_args_defaults() -> None:
    a = PodTopologySpreadArgs.model_validate({})
    assert a.defaulting_type == "System" and a.default_constraints == []
    assert PodTopologySpreadArgs.model_validate({"defaultingType": ""}).defaulting_type == "System"
    pl = plugin_for(table_of(), a)
    assert pl.system_defaulted
    assert [(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in pl.default_constraints] == [
        (HOST, 3, "ScheduleAnyway"), ("topology.kubernetes.io/zone", 5, "ScheduleAnyway")]
    listed = PodTopologySpreadArgs.model_validate({"defaultingType": "List"})
    assert plugin_for(table_of(), listed).default_constraints == []


# -- registration, events, object kinds -------------------------------------------------------------


def test_registered_with_object_kinds_and_events() -> None:
    assert builtin_registry().get("PodTopologySpread") is PodTopologySpread
    kinds = {k.kind: (k.group, k.version, k.resource) for k in PodTopologySpread.object_kinds}
    assert kinds == {"Service": ("", "v1", "services"), "ReplicationController": ("", "v1", "replicationcontrollers"),
                     "ReplicaSet": ("apps", "v1", "replicasets"), "StatefulSet": ("apps", "v1", "statefulsets")}
    events = plugin_for(table_of()).events_to_register()

    def matched(ev: ClusterEvent) -> bool:
        return any(r.matches(ev) for r in events)

    for ev in (ClusterEvent(POD, ActionType.ADD), ClusterEvent(POD, ActionType.DELETE),
               ClusterEvent(POD, ActionType.UPDATE_POD_LABEL), ClusterEvent(NODE, ActionType.ADD),
               ClusterEvent(NODE, ActionType.DELETE), ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL),
               ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT)):
        assert matched(ev), ev
    assert not matched(ClusterEvent(NODE, ActionType.UPDATE_NODE_ALLOCATABLE))
    assert not matched(ClusterEvent(POD, ActionType.UPDATE_POD_SCALE_DOWN))
