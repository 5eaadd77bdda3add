"""kubesched.testing: the public builders and in-process harness for plugin authors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kubesched.config.errors import ConfigError
from kubesched.framework.explain import explain
from kubesched.framework.status import Code
from kubesched.plugins.node_name import NodeName
from kubesched.testing import (
    KWOK_ANNOTATION,
    framework_for,
    handle,
    kwok_node,
    new_plugin,
    node,
    pod,
    pod_info,
    pod_manifest,
    table_of,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from domain_cap import DomainCap  # noqa: E402

ZONE = "topology.kubernetes.io/zone"
ARGS = {"DomainCap": {"maxPods": 1, "podSelector": {"matchLabels": {"tier": "licensed"}}}}


def test_framework_for_runs_only_the_given_plugins_with_sort_and_binder() -> None:
    table = table_of(
        node("a1", labels={ZONE: "a"}),
        node("b1", labels={ZONE: "b"}),
        node("x1"),
        pods=[pod("l1", labels={"tier": "licensed"}, node_name="a1")],
    )
    fwk = framework_for([DomainCap], args=ARGS, table=table)
    assert list(fwk.plugins) == ["PrioritySort", "DomainCap", "DefaultBinder"]
    e = explain(fwk, pod_info("new", labels={"tier": "licensed"}))
    assert [n.node for n in e.feasible] == ["b1"]
    rejected = {n.node: n.first_rejection for n in e.rejected}
    assert rejected["a1"] is not None and rejected["a1"].code == Code.UNSCHEDULABLE
    assert rejected["x1"] is not None and rejected["x1"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_framework_for_with_default_plugins_and_bad_args() -> None:
    fwk = framework_for([DomainCap], args=ARGS, default_plugins=True)
    assert {"NodeResourcesFit", "TaintToleration", "DomainCap"} <= set(fwk.plugins)
    with pytest.raises(ConfigError, match="maxPods"):
        framework_for([DomainCap], args={"DomainCap": {"maxPods": "many"}})


def test_new_plugin_validates_raw_args_and_handle_defaults() -> None:
    table = table_of(node("n1"))
    plugin = new_plugin(DomainCap, {"maxPods": 3, "podSelector": {}}, table=table, profile_name="p")
    assert plugin.args.max_pods == 3 and plugin.handle.table is table and plugin.handle.profile_name == "p"
    assert new_plugin(NodeName).handle.table.alive_rows().size == 0
    assert handle().clock.now() == 0.0
    with pytest.raises(TypeError):
        new_plugin(NodeName, {"x": 1})


def test_api_builders() -> None:
    n = kwok_node("k1", cpu="4", labels={"a": "b"}, taints=[{"key": "k", "effect": "NoSchedule"}])
    assert n["metadata"]["annotations"][KWOK_ANNOTATION] == "fake"
    assert n["metadata"]["labels"] == {
        "kubernetes.io/hostname": "k1",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        "a": "b",
    }
    assert n["status"]["allocatable"] == {"cpu": "4", "memory": "256Gi", "pods": "110"}
    assert n["spec"] == {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    p = pod_manifest("p", "ns", requests={"cpu": "1"}, scheduler_name="s", ports=(80,), extra_spec={"priority": 5})
    assert "uid" not in p["metadata"] and p["spec"]["schedulerName"] == "s" and p["spec"]["priority"] == 5
    assert p["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]
    a, b = pod("x"), pod("x")
    assert a["metadata"]["uid"] != b["metadata"]["uid"]
    assert a["metadata"]["creationTimestamp"] < b["metadata"]["creationTimestamp"]
