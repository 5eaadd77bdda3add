"""InterPodAffinity: cases ported from upstream's interpodaffinity filtering_test.go
(TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes, TestPreFilterDisabled,
TestPreFilterStateAddRemovePod, TestGetTPMapMatchingIncomingAffinityAntiAffinity) and
scoring_test.go (TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight),
each named after its upstream case, plus args validation, events and the Skip paths."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.plugin import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFF,
)
from kubesched.plugins.interpodaffinity.plugin import (
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
)
from kubesched.plugins.interpodaffinity.plugin import (
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
)
from kubesched.plugins.interpodaffinity.plugin import (
    PRE_FILTER_STATE_KEY,
    PreFilterState,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable
from kubesched.testing import node, pod, table_of

NAMESPACES: dict[str, dict[str, Any]] = {
    name: {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}}
    for name, team in (
        ("subteam1.team1", "team1"),
        ("subteam2.team1", "team1"),
        ("subteam1.team2", "team2"),
        ("subteam2.team2", "team2"),
    )
}

# -- builders (upstream st.MakePod / st.MakeNode) ---------------------------------------------------


def mk_node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A node with exactly ``labels`` (no implicit hostname label, as upstream's test nodes)."""
    n = node(name)
    n["metadata"]["labels"] = dict(labels or {})
    return n


