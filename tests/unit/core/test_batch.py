"""OpportunisticBatching (framework/batch.py), ported from pkg/scheduler/framework/runtime/batch_test.go
(v1.37.1: TestBatchBasic, TestBatchRescore, TestBatchRescoreChain), and the scheduling cycle with it
on and off (scheduler.py), and kube-scheduler v1.37's heap order of scored nodes
(framework/sorted_nodes.py) against Go's container/heap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from kubesched.framework import signers
from kubesched.framework.batch import OpportunisticBatch
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import BindPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, Scores
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import Framework
from kubesched.framework.score_totals import ScoredNodes
from kubesched.framework.sorted_nodes import ScoredNode, SortedScoredNodes, heap_root
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import Verdicts
from kubesched.scheduler import Scheduler
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows
from kubesched.testing import StaticProfile, framework_for, node, pod, pod_info
from kubesched.testing.harness import handle


class OnePerNode(FilterPlugin):
    """batch_test.go BatchTestPlugin: a node holds one "blocking" pod (name starting with b)."""

    name: ClassVar[str] = "OnePerNode"
    error = False

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        if self.error:
            return Verdicts.from_mask(np.zeros(len(rows), bool), Status.error("injected filter error"))
        if not pod.name.startswith("b"):
            return Verdicts.from_mask(np.ones(len(rows), bool), SUCCESS)
        taken = [any(p.name.startswith("b") for p in table.pods[int(r)].values()) for r in rows]
        return Verdicts.from_mask(~np.array(taken, dtype=bool), Status.unschedulable("unsched"))

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        return (("blocking", pod.name.startswith("b")),)


class Configurable(PreScorePlugin, ScorePlugin):
    """batch_test.go configurableScorePlugin: a score per node name, errors on demand; records
    the nodes PreScore saw, which NormalizeScore checks."""

    name: ClassVar[str] = "Configurable"
    scores: ClassVar[dict[str, int]] = {}
    fail: ClassVar[str] = ""

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        if self.fail == "prescore":
            return Status.error("injected prescore error")
        state.write("seen", set(table.node_names(rows)))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        if self.fail == "score":
            return Status.error("injected score error")
        return np.array([self.scores.get(n, 0) for n in table.node_names(rows)], dtype=np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        if self.fail == "normalize":
            return Status.error("injected normalize error")
        assert set(table.node_names(rows)) <= state.read("seen")
        return SUCCESS

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        return ()


class Binder(BindPlugin):
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS


def _framework(nodes: Sequence[str], clock: FakeClock | None = None) -> Framework:
    table = NodeTable()
    for n in nodes:
        table.upsert_node(node(n))
    registry = Registry()
    for cls in (OnePerNode, Configurable, Binder):
        registry.register(cls)
    profile = StaticProfile({"filter": ["OnePerNode"], "preScore": ["Configurable"], "score": ["Configurable"],
                  "bind": ["Binder"], "queueSort": []}, score_weights={"Configurable": 1})
    return Framework.build(profile, registry, handle(table, clock=clock), schedules=False)


def _scored(fwk: Framework, ranked: Sequence[tuple[str, int]]) -> ScoredNodes:
    """A cycle's scored nodes (the chosen first, with the highest total)."""
    table = fwk.handle.table
    rows = np.array([table.row_of(n) for n, _ in ranked], dtype=np.intp)
    return ScoredNodes(rows, np.array([t for _, t in ranked], dtype=np.int64), {}, {})


@pytest.fixture(autouse=True)
def _reset() -> None:
    OnePerNode.error = False
    Configurable.scores = {}
    Configurable.fail = ""


# (name, first pod, first stored?, first ranking [chosen first], skip a cycle, second pod name,
#  its nominated node, second signature, expected hint, expected nodes left after the second store)
BASIC = [
    ("a second pod with the same signature gets a hint", True, [("n3", 9), ("n1", 5)], 2, "b-2", "", b"sig",
     "n1", None),
    ("a second pod with a different signature doesn't get a hint", True, [("n3", 9), ("n1", 5)], 2, "a-2", "",
     b"sig2", "", None),
    ("pod doesn't get hint if previous pod didn't scheduled", False, [("n3", 9), ("n1", 5)], 2, "b-2", "", b"sig",
     "", None),
    ("empty list", True, [("n3", 9)], 2, "b-2", "", b"sig", "", None),
    ("nil list", True, None, 2, "b-2", "", b"sig", "", None),
    ("pod doesn't get hint because the previous pod is to a different profile", True, [("n3", 9), ("n1", 5)], 3,
     "b-2", "", b"sig", "", None),
    ("pod doesn't use batch from preceding pod when they are from the same cycle", True, [("n3", 9), ("n1", 5)],
     1, "b-2", "", b"sig", "", None),
    ("pod uses batch from preceding pod and leaves remaining batch to next pod", True,
     [("n3", 9), ("n1", 5), ("n2", 4)], 2, "b-2", "", b"sig", "n1", ["n2"]),
    ("a second pod with a nominated node does not get a hint", True, [("n3", 9), ("n1", 5)], 2, "b-2", "n1", b"sig",
     "", None),
]


