"""Pods in flight: what the extender approved counts on its node until the watch settles it.

The kube-scheduler is played by the test: it calls filter, then prioritize when more than one node
passed, binds the pod on the node with the highest answer (or the one filter passed), and the
"watch" (the fake cluster's cache) sees the bind only when the test says so.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from kubesched.extender.holds import InFlightHolds, prefer
from kubesched.extender.requests import Deadline
from kubesched.extender.service import ExtenderService
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import ReservePlugin
from kubesched.framework.registry import Registry
from kubesched.framework.status import SUCCESS, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node
from unit.extender.ext_helpers import IP_CONFIG, FakeCluster, ip_profile
from unit.extender.test_service import budget, ip_pod

CALLS: list[str] = []


class RecordingReserve(ReservePlugin):
    """A Reserve plugin that records its calls (stands for VolumeBinding & co.)."""

    name: ClassVar[str] = "RecordingReserve"

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        CALLS.append(f"reserve {pod.name} {node_name}")
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        CALLS.append(f"unreserve {pod.name} {node_name}")


RECORDING_CONFIG = IP_CONFIG.replace(
    "          - name: UnderlayIP\n      score:",
    "          - name: UnderlayIP\n          - name: RecordingReserve\n      score:",
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(registry: Registry, nodes: dict[str, int], *, timeout: float = 30.0, recording: bool = False,
         clock: Clock | None = None) -> tuple[ExtenderService, FakeCluster]:
    cluster = FakeCluster([node(n, labels=budget(ips)) for n, ips in nodes.items()])
    if recording:
        registry.register(RecordingReserve)
        CALLS.clear()
    profile = ip_profile(registry, RECORDING_CONFIG if recording else IP_CONFIG)
    svc = ExtenderService(profile, registry, cluster, hold_timeout=timeout)
    if clock is not None:
        svc.holds = InFlightHolds(cluster.cache, timeout, now=clock)
    return svc, cluster


def call(svc: ExtenderService, verb: str, p: dict[str, Any], names: list[str]) -> Any:
    reply = getattr(svc, verb)({"Pod": p, "NodeNames": names}, Deadline(verb, 5.0))
    assert reply.status == 200, reply.body
    return orjson.loads(reply.body)


def schedule(svc: ExtenderService, p: dict[str, Any], names: list[str]) -> str | None:
    """One kube-scheduler cycle through the extender: the node it would bind ``p`` to, or None."""
    passed = call(svc, "filter", p, names)["NodeNames"]
    if len(passed) < 2:
        return passed[0] if passed else None
    scores = call(svc, "prioritize", p, passed)
    best = max(s["Score"] for s in scores)
    return str(next(s["Host"] for s in scores if s["Score"] == best))


def used_ips(cluster: FakeCluster, name: str) -> int:
    table = cluster.cache.table
    row = table.row_of(name)
    assert row is not None
    return int(table.pod_column("UnderlayIP/ip/used")[row])


def bound(p: dict[str, Any], node_name: str) -> PodInfo:
    return PodInfo.from_raw({**p, "spec": {**p["spec"], "nodeName": node_name}})


def test_a_burst_the_watch_has_not_seen_never_overcommits(registry: Registry) -> None:
    svc, _ = make(registry, {"n1": 10, "n2": 10, "n3": 10})
    placed: dict[str, int] = {"n1": 0, "n2": 0, "n3": 0}
    refused = 0
    for i in range(45):  # the watch sees none of the binds
        target = schedule(svc, ip_pod(f"p{i}", cpu="10m"), ["n1", "n2", "n3"])
        if target is None:
            refused += 1
        else:
            placed[target] += 1
    assert placed == {"n1": 10, "n2": 10, "n3": 10}
    assert refused == 15
    assert svc.holds is not None and len(svc.holds) == 30


def test_without_holds_the_same_burst_overcommits(registry: Registry) -> None:
    # What the holds fix (issue 30): with in-flight holding off, nothing counts until the watch.
    svc, _ = make(registry, {"n1": 10, "n2": 10, "n3": 10}, timeout=0)
    targets = [schedule(svc, ip_pod(f"p{i}", cpu="10m"), ["n1", "n2", "n3"]) for i in range(45)]
    assert None not in targets


def test_ties_are_broken_toward_the_held_node(registry: Registry) -> None:
    svc, _ = make(registry, {"n1": 10, "n2": 10, "n3": 4})
    p = ip_pod("a")
    scores = call(svc, "prioritize", p, ["n1", "n2", "n3"])
    # n1 and n2 tie at 10; the pod is held on n1 (the first), so n2 gets one less.
    assert scores == [{"Host": "n1", "Score": 10}, {"Host": "n2", "Score": 9}, {"Host": "n3", "Score": 4}]
    assert svc.holds is not None and svc.holds.node_of(p["metadata"]["uid"]) == "n1"


def test_prefer_makes_the_held_node_the_only_top() -> None:
    import numpy as np

    s = np.array([7, 7, 3, 7], dtype=np.int64)
    prefer(s, 3)
    assert s.tolist() == [6, 6, 3, 7]
    z = np.zeros(3, dtype=np.int64)
    prefer(z, 1)
    assert z.tolist() == [0, 1, 0]
    alone = np.array([2, 9, 1], dtype=np.int64)
    prefer(alone, 1)
    assert alone.tolist() == [2, 9, 1]


def test_the_watch_confirming_the_pod_ends_the_hold_without_unreserve(registry: Registry) -> None:
    svc, cluster = make(registry, {"n1": 2}, recording=True)
    p = ip_pod("a")
    assert schedule(svc, p, ["n1"]) == "n1"  # filter's only node: held there
    assert used_ips(cluster, "n1") == 1 and CALLS == ["reserve a n1"]
    cluster.cache.add_or_update_pod(bound(p, "n1"))
    assert svc.holds is not None and len(svc.holds) == 0 and svc.holds.ended["confirmed"] == 1
    assert used_ips(cluster, "n1") == 1 and CALLS == ["reserve a n1"]
    assert not cluster.cache.is_assumed(p["metadata"]["uid"])


def test_the_pod_bound_elsewhere_frees_the_held_node(registry: Registry) -> None:
    svc, cluster = make(registry, {"n1": 10, "n2": 5}, recording=True)
    p = ip_pod("a")
    assert schedule(svc, p, ["n1", "n2"]) == "n1"
    assert (used_ips(cluster, "n1"), used_ips(cluster, "n2")) == (1, 0)
    cluster.cache.add_or_update_pod(bound(p, "n2"))  # kube-scheduler's own scores chose n2
    assert (used_ips(cluster, "n1"), used_ips(cluster, "n2")) == (0, 1)
    assert CALLS == ["reserve a n1", "unreserve a n1"]
    assert svc.holds is not None and svc.holds.ended["elsewhere"] == 1


def test_the_pod_deleted_frees_the_node(registry: Registry) -> None:
    svc, cluster = make(registry, {"n1": 1})
    p = ip_pod("a")
    assert schedule(svc, p, ["n1"]) == "n1"
    assert schedule(svc, ip_pod("b"), ["n1"]) is None  # the only IP is held
    cluster.cache.remove_pod(p["metadata"]["uid"])
    assert used_ips(cluster, "n1") == 0
    assert schedule(svc, ip_pod("b"), ["n1"]) == "n1"


def test_a_retry_releases_the_previous_attempt_first(registry: Registry) -> None:
    svc, cluster = make(registry, {"n1": 1}, recording=True)
    p = ip_pod("a")
    assert schedule(svc, p, ["n1"]) == "n1"
    # The bind did not happen (kube-scheduler retries the pod): its own hold must not refuse it.
    assert schedule(svc, p, ["n1"]) == "n1"
    assert used_ips(cluster, "n1") == 1
    assert CALLS == ["reserve a n1", "unreserve a n1", "reserve a n1"]


def test_a_hold_expires_after_the_timeout(registry: Registry) -> None:
    clock = Clock()
    svc, cluster = make(registry, {"n1": 1}, timeout=30.0, clock=clock)
    assert schedule(svc, ip_pod("a"), ["n1"]) == "n1"
    clock.t += 29.9
    assert schedule(svc, ip_pod("b"), ["n1"]) is None
    clock.t += 0.2
    assert schedule(svc, ip_pod("b"), ["n1"]) == "n1"  # a's hold expired before this answer
    assert svc.holds is not None and svc.holds.ended["expired"] == 1 and used_ips(cluster, "n1") == 1


def test_nodes_mode_with_a_cluster_counts_holds_too(registry: Registry) -> None:
    svc, _ = make(registry, {"n1": 1, "n2": 1})
    nodes = [node("n1", labels=budget(1)), node("n2", labels=budget(1))]
    for n in nodes:
        n["metadata"]["resourceVersion"] = "1"

    def passed(p: dict[str, Any]) -> list[str]:
        reply = svc.filter({"Pod": p, "Nodes": {"items": nodes}}, Deadline("filter", 5.0))
        return [n["metadata"]["name"] for n in orjson.loads(reply.body)["Nodes"]["items"]]

    assert passed(ip_pod("a")) == ["n1", "n2"]
    svc.prioritize({"Pod": ip_pod("a"), "Nodes": {"items": nodes}}, Deadline("prioritize", 5.0))
    assert passed(ip_pod("b")) == ["n2"]  # a is held on n1 (and b on n2: filter's only node)
    assert passed(ip_pod("c")) == []


# -- the bind verb ---------------------------------------------------------------------------------
async def bind(svc: ExtenderService, p: dict[str, Any], node_name: str) -> str:
    md = p["metadata"]
    args = {"PodName": md["name"], "PodNamespace": md["namespace"], "PodUID": md["uid"], "Node": node_name}
    reply = await svc.bind(args, Deadline("bind", 5.0))
    assert reply.status == 200
    return str(orjson.loads(reply.body)["Error"])


async def test_bind_moves_the_hold_to_the_bound_node_and_keeps_it(registry: Registry) -> None:
    clock = Clock()
    svc, cluster = make(registry, {"n1": 10, "n2": 5}, recording=True, clock=clock)
    p = ip_pod("a")
    assert schedule(svc, p, ["n1", "n2"]) == "n1"
    assert await bind(svc, p, "n2") == ""  # kube-scheduler picked n2 after all
    assert cluster.bound == [("default", "a", p["metadata"]["uid"], "n2")]
    assert (used_ips(cluster, "n1"), used_ips(cluster, "n2")) == (0, 1)
    assert CALLS == ["reserve a n1", "unreserve a n1", "reserve a n2"]
    clock.t += 3600  # a bound pod never expires: only the watch settles it
    call(svc, "filter", ip_pod("b"), ["n1", "n2"])
    assert used_ips(cluster, "n2") == 1 and cluster.cache.is_assumed(p["metadata"]["uid"])
    cluster.cache.add_or_update_pod(bound(p, "n2"))
    assert svc.holds is not None and len(svc.holds) == 0 and used_ips(cluster, "n2") == 1


async def test_bind_refuses_a_node_the_pod_no_longer_fits(registry: Registry) -> None:
    svc, cluster = make(registry, {"n1": 1, "n2": 1})
    a, b = ip_pod("a"), ip_pod("b")
    assert schedule(svc, a, ["n1", "n2"]) == "n1"
    assert schedule(svc, b, ["n1", "n2"]) == "n2"
    # kube-scheduler binds b to n1 anyway (its own scores outweighed ours): a holds n1's only IP.
    assert await bind(svc, b, "n1") == "binding default/b to n1: node(s) had no free underlay IP"
    assert cluster.bound == []
    assert (used_ips(cluster, "n1"), used_ips(cluster, "n2")) == (1, 0)


async def test_a_failed_bind_rolls_back(registry: Registry) -> None:
    svc, cluster = make(registry, {"n1": 1}, recording=True)
    p = ip_pod("a")
    assert schedule(svc, p, ["n1"]) == "n1"
    cluster.fail_bind = 'pods "a" not found'
    assert await bind(svc, p, "n1") == 'binding default/a to n1: pods "a" not found'
    assert used_ips(cluster, "n1") == 0 and not cluster.cache.is_assumed(p["metadata"]["uid"])
    assert CALLS == ["reserve a n1", "unreserve a n1"]
    assert svc.holds is not None and svc.holds.ended["bind_failed"] == 1


async def test_bind_holds_even_when_filter_and_prioritize_do_not(registry: Registry) -> None:
    svc, cluster = make(registry, {"n1": 1, "n2": 1}, timeout=0)
    a, b = ip_pod("a"), ip_pod("b")
    assert call(svc, "filter", a, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
    assert await bind(svc, a, "n1") == ""
    assert used_ips(cluster, "n1") == 1
    assert call(svc, "filter", b, ["n1", "n2"])["NodeNames"] == ["n2"]


def test_metrics_show_pods_in_flight_and_why_holds_ended(registry: Registry) -> None:
    from prometheus_client import generate_latest

    from kubesched.extender.server import ExtenderServer

    svc, cluster = make(registry, {"n1": 10, "n2": 10})
    metrics = ExtenderServer(svc).metrics
    a, b = ip_pod("a"), ip_pod("b")
    schedule(svc, a, ["n1", "n2"])
    schedule(svc, b, ["n1", "n2"])
    cluster.cache.add_or_update_pod(bound(a, "n1"))
    text = generate_latest(metrics.registry).decode()
    assert "kubesched_extender_pods_in_flight 1.0" in text
    assert 'kubesched_extender_in_flight_ended{reason="confirmed"} 1.0' in text
    assert 'kubesched_extender_in_flight_ended{reason="expired"} 0.0' in text


def test_prioritize_rechecks_when_the_watch_filled_the_nodes_after_filter(registry: Registry) -> None:
    # Filter's PreFilter/Filter run is reused by prioritize and the hold only while nothing has
    # changed; here the watch sees both nodes' CPU taken between the two calls (no Reserve plugin
    # counts CPU: only a fresh Filter keeps the pod off them).
    cluster = FakeCluster([node(n, cpu="1", labels=budget(10)) for n in ("n1", "n2")])
    svc = ExtenderService(ip_profile(registry), registry, cluster)
    p = ip_pod("a", cpu="500m")
    assert call(svc, "filter", p, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
    for i, name in enumerate(("n1", "n2")):
        cluster.cache.add_or_update_pod(bound(ip_pod(f"x{i}", cpu="1"), name))
    call(svc, "prioritize", p, ["n1", "n2"])
    assert svc.holds is not None and svc.holds.node_of(p["metadata"]["uid"]) is None


def test_prioritize_after_filter_holds_as_a_fresh_check_would(registry: Registry) -> None:
    # The reused run: the same scores and the same hold as prioritize alone computes.
    fresh, _ = make(registry, {"n1": 10, "n2": 6, "n3": 3})
    reused, _ = make(registry, {"n1": 10, "n2": 6, "n3": 3})
    for i in range(12):
        p = ip_pod(f"p{i}", cpu="10m")
        passed = call(reused, "filter", p, ["n1", "n2", "n3"])["NodeNames"]
        alone = call(fresh, "prioritize", p, passed)
        assert call(reused, "prioritize", p, passed) == alone
        assert fresh.holds is not None and reused.holds is not None
        assert reused.holds.node_of(p["metadata"]["uid"]) == fresh.holds.node_of(p["metadata"]["uid"])


def test_with_only_the_served_plugin_a_burst_is_still_held(registry: Registry) -> None:
    # `kubesched extender --only UnderlayIP`: the other plugins' PreFilter never runs here, so
    # their Reserve (VolumeBinding's reads its PreFilter state) must not run in the holds either.
    from kubesched.extender.command import only_plugins

    cluster = FakeCluster([node(n, labels=budget(5)) for n in ("n1", "n2")])
    svc = ExtenderService(only_plugins(ip_profile(registry), ("UnderlayIP",)), registry, cluster)
    targets = [schedule(svc, ip_pod(f"p{i}", cpu="10m"), ["n1", "n2"]) for i in range(12)]
    assert targets.count("n1") == targets.count("n2") == 5
    assert targets.count(None) == 2
    assert (used_ips(cluster, "n1"), used_ips(cluster, "n2")) == (5, 5)


async def test_with_only_the_served_plugin_the_bind_verb_binds(registry: Registry) -> None:
    # `--only UnderlayIP` with bindVerb: the bind runs PreBind with the hold's state, which has no
    # VolumeBinding PreFilter state (its PreBind failed every bind: "error reading VolumeBinding").
    from kubesched.extender.command import only_plugins

    cluster = FakeCluster([node("n1", labels=budget(5))])
    svc = ExtenderService(only_plugins(ip_profile(registry), ("UnderlayIP",)), registry, cluster)
    p = ip_pod("a", cpu="10m")
    assert schedule(svc, p, ["n1"]) == "n1"
    assert await bind(svc, p, "n1") == ""
    assert cluster.bound == [("default", "a", p["metadata"]["uid"], "n1")]


# -- the bind verb runs PreBind: UnderlayIP's address goes on the Binding ---------------------------
ANNOTATION = "kubesched.io/underlay-ip"


def pool_svc(registry: Registry, addresses: list[str], nodes: list[str]) -> tuple[ExtenderService, FakeCluster]:
    svc, cluster = make(registry, dict.fromkeys(nodes, 0), recording=True)
    cluster.objects_by_kind["UnderlayIPPool"] = {"rack": {
        "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool", "metadata": {"name": "rack"},
        "spec": {"addresses": addresses, "nodeNames": nodes},
    }}
    cluster.changes += 1
    return svc, cluster


async def test_bind_sends_the_reserved_address_on_the_binding(registry: Registry) -> None:
    svc, cluster = pool_svc(registry, ["10.0.0.1", "10.0.0.2"], ["n1", "n2"])
    pods = [ip_pod(name) for name in ("a", "b")]
    for p in pods:
        node_name = schedule(svc, p, ["n1", "n2"])
        assert node_name is not None
        assert await bind(svc, p, node_name) == ""
    sent = [cluster.binding_annotations[p["metadata"]["uid"]] for p in pods]
    assert sorted(a[ANNOTATION] for a in sent) == ["10.0.0.1", "10.0.0.2"]
    # The pool is used up: a third pod fits nowhere, and a bind forced on a node is refused.
    c = ip_pod("c")
    assert call(svc, "filter", c, ["n1", "n2"])["NodeNames"] == []
    assert await bind(svc, c, "n1") == "binding default/c to n1: node(s) had no free underlay IP"


async def test_a_failed_bind_returns_the_address_to_the_pool(registry: Registry) -> None:
    svc, cluster = pool_svc(registry, ["10.0.0.1"], ["n1"])
    a, b = ip_pod("a"), ip_pod("b")
    assert schedule(svc, a, ["n1"]) == "n1"
    cluster.fail_bind = "etcdserver: request timed out"
    assert await bind(svc, a, "n1") == "binding default/a to n1: etcdserver: request timed out"
    assert CALLS == ["reserve a n1", "unreserve a n1"] and not cluster.cache.is_assumed(a["metadata"]["uid"])
    cluster.fail_bind = None
    assert schedule(svc, b, ["n1"]) == "n1"  # a's address is free again
    assert await bind(svc, b, "n1") == ""
    assert cluster.binding_annotations[b["metadata"]["uid"]] == {ANNOTATION: "10.0.0.1"}


async def test_a_prebind_rejection_rolls_back_without_binding(registry: Registry) -> None:
    from kubesched.framework.interfaces import PreBindPlugin

    class RefusingPreBind(PreBindPlugin):
        name: ClassVar[str] = "RefusingPreBind"

        async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
            return Status.unschedulable("volume not ready")

    registry.register(RefusingPreBind)
    registry.register(RecordingReserve)
    pre_bind = "      preBind:\n        enabled:\n          - name: RefusingPreBind\n"
    config = RECORDING_CONFIG.replace("      score:", pre_bind + "      score:")
    cluster = FakeCluster([node("n1", labels=budget(1))])
    CALLS.clear()
    svc = ExtenderService(ip_profile(registry, config), registry, cluster, hold_timeout=30.0)
    a = ip_pod("a")
    assert schedule(svc, a, ["n1"]) == "n1"
    assert await bind(svc, a, "n1") == "binding default/a to n1: volume not ready"
    assert cluster.bound == [] and used_ips(cluster, "n1") == 0
    assert CALLS == ["reserve a n1", "unreserve a n1"]