def term(key: str, op: str, topo: str, values: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": key, "operator": op}
    if values is not None:
        expr["values"] = values
    return {"labelSelector": {"matchExpressions": [expr]}, "topologyKey": topo, **extra}


def exprs(topo: str, *e: tuple[str, str, list[str] | None], **extra: Any) -> dict[str, Any]:
    m = [{"key": k, "operator": op, **({"values": v} if v is not None else {})} for k, op, v in e]
    return {"labelSelector": {"matchExpressions": m}, "topologyKey": topo, **extra}


def weighted(w: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": w, "podAffinityTerm": t}


def mkpod(
    name: str = "p",
    labels: dict[str, str] | None = None,
    node_name: str = "",
    ns: str = "default",
    aff: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
    pref_aff: list[dict[str, Any]] | None = None,
    pref_anti: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if aff is not None or pref_aff is not None:
        affinity["podAffinity"] = {}
        if aff is not None:
            affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = aff
        if pref_aff is not None:
            affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = pref_aff
    if anti is not None or pref_anti is not None:
        affinity["podAntiAffinity"] = {}
        if anti is not None:
            affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = anti
        if pref_anti is not None:
            affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = pref_anti
    spec: dict[str, Any] = {"affinity": affinity} if affinity else {}
    return pod(name, labels=labels or {}, node_name=node_name, namespace=ns, **spec)


def plugin_for(
    table: NodeTable, args: dict[str, Any] | None = None, namespaces: dict[str, dict[str, Any]] | None = None
) -> InterPodAffinity:
    ns = NAMESPACES if namespaces is None else namespaces
    h = Handle(
        table, FakeClock(), WaitingPods(), profile_name="p", objects=lambda kind: ns if kind == "Namespace" else {}
    )
    return InterPodAffinity(InterPodAffinityArgs.model_validate(args or {}), h)


def filter_all(
    plugin: InterPodAffinity, state: CycleState, p: PodInfo, table: NodeTable, names: list[str]
) -> list[tuple[Code, tuple[str, ...]] | None]:
    out: list[tuple[Code, tuple[str, ...]] | None] = []
    for n in names:
        row = table.row_of(n)
        assert row is not None
        st = plugin.filter(state, p, NodeInfo(table, row))
        out.append(None if st.is_success else (st.code, st.reasons))
    # the batch form over every node agrees with the per-node form
    rows = np.array([table.row_of(n) for n in names], dtype=np.intp)
    v = plugin.filter_batch(state, p, table, rows)
    batch = [None if c == 0 else (v.statuses[c - 1].code, v.statuses[c - 1].reasons) for c in v.codes]
    assert batch == out
    return out


U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

# -- TestRequiredAffinitySingleNode ---------------------------------------------------------------------

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = {"region": "r1", "zone": "z11"}


def _existing() -> dict[str, Any]:
    return mkpod("existing", labels=POD_LABEL, node_name="node1")


SINGLE_NODE_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], Any, Any]] = [
    (
        "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
        mkpod(),
        [],
        Code.SKIP,
        None,
    ),
    (
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",  # noqa: E501
        mkpod(labels=POD_LABEL2, aff=[term("service", "In", "region", ["securityscan", "value2"])]),
        [_existing()],
        None,
        None,
    ),
    (
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",  # noqa: E501
        mkpod(labels=POD_LABEL2, aff=[term("service", "NotIn", "region", ["securityscan3", "value3"])]),
        [_existing()],
        None,
        None,
    ),
    (
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        mkpod(
            labels=POD_LABEL2, aff=[term("service", "In", "", ["securityscan", "value2"], namespaces=["DiffNameSpace"])]
        ),
        [mkpod("e", ns="ns", labels=POD_LABEL, node_name="node1")],
        None,
        (UU, (AFF,)),
    ),
    (
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        mkpod(labels=POD_LABEL, aff=[term("service", "In", "", ["antivirusscan", "value2"])]),
        [_existing()],
        None,
        (UU, (AFF,)),
    ),
    (
        "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution ",  # noqa: E501
        mkpod(
            labels=POD_LABEL2,
            aff=[
                exprs("region", ("service", "Exists", None), ("wrongkey", "DoesNotExist", None)),
                exprs("region", ("service", "In", ["securityscan"]), ("service", "NotIn", ["WrongValue"])),
            ],
        ),
        [_existing()],
        None,
        None,
    ),
    (
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",  # noqa: E501
        mkpod(
            labels=POD_LABEL2,
            aff=[
                exprs("region", ("service", "Exists", None), ("wrongkey", "DoesNotExist", None)),
                exprs("region", ("service", "In", ["securityscan2"]), ("service", "NotIn", ["WrongValue"])),
            ],
        ),
        [_existing()],
        None,
        (UU, (AFF,)),
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        mkpod(
            labels=POD_LABEL2,
            aff=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "node", ["antivirusscan", "value2"])],
        ),
        [_existing()],
        None,
        None,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        mkpod(
            labels=POD_LABEL2,
            aff=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "node", ["antivirusscan", "value2"])],
        ),
        [
            mkpod(
                "e",
                labels=POD_LABEL,
                node_name="node1",
                anti=[term("service", "In", "node", ["antivirusscan", "value2"])],
            )
        ],
        None,
        None,
    ),
    (
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        mkpod(
            labels=POD_LABEL2,
            aff=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "zone", ["securityscan", "value2"])],
        ),
        [_existing()],
        None,
        (U, (ANTI,)),
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",  # noqa: E501
        mkpod(
            labels=POD_LABEL,
            aff=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "node", ["antivirusscan", "value2"])],
        ),
        [
            mkpod(
                "e",
                labels=POD_LABEL,
                node_name="node1",
                anti=[term("service", "In", "zone", ["securityscan", "value2"])],
            )
        ],
        None,
        (U, (EXISTING,)),
    ),
    (
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        mkpod(labels=POD_LABEL, aff=[term("service", "NotIn", "region", ["securityscan", "value2"])]),
        [mkpod("e", labels=POD_LABEL, node_name="node2")],
        None,
        (UU, (AFF,)),
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",  # noqa: E501
        mkpod(labels=POD_LABEL),
        [
            mkpod(
                "e",
                labels=POD_LABEL,
                node_name="node1",
                anti=[term("service", "In", "zone", ["securityscan", "value2"])],
            )
        ],
        None,
        (U, (EXISTING,)),
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",  # noqa: E501
        mkpod(labels=POD_LABEL),
        [
            mkpod(
                "e",
                labels=POD_LABEL,
                node_name="node1",
                anti=[term("service", "NotIn", "zone", ["securityscan", "value2"])],
            )
        ],
        Code.SKIP,
        None,
    ),
    (
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",  # noqa: E501
        mkpod(labels=POD_LABEL, anti=[term("service", "Exists", "region"), term("security", "Exists", "region")]),
        [mkpod("e", labels=POD_LABEL2, node_name="node1", anti=[term("security", "Exists", "zone")])],
        None,
        (U, (ANTI,)),
    ),
    (
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
        mkpod(labels=POD_LABEL, anti=[term("service", "Exists", "zone"), term("security", "Exists", "zone")]),
        [mkpod("e", labels=POD_LABEL2, node_name="node1", anti=[term("security", "Exists", "zone")])],
        None,
        (U, (ANTI,)),
    ),
    (
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
        mkpod(labels=POD_LABEL2, anti=[term("security", "Exists", "zone")]),
        [
            mkpod(
                "e",
                labels=POD_LABEL,
                node_name="node1",
                anti=[term("service", "Exists", "zone"), term("security", "Exists", "zone")],
            )
        ],
        None,
        (U, (EXISTING,)),
    ),
    (
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
        mkpod(labels={"abc": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")]),
        [
            mkpod(
                "e",
                labels={"def": "", "xyz": ""},
                node_name="node1",
                anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")],
            )
        ],
        None,
        (U, (ANTI,)),
    ),
    (
        "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
        mkpod(labels={"def": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")]),
        [
            mkpod(
                "e",
                labels={"abc": "", "xyz": ""},
                node_name="node1",
                anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")],
            )
        ],
        None,
        (U, (ANTI,)),
    ),
    (
        "affinity with NamespaceSelector",
        mkpod(
            labels=POD_LABEL2,
            aff=[
                term(
                    "service",
                    "In",
                    "region",
                    ["securityscan", "value2"],
                    namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]},
                )
            ],
        ),
        [mkpod("e", ns="subteam1.team1", labels=POD_LABEL, node_name="node1")],
        None,
        None,
    ),
    (
        "affinity with non-matching NamespaceSelector",
        mkpod(
            labels=POD_LABEL2,
            aff=[
                term(
                    "service",
                    "In",
                    "region",
                    ["securityscan", "value2"],
                    namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]},
                )
            ],
        ),
        [mkpod("e", ns="subteam1.team2", labels=POD_LABEL, node_name="node1")],
        None,
        (UU, (AFF,)),
    ),
    (
        "anti-affinity with matching NamespaceSelector",
        mkpod(
            ns="subteam1.team1",
            labels=POD_LABEL2,
            anti=[
                term(
                    "service",
                    "In",
                    "zone",
                    ["securityscan", "value2"],
                    namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]},
                )
            ],
        ),
        [mkpod("e", ns="subteam2.team1", labels=POD_LABEL, node_name="node1")],
        None,
        (U, (ANTI,)),
    ),
    (
        "anti-affinity with matching all NamespaceSelector",
        mkpod(
            ns="subteam1.team1",
            labels=POD_LABEL2,
            anti=[term("service", "In", "zone", ["securityscan", "value2"], namespaceSelector={})],
        ),
        [mkpod("e", ns="subteam2.team1", labels=POD_LABEL, node_name="node1")],
        None,
        (U, (ANTI,)),
    ),
    (
        "anti-affinity with non-matching NamespaceSelector",
        mkpod(
            ns="subteam1.team1",
            labels=POD_LABEL2,
            anti=[
                term(
                    "service",
                    "In",
                    "zone",
                    ["securityscan", "value2"],
                    namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]},
                )
            ],
        ),
        [mkpod("e", ns="subteam1.team2", labels=POD_LABEL, node_name="node1")],
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "incoming", "pods", "want_pre", "want_filter"),
    SINGLE_NODE_CASES,
    ids=[c[0][:80] for c in SINGLE_NODE_CASES],
)
def test_required_affinity_single_node(
    name: str, incoming: dict[str, Any], pods: list[dict[str, Any]], want_pre: Code | None, want_filter: Any
) -> None:
    table = (
        table_of(mk_node("node1", NODE1), mk_node("node2", {}), pods=pods)
        if any(p["spec"].get("nodeName") == "node2" for p in pods)
        else table_of(mk_node("node1", NODE1), pods=pods)
    )
    plugin = plugin_for(table)
    state = CycleState()
    p = PodInfo.from_raw(incoming)
    _, st = plugin.pre_filter(state, p, table)
    assert st.code == (want_pre if want_pre is not None else Code.SUCCESS), st
    if not st.is_success:
        return
    assert filter_all(plugin, state, p, table, ["node1"]) == [want_filter]