@pytest.mark.parametrize(("name", "stored", "ranking", "cycle", "second", "nominated", "sig", "hint", "left"),
                         BASIC, ids=[c[0] for c in BASIC])
def test_batch_basic(name: str, stored: bool, ranking: list[tuple[str, int]] | None, cycle: int, second: str,
                     nominated: str, sig: bytes, hint: str, left: list[str] | None) -> None:
    fwk = _framework(["n1", "n2", "n3", "n4"])
    batch = OpportunisticBatch(fwk)
    first = pod_info("b-1")
    assert batch.get_node_hint(CycleState(), first, b"sig", 1) == ""
    if stored:
        batch.store_schedule_results(b"sig", "", "n3", None if ranking is None else _scored(fwk, ranking), 1)
    fwk.handle.table.add_pod(first.with_node("n3"))
    raw = pod(second)
    if nominated:
        raw["status"] = {"nominatedNodeName": nominated}
    got = batch.get_node_hint(CycleState(), PodInfo.from_raw(raw), sig, cycle)
    assert got == hint
    batch.store_schedule_results(sig, got, hint or "n4", None, cycle)
    state = batch._state
    if left is None:
        assert state is None or not len(state.nodes())
    else:
        assert state is not None and state.signature == sig
        assert [state.nodes().pop().name for _ in range(len(state.nodes()))] == left


RESCORE = [
    ("rescored node wins", 100, "", "", "n2", ["n1"]),
    ("rescored node loses", 10, "", "", "n1", ["n2"]),
    ("filter error gives no hint", 100, "filter", "", "", ["n1"]),
    ("prescore error gives no hint", 0, "prescore", "", "", ["n1"]),
    ("score error gives no hint", 0, "score", "", "", ["n1"]),
    ("normalize error gives no hint", 0, "normalize", "", "", ["n1"]),
    ("chosen node missing from lister gives no hint", 0, "", "n2", "", ["n1"]),
    ("cached node missing from lister gives no hint", 100, "", "n1", "", ["n1"]),
]


@pytest.mark.parametrize(("name", "score", "fail", "missing", "hint", "left"), RESCORE, ids=[c[0] for c in RESCORE])
def test_batch_rescore(name: str, score: int, fail: str, missing: str, hint: str, left: list[str]) -> None:
    """The last chosen node still fits a non-blocking pod: scored again, it competes with the
    cached nodes; any failure on the way gives no hint and leaves the state as it was."""
    fwk = _framework(["n1", "n2"])
    Configurable.scores = {"n1": 50, "n2": score}
    batch = OpportunisticBatch(fwk)
    batch.get_node_hint(CycleState(), pod_info("a-1"), b"sig", 1)
    batch.store_schedule_results(b"sig", "", "n2", _scored(fwk, [("n2", 60), ("n1", 50)]), 1)
    fwk.handle.table.add_pod(pod_info("a-1").with_node("n2"))
    if missing:
        fwk.handle.table.remove_node(missing)
    OnePerNode.error = fail == "filter"
    Configurable.fail = fail
    assert batch.get_node_hint(CycleState(), pod_info("a-2"), b"sig", 2) == hint
    state = batch._state
    assert state is not None
    nodes = state.nodes()
    assert [nodes.pop().name for _ in range(len(nodes))] == left
    assert batch.rescore_attempts == (0 if missing == "n2" or fail == "filter" else 1)


def test_batch_rescore_chain() -> None:
    """TestBatchRescoreChain: the rescored node wins two cycles in a row; the cached one stays."""
    fwk = _framework(["n1", "n2"])
    Configurable.scores = {"n1": 50, "n2": 100}
    batch = OpportunisticBatch(fwk)
    batch.get_node_hint(CycleState(), pod_info("a-1"), b"sig", 1)
    batch.store_schedule_results(b"sig", "", "n2", _scored(fwk, [("n2", 100), ("n1", 50)]), 1)
    assert batch.get_node_hint(CycleState(), pod_info("a-2"), b"sig", 2) == "n2"
    batch.store_schedule_results(b"sig", "n2", "n2", None, 2)
    assert batch.get_node_hint(CycleState(), pod_info("a-3"), b"sig", 3) == "n2"
    state = batch._state
    assert state is not None and [n.name for n in state.nodes().unordered()] == ["n1"]
    assert batch.attempts == {"no_hint": 1, "hint_used": 1}
    assert batch.batched_pods == 1


