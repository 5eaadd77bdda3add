"""The capacity answers against a brute force on random small clusters with priorities: a seeded
generator makes a few nodes, pods bound there (low priorities, some owned by a controller, some
bare), pending pods of mixed priorities and sizes (some larger than the template node, some with a
node selector the template does or does not satisfy), and a node template.

The brute force shares none of the search: for n = 0, 1, 2, ... template nodes, one plain
simulation each; a pod runs when a pod of its name is bound at the end (a victim's replacement
keeps its name). The pods that can never be placed are those that do not run with template nodes
to spare (MAX_NODES, more than any case needs: some stay empty); the answer is the first n that
runs every other pod. (Not "the pods no count runs": with preemption a pod can run only with fewer
nodes — a bare pod that a high-priority pod evicts once template nodes take the pod that was
blocking it, seed 21 — and the question is which pods more nodes cannot help.) The only thing the
brute force shares with the module is the model of the controllers that recreate evicted pods
(VictimReplacements), which is what a cluster does, not part of any search.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from typing import Any

import pytest

from kubesched import testing as builders
from kubesched.config.load import load_config
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.engine.records import SCHEDULED
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.workload import PodTemplate, latest_timestamp
from kubesched.simulate.whatif.capacity import NodeTemplate, fewest_nodes, how_many_fit
from kubesched.simulate.whatif.capacity_outcome import VictimReplacements
from kubesched.snapshot.pod import PodInfo

REGISTRY = builtin_registry()
CONFIG = load_config(None, REGISTRY)
#: Template nodes the brute force tries (0 .. MAX_NODES); the generator keeps answers well below.
MAX_NODES = 7


def owned(pod: dict[str, Any], owner: str) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                           "uid": f"rs-{owner}", "controller": True}]
    return pod


def random_case(seed: int) -> tuple[ClusterInput, NodeTemplate]:
    rng = random.Random(seed)
    pools = ("a", "b")
    nodes = [builders.node(f"n{i}", cpu=str(rng.choice((2, 3, 4))), memory="8Gi", pods=rng.choice((4, 8)),
                           labels={"pool": rng.choice(pools)})
             for i in range(rng.randint(1, 3))]
    pods: list[dict[str, Any]] = []
    for i in range(rng.randint(0, 5)):  # running, low priorities
        node = rng.choice(nodes)["metadata"]["name"]
        pod = builders.pod(f"run-{i}", cpu=rng.choice(("500m", "1", "1500m")), memory="256Mi", node_name=node,
                           priority=rng.choice((0, 10)))
        pods.append(owned(pod, "run") if rng.random() < 0.7 else pod)
    for i in range(rng.randint(1, 6)):  # pending, mixed
        extra: dict[str, Any] = {}
        if rng.random() < 0.3:
            extra["nodeSelector"] = {"pool": rng.choice(pools)}
        pod = builders.pod(f"wait-{i}", cpu=rng.choice(("500m", "1", "2", "3")), memory="256Mi",
                           priority=rng.choice((0, 10, 100, 1000)), **extra)
        pods.append(owned(pod, "wait") if rng.random() < 0.7 else pod)
    # Keep the answers small: no more than ~5 template nodes' worth of pending requests.
    cpu = rng.choice(("1", "2", "4"))
    labels = {"pool": rng.choice(pools)}
    template = NodeTemplate("t", builders.node("t", cpu=cpu, memory="8Gi", pods=rng.choice((2, 8)),
                                               labels=labels), 1.0, "test")
    return ClusterInput(nodes=nodes, pods=pods, objects={}, skipped={}, source=f"seed {seed}"), template


def simulate(cluster: ClusterInput, seed: int, feed: Any) -> Any:
    return asyncio.run(Simulation(CONFIG, REGISTRY, cluster, seed=seed, feed=feed).run())


def not_running(cluster: ClusterInput, template: NodeTemplate, n: int, seed: int) -> set[str]:
    """The pods of the input that do not run with ``n`` template nodes: no pod of that name bound."""
    c = replace(cluster, nodes=[*cluster.nodes, *(template.node(i) for i in range(n))])
    result = simulate(c, seed, VictimReplacements(c.pods, latest_timestamp(c.pods) + 1.0))
    running = {p.key for p in result.cluster.pods.values() if p.node_name and not p.deleting}
    return {PodInfo.from_raw(raw).key for raw in cluster.pods} - running


def brute_force_nodes(cluster: ClusterInput, template: NodeTemplate, seed: int) -> tuple[int, set[str]]:
    outcomes = [not_running(cluster, template, n, seed) for n in range(MAX_NODES + 1)]
    never = outcomes[-1]
    return next(n for n, left in enumerate(outcomes) if left <= never), never


@pytest.mark.parametrize("seed", range(40))
def test_fewest_nodes_equals_trying_node_counts_one_by_one(seed: int) -> None:
    cluster, template = random_case(seed)
    answer = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, [], template, seed=seed, max_nodes=100))
    nodes, never = brute_force_nodes(cluster, template, seed)
    assert (answer.nodes, set(answer.hopeless)) == (nodes, never), (cluster.pods, template.raw)
    assert answer.lower_bound <= nodes
    assert all(why for why in answer.hopeless.values())  # each with the filter's reason


def brute_force_fit(cluster: ClusterInput, t: PodTemplate, seed: int) -> int:
    """Replicas one count at a time, each a plain simulation fed the count of replicas once the
    cluster's own pods (and their victims' replacements) are placed: the largest count all placed."""
    created = latest_timestamp(cluster.pods) + 1.0
    for k in range(40):
        replicas = [PodInfo.from_raw(t.replica(i, created + i, {}, never_preempt=True)) for i in range(k + 1)]
        victims, fed = VictimReplacements(cluster.pods, created), False

        def feed(sim: Simulation, victims: VictimReplacements = victims,
                 replicas: list[PodInfo] = replicas) -> list[PodInfo]:
            nonlocal fed
            again = victims(sim)
            if again or fed:
                return again
            fed = True
            return replicas

        result = simulate(cluster, seed, feed)
        if any(result.records[r.uid].status != SCHEDULED for r in replicas):
            return k
    raise AssertionError("brute force ran away")


@pytest.mark.parametrize("seed", range(20))
def test_how_many_fit_equals_adding_replicas_one_at_a_time(seed: int) -> None:
    cluster, _ = random_case(seed)
    rng = random.Random(seed)
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {
        "cpu": rng.choice(("250m", "500m", "1")), "memory": "128Mi"}}}]}
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"pool": "a"}
    t = PodTemplate("Deployment", "apps/v1", "team", "web", 1, {"metadata": {"labels": {"app": "web"}},
                                                                "spec": spec}, "test")
    answer = asyncio.run(how_many_fit(CONFIG, REGISTRY, cluster, t, seed))
    assert answer.fits == brute_force_fit(cluster, t, seed)
    # Victims are reported as victims, never as pending pods that did not fit.
    pending = {PodInfo.from_raw(p).key for p in cluster.pods if not (p.get("spec") or {}).get("nodeName")}
    assert answer.cluster_unplaced <= len(pending)
    assert {v.pod for v in answer.victims}.isdisjoint(pending)