@pytest.mark.parametrize("which", ["requiredAffinityTerms", "requiredAntiAffinityTerms"])
def test_required_affinity_single_node_invalid_label_syntax_fails_prefilter(which: str) -> None:
    """Upstream cases "PodAffinity fails PreFilter with an invalid affinity label syntax" (and the
    anti-affinity one): UnschedulableAndUnresolvable ``parsing pod: <category>: <selector error>``."""
    bad = [term("service", "In", "region", ["{{.bad-value.}}"]), term("service", "In", "node", ["antivirusscan"])]
    p = PodInfo.from_raw(
        mkpod(labels=POD_LABEL, aff=bad) if which == "requiredAffinityTerms" else mkpod(labels=POD_LABEL, anti=bad)
    )
    table = table_of(mk_node("node1", NODE1))
    _, st = plugin_for(table).pre_filter(CycleState(), p, table)
    assert st.code == UU
    assert st.reasons[0].startswith(f"parsing pod: {which}: ")
    assert 'Invalid value: "{{.bad-value.}}"' in st.reasons[0]


# -- TestRequiredAffinityMultipleNodes --------------------------------------------------------------------

CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def _h(name: str, **labels: str) -> dict[str, Any]:
    return mk_node(name, {**labels, "hostname": name})


MULTI_NODE_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], Any, list[Any]]] = [
    (
        "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",  # noqa: E501
        mkpod(aff=[term("foo", "In", "region", ["bar"])]),
        [mkpod("p1", node_name="node1", labels={"foo": "bar"})],
        [mk_node("node1", CHINA), mk_node("node2", CHINA_AZ1), mk_node("node3", INDIA)],
        None,
        [None, None, (UU, (AFF,))],
    ),
    (
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",  # noqa: E501
        mkpod(
            labels={"foo": "bar", "service": "securityscan"},
            aff=[term("foo", "In", "zone", ["bar"]), term("service", "In", "zone", ["securityscan"])],
        ),
        [mkpod("p1", node_name="nodeA", labels={"foo": "bar"})],
        [mk_node("nodeA", {"zone": "az1", "hostname": "h1"}), mk_node("nodeB", {"zone": "az2", "hostname": "h2"})],
        None,
        [None, None],
    ),
    (
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        mkpod(
            labels={"foo": "bar", "service": "securityscan"},
            aff=[term("foo", "In", "zone", ["bar"]), term("service", "In", "zone", ["securityscan"])],
        ),
        [mkpod("p1", node_name="nodeA", labels={"foo": "bar"})],
        [
            mk_node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
            mk_node("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
        ],
        None,
        [(UU, (AFF,)), (UU, (AFF,))],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",  # noqa: E501
        mkpod(anti=[term("foo", "In", "region", ["abc"])]),
        [mkpod("e", node_name="nodeA", labels={"foo": "abc"})],
        [_h("nodeA", region="r1"), _h("nodeB", region="r1")],
        None,
        [(U, (ANTI,)), (U, (ANTI,))],
    ),
    (
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
        mkpod(anti=[term("foo", "In", "region", ["abc"]), term("service", "In", "zone", ["securityscan"])]),
        [mkpod("e", node_name="nodeA", labels={"foo": "abc", "service": "securityscan"})],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(U, (ANTI,)), (U, (ANTI,))],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",  # noqa: E501
        mkpod(anti=[term("foo", "In", "region", ["abc"])]),
        [mkpod("e", node_name="nodeA", labels={"foo": "abc"})],
        [mk_node("nodeA", CHINA), mk_node("nodeB", CHINA_AZ1), mk_node("nodeC", INDIA)],
        None,
        [(U, (ANTI,)), (U, (ANTI,)), None],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",  # noqa: E501
        mkpod(ns="NS1", labels={"foo": "123"}, anti=[term("foo", "In", "region", ["bar"])]),
        [
            mkpod("e1", node_name="nodeA", ns="NS1", labels={"foo": "bar"}),
            mkpod("e2", node_name="nodeC", ns="NS2", anti=[term("foo", "In", "region", ["123"])]),
        ],
        [mk_node("nodeA", CHINA), mk_node("nodeB", CHINA_AZ1), mk_node("nodeC", INDIA)],
        None,
        [(U, (ANTI,)), (U, (ANTI,)), None],
    ),
    (
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",  # noqa: E501
        mkpod(labels={"foo": ""}),
        [mkpod("e", node_name="nodeA", anti=[term("foo", "Exists", "invalid-node-label")])],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z1")],
        Code.SKIP,
        [None, None],
    ),
    (
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
        mkpod(node_name="", anti=[term("foo", "Exists", "invalid-node-label")]),
        [mkpod("e", node_name="nodeA", labels={"foo": ""})],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z1")],
        None,
        [None, None],
    ),
    (
        "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's terms on all nodes",  # noqa: E501
        mkpod(labels={"foo": "", "bar": ""}),
        [
            mkpod("e1", node_name="nodeA", anti=[term("foo", "Exists", "zone")]),
            mkpod("e2", node_name="nodeA", anti=[term("bar", "Exists", "region")]),
        ],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(U, (EXISTING,)), (U, (EXISTING,))],
    ),
    (
        "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one anti-affinity rule of existingPod",  # noqa: E501
        mkpod(anti=[term("foo", "Exists", "zone"), term("bar", "Exists", "region")]),
        [mkpod("e1", node_name="nodeA", labels={"foo": ""}), mkpod("e2", node_name="nodeB", labels={"bar": ""})],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(U, (ANTI,)), (U, (ANTI,))],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",  # noqa: E501
        mkpod(labels={"foo": "", "bar": ""}),
        [
            mkpod(
                "e",
                node_name="nodeA",
                anti=[term("foo", "Exists", "invalid-node-label"), term("bar", "Exists", "zone")],
            )
        ],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(U, (EXISTING,)), None],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",  # noqa: E501
        mkpod(anti=[term("foo", "Exists", "invalid-node-label"), term("bar", "Exists", "zone")]),
        [mkpod("podA", node_name="nodeA", labels={"foo": "", "bar": ""})],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(U, (ANTI,)), None],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",  # noqa: E501
        mkpod(labels={"foo": "", "bar": ""}),
        [mkpod("e", node_name="nodeA", anti=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")])],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(U, (EXISTING,)), (U, (EXISTING,))],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",  # noqa: E501
        mkpod(anti=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")]),
        [mkpod("e", node_name="nodeA", labels={"foo": "", "bar": ""})],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(U, (ANTI,)), (U, (ANTI,))],
    ),
    (
        "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches incoming pod, so incoming pod can only be scheduled to nodeC",  # noqa: E501
        mkpod(labels={"foo": "", "bar": ""}),
        [
            mkpod("e1", node_name="nodeA", anti=[term("foo", "Exists", "zone"), term("labelA", "Exists", "zone")]),
            mkpod("e2", node_name="nodeB", anti=[term("bar", "Exists", "zone"), term("labelB", "Exists", "zone")]),
        ],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2"), _h("nodeC", region="r1", zone="z3")],
        None,
        [(U, (EXISTING,)), (U, (EXISTING,)), None],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",  # noqa: E501
        mkpod(aff=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")]),
        [mkpod("pod1", labels={"foo": "", "bar": ""}, node_name="nodeA")],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z1")],
        None,
        [None, None],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match, and the match logic should be satisfied on the same pod",  # noqa: E501
        mkpod(aff=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")]),
        [mkpod("pod1", node_name="nodeA", labels={"foo": ""}), mkpod("pod2", node_name="nodeB", labels={"bar": ""})],
        [_h("nodeA", region="r1", zone="z1"), _h("nodeB", region="r1", zone="z2")],
        None,
        [(UU, (AFF,)), (UU, (AFF,))],
    ),
]


@pytest.mark.parametrize(
    ("name", "incoming", "pods", "nodes", "want_pre", "want"),
    MULTI_NODE_CASES,
    ids=[c[0][:80] for c in MULTI_NODE_CASES],
)
def test_required_affinity_multiple_nodes(
    name: str,
    incoming: dict[str, Any],
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    want_pre: Code | None,
    want: list[Any],
) -> None:
    table = table_of(*nodes, pods=pods)
    ns = {"NS1": {"metadata": {"name": "NS1"}}}
    plugin = plugin_for(table, namespaces=ns)
    state = CycleState()
    p = PodInfo.from_raw(incoming)
    _, st = plugin.pre_filter(state, p, table)
    assert st.code == (want_pre if want_pre is not None else Code.SUCCESS), st
    if st.code == Code.SKIP:
        return
    names = [n["metadata"]["name"] for n in nodes]
    assert filter_all(plugin, state, p, table, names) == want


def test_pre_filter_disabled() -> None:
    """TestPreFilterDisabled: Filter without PreFilter state is an Error."""
    table = table_of(mk_node("n"))
    st = plugin_for(table).filter(CycleState(), PodInfo.from_raw(mkpod()), NodeInfo(table, 0))
    assert st.code == Code.ERROR
    assert st.reasons == ('error reading "PreFilterInterPodAffinity" from cycleState: not found',)


# -- TestPreFilterStateAddRemovePod -------------------------------------------------------------------------

ANTI_FOO_BAR = [term("foo", "In", "region", ["bar"])]
ANTI_COMPLEX = [
    term("foo", "In", "region", ["bar", "buzz"]),
    term("service", "NotIn", "zone", ["bar", "security", "test"]),
]
AFF_COMPLEX = ANTI_COMPLEX
ADD_REMOVE_NODES = [
    mk_node("nodeA", {"region": "r1", "zone": "z11"}),
    mk_node("nodeB", {"region": "r1", "zone": "z12"}),
    mk_node("nodeC", {"region": "r2", "zone": "z21"}),
]
SEL1 = {"foo": "bar"}

ADD_REMOVE_CASES: list[
    tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any], dict[Any, int], dict[Any, int]]
] = [
    (
        "preFilterState anti-affinity terms are updated correctly after adding and removing a pod",
        mkpod("pending", labels=SEL1, anti=ANTI_FOO_BAR),
        [mkpod("p1", labels=SEL1, node_name="nodeA"), mkpod("p2", node_name="nodeC", anti=ANTI_FOO_BAR)],
        mkpod("addedPod", labels=SEL1, node_name="nodeB", anti=ANTI_FOO_BAR),
        {("region", "r1"): 2},
        {},
    ),
    (
        "preFilterState anti-affinity terms are updated correctly after adding and removing a pod (complex)",
        mkpod("pending", labels=SEL1, anti=ANTI_COMPLEX),
        [mkpod("p1", labels=SEL1, node_name="nodeA"), mkpod("p2", node_name="nodeC", anti=ANTI_FOO_BAR)],
        mkpod("addedPod", labels=SEL1, node_name="nodeA", anti=ANTI_COMPLEX),
        {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
        {},
    ),
    (
        "preFilterState matching pod affinity and anti-affinity are updated correctly after adding and removing a pod",
        mkpod("pending", labels=SEL1, aff=AFF_COMPLEX),
        [
            mkpod("p1", labels=SEL1, node_name="nodeA"),
            mkpod("p2", node_name="nodeC", anti=ANTI_FOO_BAR, aff=AFF_COMPLEX),
        ],
        mkpod("addedPod", labels=SEL1, node_name="nodeA", anti=ANTI_COMPLEX),
        {},
        {("region", "r1"): 2, ("zone", "z11"): 2},
    ),
]


@pytest.mark.parametrize(
    ("name", "pending", "existing", "added", "want_anti", "want_aff"),
    ADD_REMOVE_CASES,
    ids=[c[0] for c in ADD_REMOVE_CASES],
)
def test_pre_filter_state_add_remove_pod(
    name: str,
    pending: dict[str, Any],
    existing: list[dict[str, Any]],
    added: dict[str, Any],
    want_anti: dict[Any, int],
    want_aff: dict[Any, int],
) -> None:
    p = PodInfo.from_raw(pending)

    def state_for(pods: list[dict[str, Any]]) -> tuple[InterPodAffinity, CycleState, PreFilterState, NodeTable]:
        table = table_of(*ADD_REMOVE_NODES, pods=pods)
        plugin = plugin_for(table, namespaces={})
        cs = CycleState()
        _, st = plugin.pre_filter(cs, p, table)
        assert st.is_success, st
        s = cs.read(PRE_FILTER_STATE_KEY)
        assert isinstance(s, PreFilterState)
        return plugin, cs, s, table

    _, _, all_state, all_table = state_for([*existing, added])
    plugin, cs, s, table = state_for(existing)
    original = s.clone().pairs(table)
    row = table.row_of(added["spec"]["nodeName"])
    assert row is not None
    assert plugin.add_pod(cs, p, PodInfo.from_raw(added), NodeInfo(table, row)).is_success
    got = s.pairs(table)
    assert got["antiAffinityCounts"] == want_anti
    assert got["affinityCounts"] == want_aff
    assert got == all_state.pairs(all_table)
    assert plugin.remove_pod(cs, p, PodInfo.from_raw(added), NodeInfo(table, row)).is_success
    assert s.pairs(table) == original


def test_pre_filter_state_clone_is_deep() -> None:
    """TestPreFilterStateClone: a clone is equal and independent."""
    table = table_of(*ADD_REMOVE_NODES, pods=[mkpod("p1", labels=SEL1, node_name="nodeA")])
    plugin = plugin_for(table)
    cs = CycleState()
    p = PodInfo.from_raw(mkpod("pending", labels=SEL1, anti=ANTI_FOO_BAR))
    plugin.pre_filter(cs, p, table)
    s = cs.read(PRE_FILTER_STATE_KEY)
    c = s.clone()
    assert c is not s and c.pairs(table) == s.pairs(table)
    plugin.add_pod(cs, p, PodInfo.from_raw(mkpod("x", labels=SEL1, node_name="nodeB")), NodeInfo(table, 1))
    assert c.pairs(table) != s.pairs(table)


# -- TestGetTPMapMatchingIncomingAffinityAntiAffinity ------------------------------------------------------


def _normal(*labels: str) -> dict[str, Any]:
    return mkpod("normal", node_name="nodeA", labels={lbl: "" for lbl in labels})


TPMAP_CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], dict[Any, int], dict[Any, int]]] = [
    ("nil test", [], mkpod("aaa-normal"), {}, {}),
    ("incoming pod without affinity/anti-affinity causes a no-op", [_normal("aaa")], mkpod("aaa-normal"), {}, {}),
    (
        "no pod has label that violates incoming pod's affinity and anti-affinity",
        [_normal("bbb")],
        mkpod("aaa-anti", aff=[term("aaa", "Exists", "hostname")], anti=[term("aaa", "Exists", "hostname")]),
        {},
        {},
    ),
    (
        "existing pod matches incoming pod's affinity and anti-affinity - single term case",
        [_normal("aaa")],
        mkpod("affi-antiaffi", aff=[term("aaa", "Exists", "hostname")], anti=[term("aaa", "Exists", "hostname")]),
        {("hostname", "nodeA"): 1},
        {("hostname", "nodeA"): 1},
    ),
    (
        "existing pod matches incoming pod's affinity and anti-affinity - multiple terms case",
        [_normal("aaa", "bbb")],
        mkpod(
            "affi-antiaffi",
            aff=[term("aaa", "Exists", "hostname"), term("bbb", "Exists", "hostname")],
            anti=[term("aaa", "Exists", "hostname")],
        ),
        {("hostname", "nodeA"): 2},
        {("hostname", "nodeA"): 1},
    ),
    (
        "existing pod not match incoming pod's affinity but matches anti-affinity",
        [_normal("aaa")],
        mkpod(
            "affi-antiaffi",
            aff=[term("aaa", "Exists", "hostname"), term("bbb", "Exists", "hostname")],
            anti=[term("aaa", "Exists", "hostname"), term("bbb", "Exists", "hostname")],
        ),
        {},
        {("hostname", "nodeA"): 1},
    ),
    (
        "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 1",
        [_normal("aaa", "bbb")],
        mkpod(
            "anaffi-antiaffiti",
            aff=[term("aaa", "Exists", "hostname"), term("ccc", "Exists", "hostname")],
            anti=[term("aaa", "Exists", "hostname"), term("ccc", "Exists", "hostname")],
        ),
        {},
        {("hostname", "nodeA"): 1},
    ),
    (
        "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 2",
        [_normal("bbb")],
        mkpod(
            "affi-antiaffi",
            aff=[term("aaa", "Exists", "hostname"), term("bbb", "Exists", "hostname")],
            anti=[term("aaa", "Exists", "hostname"), term("bbb", "Exists", "hostname")],
        ),
        {},
        {("hostname", "nodeA"): 1},
    ),
]


