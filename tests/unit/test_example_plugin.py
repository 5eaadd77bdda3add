"""The example out-of-tree plugin (examples/plugins/domain_cap): config, simulator run, unit tests.

Doubles as the recipe of docs/plugins.md "Testing a plugin": unit-test the extension points on a
node table built with kubesched.testing, then run the simulator over a small cluster and assert placements.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from kubesched.backend.cache import SchedulerCache
from kubesched.config.errors import ConfigError
from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.registry import Registry, RegistryError
from kubesched.framework.status import Code
from kubesched.framework.types import EVENT_NODE_ADD, EVENT_POD_DELETE, NODE, ActionType, ClusterEvent
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.engine.records import SCHEDULED, UNSCHEDULABLE
from kubesched.simulate.engine.runner import Simulation, SimulationResult
from kubesched.simulate.inputs.dump import load_cluster
from kubesched.snapshot.table import NodeTable
from kubesched.testing import node, pod, pod_info, table_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import domain_cap  # noqa: E402
from domain_cap import DomainCap, DomainCapArgs  # noqa: E402
from domain_cap.plugin import REASON_FULL, STATE_KEY  # noqa: E402

CONFIG = EXAMPLES / "domain_cap" / "config.yaml"
CLUSTER = EXAMPLES / "domain_cap" / "cluster.yaml"
ZONE = "topology.kubernetes.io/zone"
FULL_MESSAGE = (
    "0/5 nodes are available: 1 node(s) didn't have label topology.kubernetes.io/zone, "
    "4 node(s) were in a topology domain that reached its pod cap."
    # DefaultPreemption (default profile): no lower-priority pod to evict, upstream's suffix.
    " preemption: 0/5 nodes are available: 1 Preemption is not helpful for scheduling, "
    "4 No preemption victims found for incoming pod."
)


def registry() -> Registry:
    """builtin_registry() plus every plugin the example module exports (what --plugins does)."""
    reg = builtin_registry()
    for cls in domain_cap.PLUGINS:
        reg.register(cls)
    return reg


def simulate(config: Any = CONFIG, seed: int = 0) -> SimulationResult:
    reg = registry()
    return asyncio.run(Simulation(load_config(config, reg), reg, load_cluster(CLUSTER), seed=seed).run())


def by_name(result: SimulationResult) -> dict[str, Any]:
    return {rec.key.split("/")[1]: rec for rec in result.records.values()}


def zone_of(result: SimulationResult, node_name: str) -> str | None:
    labels = result.cluster.nodes[node_name]["metadata"]["labels"]
    return labels.get(ZONE)


# -- configuration -------------------------------------------------------------------------------


def test_the_example_config_enables_domain_cap_at_its_four_points_with_weight_5() -> None:
    cfg = load_config(CONFIG, registry())
    assert cfg.warnings == []
    prof = cfg.profile("default-scheduler")
    for point in ("preFilter", "filter", "preScore", "score"):
        assert prof.plugins[point][-1] == "DomainCap"
    assert "DomainCap" not in prof.plugins["reserve"]
    assert prof.score_weights["DomainCap"] == 5
    args = prof.plugin_args["DomainCap"]
    assert isinstance(args, DomainCapArgs)
    assert (args.max_pods, args.topology_key, args.nodes_without_key) == (2, ZONE, "Reject")
    assert args.pod_selector.match_labels == {"tier": "licensed"}


def _config_with(args: dict[str, Any] | None) -> dict[str, Any]:
    prof: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "plugins": {"multiPoint": {"enabled": [{"name": "DomainCap"}]}},
    }
    if args is not None:
        prof["pluginConfig"] = [{"name": "DomainCap", "args": args}]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [prof]}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (None, "profiles[0].pluginConfig: Required value: plugin DomainCap needs args (args.maxPods: Required value"),
        ({"maxPods": 0, "podSelector": {}}, "args.maxPods: Invalid value: 0: must be greater than or equal to 1"),
        ({"maxPod": 2, "podSelector": {}}, 'args.maxPod: unknown field (did you mean "maxPods"?)'),
        ({"maxPods": 2, "podSelector": {}, "topologyKey": "bad key/"}, 'args.topologyKey: Invalid value: "bad key/"'),
        ({"maxPods": 2, "podSelector": {}, "nodesWithoutKey": "Maybe"}, "args.nodesWithoutKey: Invalid value"),
        ({"maxPods": 2, "podSelector": {"matchLabel": {}}}, "args.podSelector.matchLabel: unknown field"),
    ],
)
def test_bad_args_are_rejected_at_load_time_naming_the_field(args: dict[str, Any] | None, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(_config_with(args), registry())
    assert message in str(e.value)


def test_an_empty_selector_and_a_prefixless_key_are_valid() -> None:
    args = DomainCapArgs.model_validate({"maxPods": 1, "podSelector": {}, "topologyKey": "rack"})
    assert args.pod_selector.matches({"anything": "x"})


def test_registering_the_plugin_twice_is_an_error() -> None:
    reg = registry()
    with pytest.raises(RegistryError, match="already exists"):
        reg.register(DomainCap)


# -- the simulator -------------------------------------------------------------------------------


def test_simulation_caps_each_zone_and_leaves_the_rest_pending_with_the_reason() -> None:
    result = simulate()
    recs = by_name(result)
    licensed = {n: r for n, r in recs.items() if n.startswith("licensed-")}

    per_zone = Counter(zone_of(result, r.node) for r in licensed.values() if r.node)
    assert per_zone == {"zone-a": 2, "zone-b": 2}  # licensed-0 was already in zone-a
    pending = [r for r in licensed.values() if r.status == UNSCHEDULABLE]
    assert len(pending) == 2
    for r in pending:
        assert r.message == FULL_MESSAGE

    # The first licensed pod the scheduler placed went to the empty zone.
    first = next(r for r in result.records.values() if r.key.startswith("shop/licensed-") and r.status == SCHEDULED)
    assert zone_of(result, first.node) == "zone-b"

    # Pods the selector does not match are untouched (PreFilter Skip) and take the roomy node.
    assert recs["web-1"].status == recs["web-2"].status == SCHEDULED
    assert recs["web-1"].node == recs["web-2"].node == "edge-1"


def test_simulation_is_deterministic_for_a_seed() -> None:
    first = {k: (r.status, r.node) for k, r in simulate(seed=7).records.items()}
    again = {k: (r.status, r.node) for k, r in simulate(seed=7).records.items()}
    assert first == again


def test_nodes_without_key_ignore_lets_the_overflow_land_outside_every_zone() -> None:
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["profiles"][0]["pluginConfig"][0]["args"]["nodesWithoutKey"] = "Ignore"
    result = simulate(cfg)
    licensed = [r for r in by_name(result).values() if r.key.startswith("shop/licensed-")]
    assert all(r.node for r in licensed)
    per_zone = Counter(zone_of(result, r.node) for r in licensed)
    assert per_zone == {"zone-a": 2, "zone-b": 2, None: 2}


# -- the extension points, directly ---------------------------------------------------------------


def make(table: NodeTable, profile: str = "p", **args: Any) -> DomainCap:
    a = DomainCapArgs.model_validate({"maxPods": 2, "podSelector": {"matchLabels": {"tier": "licensed"}}, **args})
    return DomainCap(a, Handle(table, FakeClock(), WaitingPods(), profile_name=profile))


def licensed(name: str, **kw: Any) -> dict[str, Any]:
    return pod(name, cpu="100m", labels={"tier": "licensed"}, **kw)


def zoned_table() -> NodeTable:
    return table_of(
        node("a1", labels={ZONE: "a"}),
        node("a2", labels={ZONE: "a"}),
        node("b1", labels={ZONE: "b"}),
        node("x1"),
        pods=[
            licensed("l1", node_name="a1"),
            licensed("l2", node_name="a2"),
            licensed("l3", node_name="b1"),
            pod("w1", node_name="b1", labels={"tier": "web"}),
        ],
    )


def test_pre_filter_skips_pods_the_selector_does_not_match() -> None:
    plugin = make(zoned_table())
    state = CycleState()
    result, st = plugin.pre_filter(state, pod_info("web", labels={"tier": "web"}), plugin.handle.table)
    assert result is None and st.code == Code.SKIP
    assert STATE_KEY not in state
    assert plugin.pre_score(state, pod_info("web"), plugin.handle.table, np.arange(4)).is_skip


def test_pre_filter_counts_selected_pods_per_domain() -> None:
    plugin = make(zoned_table())
    state = CycleState()
    _, st = plugin.pre_filter(state, pod_info("new", labels={"tier": "licensed"}), plugin.handle.table)
    assert st.is_success
    assert state.read(STATE_KEY).by_value == {"a": 2, "b": 1}  # w1 is not selected


def test_filter_batch_rejects_full_domains_and_unlabelled_nodes() -> None:
    table = zoned_table()
    plugin = make(table)
    p = pod_info("new", labels={"tier": "licensed"})
    state = CycleState()
    plugin.pre_filter(state, p, table)
    rows = table.alive_rows()
    verdicts = plugin.filter_batch(state, p, table, rows)
    got = {
        table.names[r]: (verdicts.statuses[c - 1].code, verdicts.statuses[c - 1].message) if c else None
        for r, c in zip(rows.tolist(), verdicts.codes.tolist(), strict=True)
    }
    assert got == {
        "a1": (Code.UNSCHEDULABLE, REASON_FULL),
        "a2": (Code.UNSCHEDULABLE, REASON_FULL),
        "b1": None,
        "x1": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"node(s) didn't have label {ZONE}"),
    }
    # The per-node form (the default filter() over filter_batch) agrees.
    assert plugin.filter(state, p, table.node_info(table.row_of("b1"))).is_success
    assert plugin.filter(state, p, table.node_info(table.row_of("a1"))).message == REASON_FULL


def test_filter_with_ignore_passes_unlabelled_nodes() -> None:
    table = zoned_table()
    plugin = make(table, nodesWithoutKey="Ignore")
    p = pod_info("new", labels={"tier": "licensed"})
    state = CycleState()
    plugin.pre_filter(state, p, table)
    rows = table.alive_rows()
    passed = table.node_names(rows[plugin.filter_batch(state, p, table, rows).passed()])
    assert passed == ["b1", "x1"]


def test_score_prefers_the_emptiest_domain_after_normalize() -> None:
    table = table_of(
        node("a1", labels={ZONE: "a"}),
        node("b1", labels={ZONE: "b"}),
        node("c1", labels={ZONE: "c"}),
        node("x1"),
        pods=[licensed("l1", node_name="a1"), licensed("l2", node_name="b1"), licensed("l3", node_name="b1")],
    )
    plugin = make(table, maxPods=5)
    p = pod_info("new", labels={"tier": "licensed"})
    state = CycleState()
    plugin.pre_filter(state, p, table)
    rows = table.alive_rows()
    assert plugin.pre_score(state, p, table, rows).is_success
    scores = plugin.score_batch(state, p, table, rows)  # default batch form loops over score()
    assert isinstance(scores, np.ndarray)
    assert scores.tolist() == [1, 2, 0, 5]  # x1 (no zone) scores as a full domain
    assert plugin.normalize_score(state, p, table, rows, scores).is_success
    assert scores.tolist() == [80, 60, 100, 0]


def test_the_pod_column_stays_exact_through_assume_forget_and_delete() -> None:
    cache = SchedulerCache(table_of(node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"})))
    plugin = make(cache.table)
    selected = "DomainCap/p/selected"

    def zone_a() -> int:
        return int(cache.table.pod_column(selected)[cache.table.alive_rows()].sum())

    p = pod_info("l1", labels={"tier": "licensed"})
    cache.assume(p, "a1")
    assert zone_a() == 1
    cache.forget(p.uid)
    assert zone_a() == 0
    cache.add_or_update_pod(p.with_node("a2"))
    assert zone_a() == 1
    cache.remove_node("a2")  # the pod waits aside with its node
    cache.add_or_update_node(node("a2", labels={ZONE: "a"}))
    assert zone_a() == 1  # not counted twice
    cache.remove_pod(p.uid)
    assert zone_a() == 0
    del plugin


def test_a_restarted_scheduler_counts_pods_already_bound() -> None:
    table = zoned_table()  # pods bound before the plugin exists
    plugin = make(table)
    col = table.pod_column("DomainCap/p/selected")
    assert {table.names[r]: int(col[r]) for r in table.alive_rows()} == {"a1": 1, "a2": 1, "b1": 1, "x1": 0}
    del plugin


def test_clone_isolates_pre_filter_extension_updates() -> None:
    table = zoned_table()
    plugin = make(table)
    p = pod_info("new", labels={"tier": "licensed"})
    state = CycleState()
    plugin.pre_filter(state, p, table)
    ext = plugin.pre_filter_extensions()
    assert ext is not None
    hypothetical = state.clone()
    b1 = table.node_info(table.row_of("b1"))
    ext.add_pod(hypothetical, p, pod_info("other", labels={"tier": "licensed"}), b1)
    assert hypothetical.read(STATE_KEY).by_value["b"] == 2
    assert state.read(STATE_KEY).by_value["b"] == 1  # the original is untouched
    assert not plugin.filter(hypothetical, p, b1).is_success
    assert plugin.filter(state, p, b1).is_success
    ext.remove_pod(hypothetical, p, pod_info("other", labels={"tier": "licensed"}), b1)
    assert plugin.filter(hypothetical, p, b1).is_success


def test_events_cover_what_can_free_a_slot_and_nothing_else() -> None:
    events = make(zoned_table()).events_to_register()

    def interested(e: ClusterEvent) -> bool:
        return any(r.matches(e) for r in events)

    assert interested(EVENT_POD_DELETE)
    assert interested(EVENT_NODE_ADD)
    assert interested(ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL))
    assert not interested(ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT))
    assert not interested(ClusterEvent(NODE, ActionType.UPDATE_NODE_ALLOCATABLE))