def test_batch_state_expires_after_500ms() -> None:
    clock = FakeClock()
    fwk = _framework(["n1", "n2", "n3"], clock)
    batch = OpportunisticBatch(fwk)
    batch.store_schedule_results(b"sig", "", "n3", _scored(fwk, [("n3", 9), ("n1", 5), ("n2", 1)]), 1)
    fwk.handle.table.add_pod(pod_info("b-1").with_node("n3"))
    clock.advance(0.5)
    assert batch.get_node_hint(CycleState(), pod_info("b-2"), b"sig", 2) == "n1"
    batch.store_schedule_results(b"sig", "n1", "n1", None, 2)
    clock.advance(0.01)
    assert batch.get_node_hint(CycleState(), pod_info("b-3"), b"sig", 3) == ""
    assert batch.flushes == {"expired": 1}


# -- in the scheduling cycle ---------------------------------------------------------------------


def _scheduler(gates: dict[str, bool] | None, n_nodes: int = 4) -> Scheduler:
    registry = Registry()
    for cls in (OnePerNode, Configurable, Binder):
        registry.register(cls)
    profile = StaticProfile({"queueSort": ["PrioritySort"], "filter": ["OnePerNode"], "preScore": ["Configurable"],
                  "score": ["Configurable"], "bind": ["Binder"]}, score_weights={"Configurable": 1})
    from kubesched.plugins.priority_sort import PrioritySort

    registry.register(PrioritySort)
    sched = Scheduler.build([profile], registry, FakeClock(), feature_gates=gates, seed=1, tie_break="heap",
                            eager_binding=True)
    for i in range(n_nodes):
        sched.on_node_add_or_update(node(f"n{i}"))
    return sched


@pytest.mark.parametrize("gates", [None, {"OpportunisticBatching": True}, {"OpportunisticBatching": False}])
def test_identical_pods_take_the_previous_ranking_while_the_gate_is_on(gates: dict[str, bool] | None) -> None:
    """Four identical one-per-node pods: the first is scored on every node, the next three are
    placed on the nodes it ranked next (hints), without a Filter search of their own, so the
    rotating start index stays where the first left it. With the gate off, each searches."""
    Configurable.scores = {"n0": 10, "n1": 40, "n2": 30, "n3": 20}
    sched = _scheduler(gates)
    for i in range(4):
        sched.on_pod_add(pod_info(f"b-{i}", cpu="1"))
    placed = []
    while sched.schedule_one():
        pass
    placed = sorted((p.name, p.node_name) for p in sched.cache.table.all_pods())
    fwk = sched.frameworks["default-scheduler"]
    on = gates is None or gates["OpportunisticBatching"]
    # The best-scored free node each time, whether from the hint or from a new search.
    assert placed == [("b-0", "n1"), ("b-1", "n2"), ("b-2", "n3"), ("b-3", "n0")]
    assert fwk.batch.batched_pods == (3 if on else 0)
    assert sched._feasible_nodes.next_start_node_index == (0 if on else 4 * 4 % 4)
    if on:
        assert fwk.batch.attempts == {"no_hint": 1, "hint_used": 3}
        assert {f.name: sorted(f.values.items()) for f in fwk.batch.metric_families("p")}[
            "scheduler_batch_attempts"] == [(("p", "hint_used"), 3.0), (("p", "no_hint"), 1.0)]


def test_the_default_profile_signs_no_pod() -> None:
    """PodTopologySpread's system default constraints make every pod unsignable (as kube-scheduler's
    own scheduler_batch_cache_flushed_total{reason="pod_not_batchable"} counts for every pod);
    with List defaulting and no default constraints the same pod is signable."""
    p = pod_info("p", cpu="1")
    assert framework_for(default_plugins=True).signer.sign(p) is None
    listed = framework_for(default_plugins=True, args={"PodTopologySpread": {"defaultingType": "List"}})
    assert listed.signer.enabled
    sig = listed.signer.sign(p)
    assert sig is not None and sig == listed.signer.sign(pod_info("q", cpu="1"))
    assert sig != listed.signer.sign(pod_info("r", cpu="2"))


def test_a_plugin_that_cannot_sign_turns_signatures_off() -> None:
    class Unsigned(FilterPlugin):
        name: ClassVar[str] = "Unsigned"

        def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
            return Verdicts.from_mask(np.ones(len(rows), bool), SUCCESS)

    fwk = framework_for([Unsigned])
    assert not fwk.signer.enabled and fwk.signer.sign(pod_info("p")) is None