@pytest.mark.parametrize(
    ("name", "pods", "incoming", "want_aff", "want_anti"), TPMAP_CASES, ids=[c[0] for c in TPMAP_CASES]
)
def test_get_tp_map_matching_incoming_affinity_anti_affinity(
    name: str, pods: list[dict[str, Any]], incoming: dict[str, Any], want_aff: dict[Any, int], want_anti: dict[Any, int]
) -> None:
    table = table_of(mk_node("nodeA", {"hostname": "nodeA"}), pods=pods)
    plugin = plugin_for(table)
    cs = CycleState()
    p = PodInfo.from_raw(incoming)
    _, st = plugin.pre_filter(cs, p, table)
    if st.code == Code.SKIP:
        assert want_aff == {} and want_anti == {}
        return
    got = cs.read(PRE_FILTER_STATE_KEY).pairs(table)
    assert got["affinityCounts"] == want_aff
    assert got["antiAffinityCounts"] == want_anti


# -- TestPreferredAffinity ----------------------------------------------------------------------------------

S1 = {"security": "S1"}
S2 = {"security": "S2"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
STAY_S1_REGION: dict[str, Any] = {"pref_aff": [weighted(5, term("security", "In", "region", ["S1"]))]}
STAY_S2_REGION: dict[str, Any] = {"pref_aff": [weighted(6, term("security", "In", "region", ["S2"]))]}
AFFINITY3: dict[str, Any] = {
    "pref_aff": [
        weighted(8, exprs("region", ("security", "NotIn", ["S1"]), ("security", "In", ["S2"]))),
        weighted(2, exprs("region", ("security", "Exists", None), ("wrongkey", "DoesNotExist", None))),
    ]
}
HARD_AFFINITY: dict[str, Any] = {
    "aff": [
        term("security", "In", "region", ["S1", "value2"]),
        exprs("region", ("security", "Exists", None), ("wrongkey", "DoesNotExist", None)),
    ]
}
AWAY_S1_AZ: dict[str, Any] = {"pref_anti": [weighted(5, term("security", "In", "az", ["S1"]))]}
AWAY_S2_AZ: dict[str, Any] = {"pref_anti": [weighted(5, term("security", "In", "az", ["S2"]))]}
STAY_S1_AWAY_S2: dict[str, Any] = {
    "pref_aff": [weighted(8, term("security", "In", "region", ["S1"]))],
    "pref_anti": [weighted(5, term("security", "In", "az", ["S2"]))],
}
_TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
AFF_NS_SELECTOR: dict[str, Any] = {
    "pref_aff": [
        weighted(5, term("security", "In", "region", ["S1"], namespaces=["subteam2.team2"], namespaceSelector=_TEAM1))
    ]
}
ANTI_NS_SELECTOR: dict[str, Any] = {
    "pref_anti": [
        weighted(5, term("security", "In", "region", ["S1"], namespaces=["subteam2.team2"], namespaceSelector=_TEAM1))
    ]
}

_ids = iter(range(10_000))


def on(node_name: str, labels: dict[str, str] | None = None, ns: str = "default", **aff: Any) -> dict[str, Any]:
    return mkpod(f"e{next(_ids)}", labels=labels, node_name=node_name, ns=ns, **aff)


PREFERRED_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], Any]] = [
    (
        "all nodes are same priority as Affinity is nil",
        mkpod(labels=S1),
        [],
        [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)],
        Code.SKIP,
    ),
    (
        "Affinity: pod that matches topology key & pods in nodes will get high score comparing to otherswhich doesn't match either pods in nodes or in topology key",  # noqa: E501
        mkpod(labels=S1, **STAY_S1_REGION),
        [on("node1", S1), on("node2", S2), on("node3", S1)],
        [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)],
        [100, 0, 0],
    ),
    (
        "All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score",  # noqa: E501
        mkpod(**STAY_S1_REGION),
        [on("node1", S1)],
        [mk_node("node1", CHINA), mk_node("node2", CHINA_AZ1), mk_node("node3", INDIA)],
        [100, 100, 0],
    ),
    (
        "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score",  # noqa: E501
        mkpod(labels=S1, **STAY_S2_REGION),
        [on("node1", S2), on("node1", S2), on("node2", S2), on("node3", S2), on("node4", S2), on("node5", S2)],
        [
            mk_node("node1", CHINA),
            mk_node("node2", INDIA),
            mk_node("node3", CHINA),
            mk_node("node4", CHINA),
            mk_node("node5", INDIA),
        ],
        [100, 0, 100, 100, 0],
    ),
    (
        "Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures ",  # noqa: E501
        mkpod(labels=S1, **AFFINITY3),
        [on("node1", S1), on("node2", S2), on("node3", S1)],
        [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)],
        [20, 100, 0],
    ),
    (
        "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",  # noqa: E501
        mkpod(labels=S2),
        [on("node1", S1, **STAY_S1_REGION), on("node2", S2, **STAY_S2_REGION)],
        [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)],
        [0, 100, 0],
    ),
    (
        "Affinity symmetry with namespace selector",
        mkpod(ns="subteam1.team1", labels=S1),
        [on("node1", S1, **AFF_NS_SELECTOR), on("node2", S2, **STAY_S2_REGION)],
        [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)],
        [100, 0, 0],
    ),
    (
        "AntiAffinity symmetry with namespace selector",
        mkpod(ns="subteam1.team1", labels=S1),
        [on("node1", S1, **ANTI_NS_SELECTOR), on("node2", S2, **STAY_S2_REGION)],
        [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)],
        [0, 100, 100],
    ),
    (
        "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
        mkpod(labels=S1),
        [on("node1", S1, **HARD_AFFINITY), on("node2", S2, **HARD_AFFINITY)],
        [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)],
        [100, 100, 0],
    ),
    (
        "Anti Affinity: pod that does not match existing pods in node will get high score ",
        mkpod(labels=S1, **AWAY_S1_AZ),
        [on("node1", S1), on("node2", S2)],
        [mk_node("node1", AZ1), mk_node("node2", CHINA)],
        [0, 100],
    ),
    (
        "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others ",  # noqa: E501
        mkpod(labels=S1, **AWAY_S1_AZ),
        [on("node1", S1), on("node2", S1)],
        [mk_node("node1", AZ1), mk_node("node2", CHINA)],
        [0, 100],
    ),
    (
        "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score",  # noqa: E501
        mkpod(labels=S1, **AWAY_S1_AZ),
        [on("node1", S1), on("node1", S1), on("node2", S2)],
        [mk_node("node1", AZ1), mk_node("node2", INDIA)],
        [0, 100],
    ),
    (
        "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
        mkpod(labels=S2),
        [on("node1", S1, **AWAY_S2_AZ), on("node2", S2, **AWAY_S1_AZ)],
        [mk_node("node1", AZ1), mk_node("node2", AZ2)],
        [0, 100],
    ),
    (
        "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity",  # noqa: E501
        mkpod(labels=S1, **STAY_S1_AWAY_S2),
        [on("node1", S1), on("node2", S1)],
        [mk_node("node1", CHINA), mk_node("node2", AZ1)],
        [100, 0],
    ),
    (
        "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels",  # noqa: E501
        mkpod(labels=S1, **STAY_S1_AWAY_S2),
        [
            on("node1", S1),
            on("node1", S1),
            on("node2", S1),
            on("node3", S1),
            on("node3", S1),
            on("node4", S1),
            on("node5", S1),
        ],
        [
            mk_node("node1", CHINA_AZ1),
            mk_node("node2", INDIA),
            mk_node("node3", CHINA),
            mk_node("node4", CHINA),
            mk_node("node5", INDIA),
        ],
        [100, 0, 100, 100, 0],
    ),
    (
        "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & symmetry",  # noqa: E501
        mkpod(labels=S1, **STAY_S1_AWAY_S2),
        [on("node1", S1), on("node2", S2), on("node3", None, **STAY_S1_AWAY_S2), on("node4", None, **AWAY_S1_AZ)],
        [mk_node("node1", CHINA), mk_node("node2", AZ1), mk_node("node3", INDIA), mk_node("node4", AZ2)],
        [100, 0, 100, 0],
    ),
    (
        "Avoid panic when partial nodes in a topology don't have pods with affinity",
        mkpod(labels=S1),
        [on("node1", S1), on("node2", None, **STAY_S1_AWAY_S2)],
        [mk_node("node1", CHINA), mk_node("node2", CHINA)],
        [0, 0],
    ),
]


