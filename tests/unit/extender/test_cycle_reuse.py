"""Filter's PreFilter run is reused by prioritize of the same pod exactly while nothing it may have
read has changed (service._version): the watch events that change nothing a plugin reads — a bound
pod's status update, a held pod confirmed on its node, pending pods moving while no plugin reads
them — keep the reuse; a pod bound elsewhere, a bound pod starting to terminate, a declared
object's event, or pending pods moving once a plugin reads them make prioritize run PreFilter
afresh."""

from __future__ import annotations

from typing import Any, ClassVar, cast

import orjson
import pytest

from kubesched.extender.cluster import ExtenderCluster
from kubesched.extender.requests import Deadline
from kubesched.extender.service import ExtenderService
from kubesched.extender.wire import WireError
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import PreFilterPlugin, PreFilterResult
from kubesched.framework.registry import Registry, profiles_object_kinds
from kubesched.framework.status import SUCCESS, Status
from kubesched.kube.api import ApiClient
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import node
from unit.extender.ext_helpers import IP_CONFIG, ip_profile
from unit.extender.test_service import budget, ip_pod


class CountingPreFilter(PreFilterPlugin):
    """Counts PreFilter runs per pod; ``reads_pending``: asks for the pending pods too, as a gang
    plugin's member index does."""

    name: ClassVar[str] = "CountingPreFilter"
    runs: ClassVar[dict[str, int]] = {}
    reads_pending: ClassVar[bool] = False

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        CountingPreFilter.runs[pod.name] = CountingPreFilter.runs.get(pod.name, 0) + 1
        if CountingPreFilter.reads_pending:
            list(self.handle.pending_pods())
        return None, SUCCESS


class Watch:
    """``kubesched extender``'s own cluster (ExtenderCluster), its informers fed by the test as the
    apiserver's watch would: nodes, pods (pending and bound: one informer) and the profile's declared
    objects."""

    def __init__(self, registry: Registry, profile: Any, nodes: list[dict[str, Any]]) -> None:
        kinds = profiles_object_kinds(registry, [profile])
        self.cluster = ExtenderCluster(cast(ApiClient, None), kinds)  # never started: no API calls
        for inf in (self.cluster.nodes, self.cluster.pods):
            inf.synced.set()
        for raw in nodes:
            self.cluster.nodes.handlers.on_add(raw)

    def pending(self, raw: dict[str, Any]) -> None:
        self.cluster.pods.handlers.on_add(raw)

    def scheduled(self, raw: dict[str, Any], node_name: str) -> None:
        """The pod's bind as the watch sees it: an update setting its node; then the kubelet's
        status update (Running)."""
        bound = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "2"},
                 "spec": {**raw["spec"], "nodeName": node_name}, "status": {"phase": "Pending"}}
        self.cluster.pods.handlers.on_update(raw, bound)
        self.updated(bound, {**bound, "metadata": {**bound["metadata"], "resourceVersion": "3"},
                             "status": {"phase": "Running"}})

    def updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.cluster.pods.handlers.on_update(old, new)

    def object_added(self, kind: str, raw: dict[str, Any]) -> None:
        self.cluster._objects.informers[kind].handlers.on_add(raw)


@pytest.fixture
def counting(registry: Registry) -> Registry:
    registry.register(CountingPreFilter)
    CountingPreFilter.runs.clear()
    CountingPreFilter.reads_pending = False
    return registry


def make(registry: Registry) -> tuple[ExtenderService, Watch]:
    text = IP_CONFIG.replace("          - name: UnderlayIP\n      score:",
                             "          - name: UnderlayIP\n          - name: CountingPreFilter\n      score:")
    profile = ip_profile(registry, text)
    watch = Watch(registry, profile, [node(n, cpu="4", labels=budget(10)) for n in ("n1", "n2", "n3")])
    return ExtenderService(profile, registry, watch.cluster), watch


def call(svc: ExtenderService, verb: str, p: dict[str, Any], names: list[str]) -> Any:
    reply = getattr(svc, verb)({"Pod": p, "NodeNames": names}, Deadline(verb, 5.0))
    assert reply.status == 200, reply.body
    return orjson.loads(reply.body)


NAMES = ["n1", "n2", "n3"]
#: PreFilter runs for a pod whose filter run is not reused: filter's, prioritize's and the hold's
#: own check of the node it holds (1 when reused).
FRESH = 3


def prefilter_runs_around(svc: ExtenderService, p: dict[str, Any], between: Any) -> int:
    """PreFilter runs for ``p`` over filter, ``between()``, then prioritize."""
    CountingPreFilter.runs.clear()
    call(svc, "filter", p, NAMES)
    between()
    call(svc, "prioritize", p, NAMES)
    return CountingPreFilter.runs[p["metadata"]["name"]]


