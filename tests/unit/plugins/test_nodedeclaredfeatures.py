"""NodeDeclaredFeatures (mirrors upstream nodedeclaredfeatures/nodedeclaredfeatures_test.go, with
the real v1.37.1 features of k8s.io/component-helpers/nodedeclaredfeatures in place of its mock
features) and the three features a pod spec can imply."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.backend.cache import node_update_action
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code
from kubesched.framework.types import ActionType
from kubesched.plugins.nodedeclaredfeatures import (
    ERR_REASON_UNSATISFIED_REQUIREMENTS,
    NodeDeclaredFeatures,
    infer_for_scheduling,
)
from kubesched.plugins.nodedeclaredfeatures.features import feature_names
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import framework_for, new_plugin, node, pod, table_of

RESTART_ALL = "RestartAllContainersOnContainerExits"
USERNS_HOSTNET = "UserNamespacesHostNetworkSupport"
BIND_MOUNT = "VolumeBindMountOptions"


def restart_all_pod(**kw: Any) -> dict[str, Any]:
    return pod(
        "p",
        containers=[{"name": "c", "image": "i", "restartPolicyRules": [{"action": "RestartAllContainers"}]}],
        **kw,
    )


def userns_hostnet_pod() -> dict[str, Any]:
    return pod("p", hostNetwork=True, hostUsers=False)


def declaring(name: str, *features: str) -> dict[str, Any]:
    raw = node(name)
    if features:
        raw["status"]["declaredFeatures"] = list(features)
    return raw


@pytest.mark.parametrize(
    ("spec", "required"),
    [
        ({}, []),
        (restart_all_pod()["spec"], [RESTART_ALL]),
        (
            {"initContainers": [{"name": "i", "restartPolicyRules": [{"action": "RestartAllContainers"}]}]},
            [RESTART_ALL],
        ),
        ({"containers": [{"name": "c", "restartPolicyRules": [{"action": "Restart"}]}]}, []),
        (userns_hostnet_pod()["spec"], [USERNS_HOSTNET]),
        ({"hostNetwork": True}, []),  # hostUsers unset: the host's user namespace
        ({"hostNetwork": True, "hostUsers": True}, []),
        ({"hostUsers": False}, []),
        ({"ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "v", "bindMountOptions": ["ro"]}]}]},
         [BIND_MOUNT]),
        ({"containers": [{"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": []}]}]}, []),
        (
            {
                "hostNetwork": True,
                "hostUsers": False,
                "containers": [{"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": ["x"]}]}],
            },
            [USERNS_HOSTNET, BIND_MOUNT],
        ),
    ],
)
def test_infer_for_scheduling(spec: dict[str, Any], required: list[str]) -> None:
    assert feature_names(infer_for_scheduling(spec)) == required


# -- PreFilter (TestPreFilter) ----------------------------------------------------------------------


def test_pre_filter_skips_a_pod_without_requirements() -> None:
    plugin = new_plugin(NodeDeclaredFeatures)
    _, st = plugin.pre_filter(CycleState(), PodInfo.from_raw(pod("p")), plugin.handle.table)
    assert st.code == Code.SKIP


def test_pre_filter_records_the_requirements() -> None:
    plugin = new_plugin(NodeDeclaredFeatures)
    result, st = plugin.pre_filter(CycleState(), PodInfo.from_raw(restart_all_pod()), plugin.handle.table)
    assert result is None and st.is_success


def test_requirements_are_inferred_once_per_pod_object() -> None:
    # Kept in the pod's memo: the spec of a PodInfo never changes (an update is a new PodInfo).
    plugin = new_plugin(NodeDeclaredFeatures)
    p = PodInfo.from_raw(restart_all_pod())
    plugin.pre_filter(CycleState(), p, plugin.handle.table)
    p.raw["spec"] = {}  # never done by the shells: shows the second attempt reads the memo
    _, st = plugin.pre_filter(CycleState(), p, plugin.handle.table)
    assert st.is_success
    _, st = plugin.pre_filter(CycleState(), PodInfo.from_raw(pod("p")), plugin.handle.table)
    assert st.code == Code.SKIP


# -- Filter (TestFilter) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw_pod", "declared", "passes"),
    [
        # Node matches requirements
        (restart_all_pod(), (RESTART_ALL, USERNS_HOSTNET), True),
        # Node does not match requirements
        (restart_all_pod(), (USERNS_HOSTNET,), False),
        # Node has no declared features
        (restart_all_pod(), (), False),
        # Unknown declared names are ignored (TryMap)
        (restart_all_pod(), ("SomethingNewer", RESTART_ALL), True),
        # Node with some but not all required features
        (pod("p", hostNetwork=True, hostUsers=False, containers=[
            {"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": ["ro"]}]}]), (USERNS_HOSTNET,), False),
        # Node with multiple features, pod requires a subset
        (userns_hostnet_pod(), (RESTART_ALL, USERNS_HOSTNET, BIND_MOUNT), True),
    ],
)
def test_filter(raw_pod: dict[str, Any], declared: tuple[str, ...], passes: bool) -> None:
    table = table_of(declaring("n1", *declared))
    plugin = new_plugin(NodeDeclaredFeatures, table=table)
    state = CycleState()
    p = PodInfo.from_raw(raw_pod)
    _, st = plugin.pre_filter(state, p, table)
    assert st.is_success
    verdicts = plugin.filter_batch(state, p, table, table.alive_rows())
    if passes:
        assert not verdicts.codes.any()
    else:
        (status,) = verdicts.statuses
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.message == ERR_REASON_UNSATISFIED_REQUIREMENTS == "node(s) didn't match Pod's required features"


def test_filter_without_pre_filter_state_is_an_error() -> None:
    table = table_of(declaring("n1"))
    plugin = new_plugin(NodeDeclaredFeatures, table=table)
    verdicts = plugin.filter_batch(CycleState(), PodInfo.from_raw(pod("p")), table, table.alive_rows())
    (status,) = verdicts.statuses
    assert status.code == Code.ERROR
    assert status.message == 'error reading "PreFilterNodeDeclaredFeatures" from cycle-state: not found'


def test_declared_features_follow_node_updates() -> None:
    table = table_of(declaring("n1"))
    plugin = new_plugin(NodeDeclaredFeatures, table=table)
    p = PodInfo.from_raw(restart_all_pod())
    state = CycleState()
    plugin.pre_filter(state, p, table)
    assert plugin.filter_batch(state, p, table, table.alive_rows()).codes.tolist() == [1]
    table.upsert_node(declaring("n1", RESTART_ALL))
    assert plugin.filter_batch(state, p, table, table.alive_rows()).codes.tolist() == [0]


# -- events (TestEnqueueExtensionsNodeUpdate) -------------------------------------------------------


def test_a_change_of_declared_features_is_a_node_update_event_it_registered() -> None:
    plugin = new_plugin(NodeDeclaredFeatures)
    (registered,) = plugin.events_to_register()
    changed = node_update_action(declaring("n1"), declaring("n1", "FeatureA"))
    assert changed == ActionType.UPDATE_NODE_DECLARED_FEATURE
    assert registered.action & changed
    assert not node_update_action(declaring("n1", "FeatureA"), declaring("n1", "FeatureA"))
    assert registered.action & ActionType.ADD


def test_in_the_default_profile_at_pre_filter_and_filter_last() -> None:
    fwk = framework_for(default_plugins=True)
    assert fwk.pre_filter[-1].name == "NodeDeclaredFeatures"
    assert fwk.filter[-1].name == "NodeDeclaredFeatures"