def run_score(plugin: InterPodAffinity, table: NodeTable, p: PodInfo) -> Status | list[int]:
    state = CycleState()
    rows = table.alive_rows()
    st = plugin.pre_score(state, p, table, rows)
    if not st.is_success:
        return st
    scores = plugin.score_batch(state, p, table, rows)
    assert not isinstance(scores, Status)
    per_node = [plugin.score(state, p, NodeInfo(table, int(r)))[0] for r in rows]
    assert per_node == scores.tolist()
    assert plugin.normalize_score(state, p, table, rows, scores).is_success
    return [int(x) for x in scores]


@pytest.mark.parametrize(
    ("name", "incoming", "pods", "nodes", "want"), PREFERRED_CASES, ids=[c[0][:80] for c in PREFERRED_CASES]
)
def test_preferred_affinity(
    name: str, incoming: dict[str, Any], pods: list[dict[str, Any]], nodes: list[dict[str, Any]], want: Any
) -> None:
    table = table_of(*nodes, pods=pods)
    got = run_score(plugin_for(table), table, PodInfo.from_raw(incoming))
    if isinstance(want, Code):
        assert isinstance(got, Status) and got.code == want
    else:
        assert got == want


@pytest.mark.parametrize("kind", ["pref_aff", "pref_anti"])
def test_preferred_affinity_invalid_labels_fail_prescore(kind: str) -> None:
    """Upstream "invalid Affinity fails PreScore" / "invalid AntiAffinity fails PreScore"."""
    table = table_of(mk_node("node1", CHINA), mk_node("node2", CHINA))
    bad = [weighted(8, term("security", "In", "region", ["{{.bad-value.}}"]))]
    p = PodInfo.from_raw(mkpod(pref_aff=bad) if kind == "pref_aff" else mkpod(pref_anti=bad))
    got = run_score(plugin_for(table), table, p)
    assert isinstance(got, Status) and got.code == Code.ERROR
    assert 'Invalid value: "{{.bad-value.}}"' in got.reasons[0]