def held(svc: ExtenderService, raw: dict[str, Any]) -> str:
    """Schedule ``raw`` through the extender: the node prioritize held it on."""
    call(svc, "filter", raw, NAMES)
    call(svc, "prioritize", raw, NAMES)
    assert svc.holds is not None
    node_name = svc.holds.node_of(raw["metadata"]["uid"])
    assert node_name is not None
    return node_name


def test_events_that_change_nothing_a_plugin_reads_keep_filters_run(counting: Registry) -> None:
    svc, watch = make(counting)
    first, waiting = ip_pod("first", cpu="1"), ip_pod("waiting")
    for raw in (first, waiting):
        watch.pending(raw)
    node_of_first = held(svc, first)

    def events() -> None:
        # first's bind seen on the node it was held on, then its status update; another pending
        # pod comes and goes (no plugin of this profile reads pending pods).
        watch.scheduled(first, node_of_first)
        watch.pending(ip_pod("another"))

    assert prefilter_runs_around(svc, ip_pod("second", cpu="1"), events) == 1
    assert svc.holds is not None and svc.holds.node_of(first["metadata"]["uid"]) is None  # confirmed


def test_a_pod_bound_elsewhere_runs_prefilter_again(counting: Registry) -> None:
    svc, watch = make(counting)
    first = ip_pod("first", cpu="1")
    node_of_first = held(svc, first)
    elsewhere = next(n for n in NAMES if n != node_of_first)
    p = ip_pod("p", cpu="3500m")
    # kube-scheduler bound first on another node than the extender held it on: the hold is undone
    # and the pod counted where it is. p (3.5 of 4 CPUs) no longer fits there.
    assert prefilter_runs_around(svc, p, lambda: watch.scheduled(first, elsewhere)) == FRESH
    assert svc.holds is not None and svc.holds.node_of(p["metadata"]["uid"]) not in (None, elsewhere)


def test_a_bound_pod_starting_to_terminate_runs_prefilter_again(counting: Registry) -> None:
    # Its accounting stays (the table's generation does not move) but PodTopologySpread stops
    # counting a terminating pod: a change a plugin reads.
    svc, watch = make(counting)
    first = ip_pod("first", cpu="1")
    node_of_first = held(svc, first)
    watch.scheduled(first, node_of_first)
    running = watch.cluster.cache.table.pod(first["metadata"]["uid"])
    assert running is not None
    meta = {**running.raw["metadata"], "resourceVersion": "4", "deletionTimestamp": "2026-11-27T00:00:00Z"}

    def terminating() -> None:
        watch.updated(running.raw, {**running.raw, "metadata": meta})

    assert prefilter_runs_around(svc, ip_pod("p"), terminating) == FRESH


def test_a_declared_objects_event_runs_prefilter_again(counting: Registry) -> None:
    svc, watch = make(counting)
    pool = {"apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool", "metadata": {"name": "rack"},
            "spec": {"addresses": ["10.0.0.1"], "nodeNames": ["n1"]}}
    assert prefilter_runs_around(svc, ip_pod("p"), lambda: watch.object_added("UnderlayIPPool", pool)) == FRESH


def test_pending_pods_count_once_a_plugin_reads_them(counting: Registry) -> None:
    svc, watch = make(counting)
    waiting = (ip_pod(f"w{i}") for i in range(2))
    assert prefilter_runs_around(svc, ip_pod("a"), lambda: watch.pending(next(waiting))) == 1
    CountingPreFilter.reads_pending = True
    assert prefilter_runs_around(svc, ip_pod("b"), lambda: None) == 1
    assert prefilter_runs_around(svc, ip_pod("c"), lambda: watch.pending(next(waiting))) == FRESH


# -- prioritize computed ahead (ExtenderService.work_ahead) --------------------------------------------
def twins(registry: Registry) -> tuple[tuple[ExtenderService, Watch], tuple[ExtenderService, Watch]]:
    """Two extenders on identical clusters: one computes prioritize ahead, the other never does."""
    return make(registry), make(registry)


def scheduled_through_both(pair: Any, raw: dict[str, Any], node_name: str) -> None:
    for _, watch in pair:
        watch.scheduled(raw, node_name)


def prioritize_after(pair: Any, p: dict[str, Any], between: Any) -> tuple[Any, Any, Any]:
    """filter on both; the first computes prioritize ahead as the server runs it once filter's
    answer is out; ``between(watch)`` on both; prioritize on both. The scores computed ahead and
    both prioritize answers."""
    (ahead, ahead_watch), (fresh, fresh_watch) = pair
    assert call(ahead, "filter", p, NAMES) == call(fresh, "filter", p, NAMES)
    assert ahead.ahead_due
    ahead.work_ahead()
    assert ahead._cycle is not None and ahead._cycle.scores is not None
    computed = ahead._cycle.scores.tolist()
    between(ahead_watch)
    between(fresh_watch)
    fresh.ahead_due = False  # never computed ahead
    return computed, call(ahead, "prioritize", p, NAMES), call(fresh, "prioritize", p, NAMES)


