"""UnderlayIP with pools, property-tested: under any interleaving of scheduling, failed binds,
deletions, restarts (a new scheduler rebuilt from the pods and the pools' status), nodes leaving
and returning, and claims expiring, no address is ever held by two pods, every pool's addresses are
accounted exactly once (free, active or reserved), and a released claimed address is given to no
other pod until its claim expires. Two of the claimed pods have declared UnderlayIPClaims, two are a
StatefulSet's (their claims come from ``statefulSetKeepDuration``)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.unit.plugins.test_underlay_ip import ip_pod
from tests.unit.plugins.test_underlay_ip_pools import KEY, World, claim_obj, pool_obj
from tests.unit.plugins.test_underlay_ip_statefulsets import owned

from kubesched.framework.clock import FakeClock
from kubesched.plugins.underlay_ip.kinds import CLAIM
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node

NODES = ["n1", "n2", "n3"]
CLAIMED = ["web-0", "web-1"]
STATEFUL = ["db-0", "db-1"]  # pods of StatefulSet db: claims without objects
KEEP_SECONDS = 600.0
ARGS = {"statefulSetKeepDuration": "10m"}


class FlakyCluster(SimulatedCluster):
    """Binds fail while ``failing`` is set (an apiserver error: the scheduler unreserves)."""

    failing = False

    async def bind(self, pod: PodInfo, node_name: str, annotations: Any = None) -> None:
        if self.failing:
            raise RuntimeError("apiserver unavailable")
        await super().bind(pod, node_name, annotations)


def new_world() -> World:
    cluster = FlakyCluster()
    # n1 and n2 share a pool of 4 addresses; n3 has its own 2.
    pools = [pool_obj("shared", addresses=[f"10.0.0.{i}" for i in range(1, 5)], nodeNames=["n1", "n2"]),
             pool_obj("own", addresses=["10.0.1.1", "10.0.1.2"], nodeNames=["n3"])]
    for p in pools:
        cluster.add_object("UnderlayIPPool", p["metadata"]["name"], p)
    for i, name in enumerate(CLAIMED):
        cluster.add_object(CLAIM, f"default/{name}", claim_obj(name, uid=f"claim-{i}", keepDuration="10m"))
    w = World([], [], ARGS, clock=FakeClock(1000.0), cluster=cluster)
    for n in NODES:
        cluster.add_node(node(n, cpu="64", memory="64Gi"))
    return w


OPS = st.one_of(
    st.tuples(st.just("add"), st.sampled_from([*CLAIMED, *STATEFUL, "x"])),
    st.tuples(st.just("flaky"), st.just(0)),  # the binds of the next scheduling round fail
    st.tuples(st.just("delete"), st.integers(0, 7)),
    st.tuples(st.just("restart"), st.just(0)),
    st.tuples(st.just("node_down"), st.sampled_from(NODES)),
    st.tuples(st.just("node_up"), st.sampled_from(NODES)),
    st.tuples(st.just("wait"), st.sampled_from([1.0, 30.0, 599.0, 601.0])),
)


class Model:
    """What the test remembers: when each claim's pod let go of which address."""

    def __init__(self) -> None:
        self.released: dict[str, tuple[str, float]] = {}  # claim pod name → (address, when)


def check(w: World, model: Model) -> None:
    bound = [p for p in w.cluster.pods.values() if p.node_name]
    held: dict[str, str] = {}
    for p in bound:
        for address in filter(None, ((p.raw["metadata"].get("annotations") or {}).get(KEY) or "").split(",")):
            assert address not in held, f"{address} held by {held[address]} and {p.name}"
            held[address] = p.name
    now = w.clock.now()
    for name, (address, when) in model.released.items():
        holder = held.get(address)
        if holder is not None and holder != name:
            assert now >= when + KEEP_SECONDS, f"{address} of claim {name} given to {holder} before it expired"
    book = w.plugin.pools.book
    for pool in book.pools.values():
        active = len(pool.holders)
        assert pool.free_count + active + len(pool.kept) + pool.unaddressed == len(pool.addresses)
        kept_or_held = set(pool.holders) | set(pool.kept)
        assert all(pool.is_free(i) == (i not in kept_or_held) for i in range(len(pool.addresses)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=30))
# Found by breaking the plugin on purpose, kept so they always run: a claimed address given away
# at once; a node leaving letting go of its (still existing) pods' addresses; a restart between.
@example([("add", "web-0"), ("delete", 0), ("add", "x")])
@example([("add", "x"), ("node_down", "n1"), ("add", "x"), ("node_up", "n1")])
@example([("add", "web-1"), ("add", "x"), ("delete", 0), ("restart", 0), ("add", "x"), ("wait", 599.0),
          ("add", "x"), ("wait", 1.0), ("add", "x"), ("add", "web-1")])
@example([("add", "db-0"), ("add", "x"), ("delete", 0), ("restart", 0), ("add", "x"), ("wait", 601.0),
          ("add", "x"), ("add", "db-0")])
@example([("flaky", 0), ("add", "web-0"), ("wait", 30.0), ("add", "web-0"), ("delete", 0), ("wait", 601.0),
          ("add", "web-0")])
def test_no_address_is_ever_held_twice_and_claims_keep_theirs_until_they_expire(ops: list[tuple[str, Any]]) -> None:
    w = new_world()
    model = Model()
    down: dict[str, dict[str, Any]] = {}
    serial = 0
    for op, arg in ops:
        if op == "add":
            existing = {p.name for p in w.cluster.pods.values()}
            name = arg if arg != "x" else f"x{serial}"
            serial += 1
            if name in STATEFUL and name not in existing:
                w.add(owned(name, owner="db"))
            elif name not in existing:
                w.add(ip_pod(name))
        elif op == "flaky":
            assert isinstance(w.cluster, FlakyCluster)
            w.cluster.failing = True
        elif op == "delete":
            pods = sorted(w.cluster.pods.values(), key=lambda p: p.name)
            if pods:
                victim = pods[arg % len(pods)]
                address = (victim.raw["metadata"].get("annotations") or {}).get(KEY)
                if victim.name in (*CLAIMED, *STATEFUL) and address:
                    model.released[victim.name] = (address, w.clock.now())
                w.cluster.delete_pod(victim.uid)
        elif op == "restart":
            w.publish_status()  # a graceful stop publishes a last status round
            w = World([], [], ARGS, clock=FakeClock(w.clock.now()), cluster=w.cluster)
        elif op == "node_down" and arg in w.cluster.nodes:
            down[arg] = w.cluster.nodes[arg]
            w.cluster.delete_node(arg)
        elif op == "node_up" and arg in down:
            w.cluster.add_node(down.pop(arg))
        elif op == "wait":
            w.clock.advance(arg)
        w.schedule()  # every step is followed by a scheduling round
        assert isinstance(w.cluster, FlakyCluster)
        w.cluster.failing = False
        # A claimed pod that is back on its address no longer counts as released.
        for name in list(model.released):
            pod = next((p for p in w.cluster.pods.values() if p.name == name and p.node_name), None)
            if pod is not None and (pod.raw["metadata"].get("annotations") or {}).get(KEY) == model.released[name][0]:
                del model.released[name]
        check(w, model)