def test_preferred_affinity_ignore_preferred_terms_of_existing_pods() -> None:
    """Upstream "... with ignorePreferredTermsOfExistingPods": the existing pods' preferences are
    not scored for a pod without preferred terms (Skip), as opposed to the default."""
    nodes = [mk_node("node1", CHINA), mk_node("node2", INDIA), mk_node("node3", AZ1)]
    pods = [on("node1", S1, **STAY_S1_REGION), on("node2", S2, **STAY_S2_REGION)]
    table = table_of(*nodes, pods=pods)
    p = PodInfo.from_raw(mkpod(labels=S2))
    got = run_score(plugin_for(table, {"ignorePreferredTermsOfExistingPods": True}), table, p)
    assert isinstance(got, Status) and got.code == Code.SKIP
    assert run_score(plugin_for(table), table, p) == [0, 100, 0]


# -- TestPreferredAffinityWithHardPodAffinitySymmetricWeight ------------------------------------------------

HARD_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], int, Any]] = [
    (
        "with default weight",
        mkpod(labels={"service": "S1"}),
        [
            on("node1", None, aff=[term("service", "In", "region", ["S1"])]),
            on("node2", None, aff=[term("service", "In", "region", ["S1"])]),
        ],
        1,
        [100, 100, 0],
    ),
    (
        "with zero weight",
        mkpod(labels={"service": "S1"}),
        [
            on("node1", None, aff=[term("service", "In", "region", ["S1"])]),
            on("node2", None, aff=[term("service", "In", "region", ["S1"])]),
        ],
        0,
        Code.SKIP,
    ),
    (
        "with no matching pod",
        mkpod(labels={"service": "S2"}),
        [
            on("node1", None, aff=[term("service", "In", "region", ["S1"])]),
            on("node2", None, aff=[term("service", "In", "region", ["S1"])]),
        ],
        1,
        Code.SKIP,
    ),
    (
        "with namespace selector matching",
        mkpod(ns="subteam1.team1", labels={"service": "S1"}),
        [on("node1", None, aff=[term("service", "In", "region", ["S1"], namespaceSelector=_TEAM1)])],
        1,
        [100, 100, 0],
    ),
    (
        "with namespace selector not matching",
        mkpod(ns="subteam1.team2", labels={"service": "S1"}),
        [on("node1", None, aff=[term("service", "In", "region", ["S1"], namespaceSelector=_TEAM1)])],
        1,
        Code.SKIP,
    ),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "weight", "want"), HARD_CASES, ids=[c[0] for c in HARD_CASES])
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(
    name: str, incoming: dict[str, Any], pods: list[dict[str, Any]], weight: int, want: Any
) -> None:
    table = table_of(mk_node("node1", CHINA), mk_node("node2", CHINA), mk_node("node3", INDIA), pods=pods)
    got = run_score(plugin_for(table, {"hardPodAffinityWeight": weight}), table, PodInfo.from_raw(incoming))
    if isinstance(want, Code):
        assert isinstance(got, Status) and got.code == want
    else:
        assert got == want


