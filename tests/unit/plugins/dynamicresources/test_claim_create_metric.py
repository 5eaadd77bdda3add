"""``dynamic_resource_allocation_resourceclaim_creates_total``: PreBind's creation of the claim for
DRA-backed extended resources, counted as upstream's createExtendedResourceClaimInAPI counts it
(extendeddynamicresources_test.go v1.37.1: extended-resource-name-with-resources counts one
``success``; extended-resource-name-with-node-resource none)."""

from __future__ import annotations

from kubesched.framework.plugin_metrics import CounterFamily
from unit.plugins.dynamicresources.test_extended import GPU, World, gpu_pod, mapped_class, run
from unit.plugins.dynamicresources.test_plugin import NODE, resource_slice

NAME = "dynamic_resource_allocation_resourceclaim_creates"


def creates(w: World) -> dict[tuple[str, ...], float]:
    found = [f for f in w.plugin.metric_families() if f.name == NAME]
    if not found:
        return {}  # not gathered before the first create, as upstream
    (family,) = found
    assert isinstance(family, CounterFamily)
    assert family.labels == ("status", "admin_access", "owner_api_group", "owner_api_kind")
    return dict(family.values)


def bind(w: World) -> bool:
    p = gpu_pod()
    state, _ = w.cycle(p)
    assert w.filter(state, p).is_success and w.plugin.reserve(state, p, NODE).is_success
    return bool(run(w.plugin.pre_bind(state, p, NODE)).is_success)


def test_a_created_claim_counts_one_success() -> None:
    w = World([mapped_class()], [resource_slice(NODE)])
    assert bind(w)
    assert creates(w) == {("success", "false", "", "Pod"): 1.0}


def test_a_refused_create_counts_one_failure() -> None:
    w = World([mapped_class()], [resource_slice(NODE)])
    w.api.fail_create = "claim creation errors"
    assert not bind(w)
    assert creates(w) == {("failure", "false", "", "Pod"): 1.0}


def test_a_device_plugin_resource_creates_nothing() -> None:
    w = World([mapped_class()], [resource_slice(NODE)], node_extra={GPU: "1"})
    assert bind(w)
    assert creates(w) == {}