def test_prioritize_computed_ahead_is_served_while_nothing_changed(counting: Registry) -> None:
    pair = twins(counting)
    first = ip_pod("first", cpu="1")
    for _, watch in pair:
        watch.pending(first)
    nodes = {held(svc, first) for svc, _ in pair}
    assert len(nodes) == 1
    (ahead, _), _ = pair

    def scored_at_request(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("prioritize computed its scores although they were computed ahead")

    second = ip_pod("second", cpu="1")

    def confirmed(watch: Watch) -> None:  # first seen bound where it was held: nothing a plugin reads
        watch.scheduled(first, node_of_first)
        ahead.extender_scores = scored_at_request  # type: ignore[method-assign]

    node_of_first = nodes.pop()
    CountingPreFilter.runs.clear()
    _, got, want = prioritize_after(pair, second, confirmed)
    assert got == want
    assert CountingPreFilter.runs["second"] == 2  # one PreFilter run in each twin


def test_scores_computed_ahead_are_not_served_after_a_relevant_change(counting: Registry) -> None:
    # Between filter and prioritize the watch sees pods with underlay IPs bound on n1 and n2:
    # UnderlayIP's scores move, so the scores computed ahead are stale and prioritize must
    # compute afresh, giving exactly what an extender that never computes ahead answers.
    pair = twins(counting)
    taken = [ip_pod(f"taken{i}") for i in range(9)]

    def bind_elsewhere(watch: Watch) -> None:
        for i, raw in enumerate(taken):
            watch.scheduled(raw, "n1" if i < 6 else "n2")

    p = ip_pod("p")
    computed, got, want = prioritize_after(pair, p, bind_elsewhere)
    assert got == want
    assert [e["Score"] for e in got] != computed  # what serving the stale scores would have answered
    (ahead, _), (fresh, _) = pair
    assert ahead.holds is not None and fresh.holds is not None
    assert ahead.holds.node_of(p["metadata"]["uid"]) == fresh.holds.node_of(p["metadata"]["uid"])


# -- the next pod's filter computed ahead (extender/ahead.py) ---------------------------------------
def filter_ahead_pair(registry: Registry, pods: list[dict[str, Any]]) -> Any:
    """Twin extenders whose watches show ``pods`` pending; the first pod scheduled through both,
    then the first twin computes ahead as its server does once prioritize's answer is out."""
    pair = twins(registry)
    for _, watch in pair:
        for raw in pods:
            watch.pending(raw)
    assert len({held(svc, pods[0]) for svc, _ in pair}) == 1
    (ahead, _), (fresh, _) = pair
    assert ahead.ahead_due
    CountingPreFilter.runs.clear()
    ahead.work_ahead()
    fresh.ahead_due = False
    return pair


def test_the_next_pods_filter_computed_ahead_is_served_while_nothing_changed(counting: Registry) -> None:
    pods = [ip_pod(f"q{i}", cpu="1") for i in range(3)]
    (ahead, _), (fresh, _) = pair = filter_ahead_pair(counting, pods)
    assert CountingPreFilter.runs == {"q1": 1}  # the next pending pod, filtered ahead
    got, want = call(ahead, "filter", pods[1], NAMES), call(fresh, "filter", pods[1], NAMES)
    assert got == want
    assert call(ahead, "prioritize", pods[1], got["NodeNames"]) == call(fresh, "prioritize", pods[1], got["NodeNames"])
    assert CountingPreFilter.runs == {"q1": 2}  # the fresh twin's; none at the ahead twin's requests
    assert pair[0][0].holds is not None


def test_a_filter_computed_ahead_is_not_served_after_a_relevant_change(counting: Registry) -> None:
    # Between the guess and the request the watch sees a pod taking 3.5 CPUs on each of n1 and
    # n2: the next pod (1 CPU) fits only n3 now, where ahead it fitted all three nodes.
    pods = [ip_pod(f"q{i}", cpu="1") for i in range(3)]
    (ahead, ahead_watch), (fresh, fresh_watch) = filter_ahead_pair(counting, pods)
    assert ahead._next._ahead is not None and ahead._next._ahead.passed.sum() == 3
    for watch in (ahead_watch, fresh_watch):
        for name in ("n1", "n2"):
            big = ip_pod(f"big-{name}", cpu="3500m")
            watch.pending(big)
            watch.scheduled(big, name)
    got, want = call(ahead, "filter", pods[1], NAMES), call(fresh, "filter", pods[1], NAMES)
    assert got == want
    assert got["NodeNames"] == ["n3"]


def test_a_filter_computed_ahead_is_for_that_pod_object_only(counting: Registry) -> None:
    # The pod changed (a label: PodTopologySpread and affinities read labels) after the guess:
    # the request's pod is not the object filtered ahead, so it is parsed and filtered afresh.
    pods = [ip_pod(f"q{i}", cpu="1") for i in range(3)]
    (ahead, _), (fresh, _) = filter_ahead_pair(counting, pods)
    changed = {**pods[1], "metadata": {**pods[1]["metadata"], "labels": {"app": "ip", "tier": "x"},
                                       "resourceVersion": "9"}}
    assert call(ahead, "filter", changed, NAMES) == call(fresh, "filter", changed, NAMES)
    assert CountingPreFilter.runs == {"q1": 3}  # ahead, then each twin's request
    assert ahead._pod_sent(changed) is not fresh._pod_sent(changed)


def test_the_guess_follows_kube_schedulers_queue_order(counting: Registry) -> None:
    _, watch = make(counting)
    low, high, later_high = ip_pod("low"), ip_pod("high", priority=10), ip_pod("later-high", priority=10)
    for raw in (low, high, later_high):
        watch.pending(raw)
    cluster = watch.cluster
    uid = {p["metadata"]["name"]: p["metadata"]["uid"] for p in (low, high, later_high)}
    guess = cluster.next_pending(set())
    assert guess is not None and guess.name == "high"
    guess = cluster.next_pending({uid["high"]})
    assert guess is not None and guess.name == "later-high"
    cluster.pods.handlers.on_delete(high)
    cluster.pods.handlers.on_delete(later_high)
    guess = cluster.next_pending(set())
    assert guess is not None and guess.name == "low"
    assert cluster.next_pending({uid["low"]}) is None


def test_no_filter_ahead_when_requests_carry_node_objects(counting: Registry) -> None:
    # nodeCacheCapable: false with a cluster connection: requests are judged on tables built from
    # their Node objects, never on the live cache a filter ahead would run on; so none is run.
    svc, watch = make(counting)
    pods = [ip_pod(f"q{i}", cpu="1") for i in range(2)]
    for raw in pods:
        watch.pending(raw)
    nodes = [node(n, cpu="4", labels=budget(10)) for n in NAMES]
    for verb in ("filter", "prioritize"):
        reply = getattr(svc, verb)({"Pod": pods[0], "Nodes": {"items": nodes}}, Deadline(verb, 5.0))
        assert reply.status == 200, reply.body
        if svc.ahead_due:
            svc.work_ahead()
    assert "q1" not in CountingPreFilter.runs


def test_a_pending_pods_request_uses_the_pod_the_watch_parsed_only_while_it_is_that_object(
        counting: Registry) -> None:
    # The pending-pods informer parsed the pod the watch showed (1 CPU); a request sending that
    # object is answered with that parse, one sending another version (5 CPUs: fits no 4-CPU
    # node) with its own.
    svc, watch = make(counting)
    shown = ip_pod("w", cpu="1")
    watch.pending({"apiVersion": "v1", "kind": "Pod", **shown,
                   "metadata": {**shown["metadata"], "managedFields": [{"manager": "kubectl"}]}})
    parsed = watch.cluster.pending_pod(shown["metadata"]["uid"])
    assert parsed is not None
    assert svc._pod_sent(shown) is parsed
    assert call(svc, "filter", shown, NAMES)["NodeNames"] == NAMES
    bigger = ip_pod("w", cpu="5")
    bigger["metadata"] = {**bigger["metadata"], "uid": shown["metadata"]["uid"]}
    assert svc._pod_sent(bigger) is not parsed
    answer = call(svc, "filter", bigger, NAMES)
    rejected = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
    assert answer["NodeNames"] == [] and rejected == dict.fromkeys(NAMES, "Insufficient cpu")


def test_a_pending_pod_of_the_wrong_shape_is_refused_as_when_parsed_from_the_request(counting: Registry) -> None:
    # The informer keeps a pod whose label value is a number (parsing makes it a string); the
    # request sending that object is refused with the field named, as a request's pod is.
    svc, watch = make(counting)
    odd = ip_pod("odd", cpu="1")
    odd["metadata"] = {**odd["metadata"], "labels": {"app": "ip", "tier": 3}}
    watch.pending(odd)
    assert watch.cluster.pending_pod(odd["metadata"]["uid"]) is not None
    for _ in range(2):  # (the second time from what the first remembered)
        with pytest.raises(WireError, match=r"Pod\.metadata\.labels"):
            svc.filter({"Pod": odd, "NodeNames": NAMES}, Deadline("filter", 5.0))