# -- args, events, registration ------------------------------------------------------------------------------


def test_args_defaults_and_validation() -> None:
    a = InterPodAffinityArgs.model_validate({})
    assert (a.hard_pod_affinity_weight, a.ignore_preferred_terms_of_existing_pods) == (1, False)
    assert InterPodAffinityArgs.model_validate({"hardPodAffinityWeight": None}).hard_pod_affinity_weight == 1
    assert InterPodAffinityArgs.model_validate({"hardPodAffinityWeight": 0}).hard_pod_affinity_weight == 0
    for bad in (-1, 101):
        with pytest.raises(
            ValidationError, match=rf"hardPodAffinityWeight: Invalid value: {bad}: not in valid range \[0, 100\]"
        ):
            InterPodAffinityArgs.model_validate({"hardPodAffinityWeight": bad})
    with pytest.raises(ValidationError):
        InterPodAffinityArgs.model_validate({"hardPodAffinityWeigth": 1})


def test_events_to_register() -> None:
    ev = plugin_for(table_of()).events_to_register()
    for incoming in (
        ClusterEvent(POD, ActionType.ADD),
        ClusterEvent(POD, ActionType.DELETE),
        ClusterEvent(POD, ActionType.UPDATE_POD_LABEL),
        ClusterEvent(NODE, ActionType.ADD),
        ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL),
        ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT),
    ):
        assert any(e.matches(incoming) for e in ev), incoming
    for incoming in (
        ClusterEvent(NODE, ActionType.UPDATE_NODE_ALLOCATABLE),
        ClusterEvent(POD, ActionType.UPDATE_POD_SCALE_DOWN),
    ):
        assert not any(e.matches(incoming) for e in ev), incoming