# -- the plugins' signatures (their SignPod) -----------------------------------------------------


def _sig(p: dict[str, Any], **args: Any) -> bytes | None:
    fwk = framework_for(default_plugins=True, args={"PodTopologySpread": {"defaultingType": "List"}, **args})
    return fwk.signer.sign(PodInfo.from_raw(p))


def _with(p: dict[str, Any], **spec: Any) -> dict[str, Any]:
    p["spec"].update(spec)
    return p


def test_signatures_ignore_the_order_of_tolerations_terms_and_ports() -> None:
    t1 = {"key": "a", "operator": "Exists"}
    t2 = {"key": "b", "operator": "Exists"}
    assert _sig(_with(pod("x"), tolerations=[t1, t2])) == _sig(_with(pod("y"), tolerations=[t2, t1]))
    assert _sig(_with(pod("x"), tolerations=[t1])) != _sig(_with(pod("y"), tolerations=[t2]))
    e1 = {"key": "m", "operator": "In", "values": ["b", "a"]}
    e2 = {"key": "n", "operator": "Exists"}

    def aff(*exprs: dict[str, Any]) -> dict[str, Any]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}

    swapped = dict(e1, values=["a", "b"])
    assert _sig(_with(pod("x"), affinity=aff(e1, e2))) == _sig(_with(pod("y"), affinity=aff(e2, swapped)))
    assert _sig(_with(pod("x"), affinity=aff(e1))) != _sig(_with(pod("y"), affinity=aff(e2)))


def test_signatures_leave_out_config_maps_and_secrets_but_not_claims() -> None:
    cm = {"name": "c", "configMap": {"name": "cm-x"}}
    pvc = {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
    assert _sig(_with(pod("x"), volumes=[cm])) == _sig(pod("y"))
    assert _sig(_with(pod("x"), volumes=[pvc])) != _sig(pod("y"))


def test_pods_with_inter_pod_affinity_spread_constraints_or_claims_are_not_signable() -> None:
    term = {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}
    assert _sig(_with(pod("x"), affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}})) is None
    assert _sig(_with(pod("x"), topologySpreadConstraints=[{
        "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"a": "b"}}}])) is None
    assert _sig(_with(pod("x"), resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}])) is None


def test_labels_are_signed_unless_existing_pods_preferred_terms_are_ignored() -> None:
    a, b = pod("x", labels={"app": "a"}), pod("y", labels={"app": "b"})
    assert _sig(a) != _sig(b)
    ignore = {"InterPodAffinity": {"ignorePreferredTermsOfExistingPods": True}}
    assert _sig(pod("x", labels={"app": "a"}), **ignore) == _sig(pod("y", labels={"app": "b"}), **ignore)


# -- kube-scheduler's heap order ------------------------------------------------------------------

#: Totals in the order found → the order Go's container/heap pops them (heap.Init, then Pop until
#: empty; every Randomizer 0), printed by a Go program over these vectors.
GO_HEAP = [
    ([3, 3, 3, 3], [0, 3, 2, 1]),
    ([1, 2, 2, 0, 2], [1, 4, 2, 0, 3]),
    ([2, 2, 1, 2, 2, 2, 0], [0, 1, 3, 4, 5, 2, 6]),
    ([5, 7, 7, 7, 1, 7, 7, 7, 7], [1, 8, 3, 6, 5, 7, 2, 0, 4]),
]


@pytest.mark.parametrize(("totals", "order"), GO_HEAP)
def test_heap_order_is_go_container_heaps(totals: list[int], order: list[int]) -> None:
    heap = SortedScoredNodes([ScoredNode(str(i), t) for i, t in enumerate(totals)])
    assert [int(heap.pop().name) for _ in totals] == order
    assert heap_root(np.array(totals, dtype=np.int64)) == order[0]


def test_heap_root_matches_the_heap_on_ties() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        totals = rng.integers(0, 3, size=int(rng.integers(1, 70)))
        heap = SortedScoredNodes([ScoredNode(str(i), int(t)) for i, t in enumerate(totals)])
        assert heap_root(totals) == int(heap.pop().name)



def test_a_signature_is_computed_once_per_pod_object() -> None:
    fwk = framework_for(default_plugins=True, args={"PodTopologySpread": {"defaultingType": "List"}})
    p = pod_info("p", cpu="1")
    first = fwk.signer.sign(p)
    assert first is not None
    assert [k for k in p.memo if k.startswith("batch.signature")] != [] and not any(
        k.startswith("v1.Pod") for k in p.memo)
    assert fwk.signer.sign(p) is first
