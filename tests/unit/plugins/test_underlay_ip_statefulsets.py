"""UnderlayIP's ``statefulSetKeepDuration``: a StatefulSet's pods keep their addresses per ns/name
without an UnderlayIPClaim (galaxy-ipam's release policy, BlueKing v3's fixed IP with keepDuration),
through deletion, a restart of the scheduler, and until the keep ends."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from tests.unit.plugins.test_underlay_ip import ip_pod
from tests.unit.plugins.test_underlay_ip_pools import World, claim_obj, pool_obj

from kubesched.framework.clock import FakeClock
from kubesched.plugins.underlay_ip import UnderlayIPArgs
from kubesched.plugins.underlay_ip.kinds import CLAIM, POOL

KEEP = {"statefulSetKeepDuration": "10m"}


def owned(name: str, kind: str = "StatefulSet", owner: str = "web") -> dict[str, Any]:
    raw = ip_pod(name)
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner,
                                           "uid": f"uid-{owner}", "controller": True}]
    return raw


def test_a_statefulset_pod_returns_to_its_address_while_a_replicaset_pod_does_not() -> None:
    w = World(["n1", "n2"], [pool_obj("rack", "10.20.0.0/29", ["n1", "n2"])], KEEP)
    w.add(owned("web-0"), owned("api-x1", "ReplicaSet", "api"))
    w.schedule()
    assert w.addresses() == {"web-0": "10.20.0.1", "api-x1": "10.20.0.2"}
    w.delete("web-0")
    w.delete("api-x1")
    w.clock.advance(1)
    w.add(ip_pod("other"))  # web-0's .1 is kept for it; the ReplicaSet pod's .2 is free again
    w.schedule()
    assert w.addresses() == {"other": "10.20.0.2"}
    w.add(owned("web-0"))
    w.clock.advance(1)
    w.schedule()
    assert w.addresses()["web-0"] == "10.20.0.1"
    status = w.plugin.reports.pool_status()["rack"]
    assert status["allocations"]["10.20.0.1"] == {"state": "Active", "pod": "default/web-0", "node":
                                                  w.by_name("web-0").node_name, "claim": "default/web-0",
                                                  "statefulSet": "web"}
    assert not w.cluster.objects.get(CLAIM)  # no claim object was needed (or created)


def test_the_address_is_free_once_the_keep_ends_and_the_pod_then_takes_a_new_one_without_error() -> None:
    w = World(["n1"], [pool_obj("rack", "10.21.0.0/29", ["n1"])], KEEP)
    w.add(owned("db-0", owner="db"))
    w.schedule()
    w.delete("db-0")
    w.clock.advance(599)
    w.add(ip_pod("x"))
    w.schedule()
    assert w.addresses() == {"x": "10.21.0.2"}  # .1 kept for db-0 for 10 minutes
    w.clock.advance(2)
    w.add(ip_pod("y"))
    w.schedule()
    assert w.addresses()["y"] == "10.21.0.1"  # the keep ended: back in the pool
    w.add(owned("db-0", owner="db"))
    w.schedule()
    assert w.addresses()["db-0"] == "10.21.0.3"  # a new address, not "expired" as a declared claim
    assert "db-0" not in w.failures


def test_without_the_arg_a_statefulset_pod_keeps_nothing() -> None:
    w = World(["n1"], [pool_obj("rack", "10.22.0.0/29", ["n1"])])
    w.add(owned("web-0"))
    w.schedule()
    w.delete("web-0")
    w.add(ip_pod("other"))
    w.clock.advance(1)
    w.schedule()
    assert w.addresses() == {"other": "10.22.0.1"}


def test_a_declared_claim_of_the_same_name_wins() -> None:
    w = World(["n1", "n2"], [pool_obj("a", "10.23.0.0/30", ["n1"]), pool_obj("b", "10.24.0.0/30", ["n2"])], KEEP)
    w.cluster.add_object(CLAIM, "default/web-0", claim_obj("web-0", pool="b", address="10.24.0.2"))
    w.add(owned("web-0"))
    w.schedule()
    assert w.addresses() == {"web-0": "10.24.0.2"}
    assert "statefulSet" not in w.plugin.reports.pool_status()["b"]["allocations"]["10.24.0.2"]


def test_a_restarted_scheduler_keeps_a_statefulset_pods_address_from_the_pool_status() -> None:
    w = World(["n1"], [pool_obj("rack", "10.25.0.0/29", ["n1"])], KEEP)
    w.add(owned("web-0"), owned("web-1"))
    w.schedule()
    first = w.addresses()
    w.delete("web-0")
    w.publish_status()
    entry = w.cluster.objects[POOL]["rack"]["status"]["allocations"][first["web-0"]]
    assert entry["state"] == "Reserved" and entry["statefulSet"] == "web" and "keepUntil" in entry
    # A new scheduler on the same cluster: web-0's address is still kept for it, web-1 keeps its own.
    w2 = World([], [], KEEP, clock=FakeClock(w.clock.now()), cluster=w.cluster)
    w2.add(ip_pod("other"))
    w2.schedule()
    assert w2.addresses()["other"] not in (first["web-0"], first["web-1"])
    w2.add(owned("web-0"))
    w2.schedule()
    assert w2.addresses()["web-0"] == first["web-0"]


def test_the_keep_duration_is_checked() -> None:
    for bad, message in (("0", "must be more than 0"), ("ten minutes", "invalid duration 'ten minutes'")):
        with pytest.raises(ValidationError, match=message):
            UnderlayIPArgs.model_validate({"statefulSetKeepDuration": bad})
    assert UnderlayIPArgs.model_validate(KEEP).stateful_set_keep_seconds == 600.0