def test_registered_with_namespace_object_kind() -> None:
    assert builtin_registry().get("InterPodAffinity") is InterPodAffinity
    assert [k.resource for k in InterPodAffinity.object_kinds] == ["namespaces"]
    assert not InterPodAffinity.object_kinds[0].namespaced


def test_pod_without_affinity_costs_a_lookup_and_skips() -> None:
    """No required terms, no existing pod with required anti-affinity: Skip before anything is
    computed; an existing anti-affinity pod that does not match the pod: Skip as well."""
    table = table_of(mk_node("a", {"zone": "z"}), pods=[on("a", S1), on("a", S2, **AWAY_S1_AZ)])
    plugin = plugin_for(table)
    p = PodInfo.from_raw(mkpod(labels=S1))
    assert plugin.pre_filter(CycleState(), p, table)[1].code == Code.SKIP
    table.add_pod(PodInfo.from_raw(on("a", S2, anti=[term("security", "In", "zone", ["S2"])])))
    assert plugin.pre_filter(CycleState(), p, table)[1].code == Code.SKIP
    table.add_pod(PodInfo.from_raw(on("a", S2, anti=[term("security", "In", "zone", ["S1"])])))
    cs = CycleState()
    assert plugin.pre_filter(cs, p, table)[1].is_success
    assert filter_all(plugin, cs, p, table, ["a"]) == [(U, (EXISTING,))]


def test_terminating_pods_count_as_upstream() -> None:
    """Upstream counts every pod of NodeInfo.Pods, terminating ones included."""
    e = on("a", {"app": "x"})
    e["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    table = table_of(mk_node("a", {"zone": "z"}), mk_node("b", {"zone": "y"}), pods=[e])
    plugin = plugin_for(table)
    p = PodInfo.from_raw(mkpod(anti=[term("app", "In", "zone", ["x"])]))
    cs = CycleState()
    assert plugin.pre_filter(cs, p, table)[1].is_success
    assert filter_all(plugin, cs, p, table, ["a", "b"]) == [(U, (ANTI,)), None]


def test_alike_terms_in_other_namespaces_keep_their_own_namespace() -> None:
    """Pods written alike share their parsed terms, but a term without namespaces means the pod's
    own namespace: the same anti-affinity rejects node-1 for a pod of ns-b (an app=x pod of ns-b
    runs there) and not for a pod of ns-a, in either order."""
    t = table_of(mk_node("node-1", {"host": "node-1"}), pods=[mkpod("x", {"app": "x"}, "node-1", ns="ns-b")])
    pl = plugin_for(t)
    anti = [term("app", "In", "host", ["x"])]
    for order in (("ns-a", "ns-b"), ("ns-b", "ns-a")):
        got = {}
        for i, ns in enumerate(order):
            p = PodInfo.from_raw(mkpod(f"p-{order[0]}-{i}", ns=ns, anti=anti))
            state = CycleState()
            assert pl.pre_filter(state, p, t)[1].is_success
            got[ns] = filter_all(pl, state, p, t, ["node-1"])
        assert got == {"ns-a": [None], "ns-b": [(U, (ANTI,))]}
