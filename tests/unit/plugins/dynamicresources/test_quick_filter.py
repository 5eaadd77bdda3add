"""Filter's quick answer for simple claims (quick_filter.py): the same verdicts, messages and devices
as the trial allocation, over many nodes in one call."""

from __future__ import annotations

import numpy as np

from kubesched.framework.status import Code
from unit.plugins.dynamicresources.test_plugin import (
    CLAIM,
    DRIVER,
    NODE,
    NODE2,
    Cycle,
    World,
    allocated,
    allocation,
    claim,
    claim_pod,
    device_class,
    resource_slice,
)


def _rows(w: World) -> np.ndarray:  # type: ignore[type-arg]
    return np.array([w.table.index[NODE], w.table.index[NODE2]], dtype=np.intp)


def test_full_node_is_refused_and_the_pod_gets_the_first_free_device_of_the_other() -> None:
    """worker's one device is held by another claim; worker-2 has three, the first held: the batch
    refuses worker as the search would, and the pod's claim gets instance-2 on worker-2 (the
    first free device in the slice's order), chosen by the search in Reserve."""
    held_elsewhere = allocated(claim("other", owner="uid-other"), allocation(NODE, "instance-1"))
    held_on_two = allocated(claim("other-2", owner="uid-other-2"), allocation(NODE2, "instance-1"))
    w = World([claim(), held_elsewhere, held_on_two], [device_class()],
              [resource_slice(NODE), resource_slice(NODE2, "instance-1", "instance-2", "instance-3")],
              nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    verdicts = w.plugin.filter_batch(c.state, c.pod, w.table, _rows(w))
    assert verdicts.codes.tolist()[1] == 0
    refused = verdicts.statuses[int(verdicts.codes[0]) - 1]
    assert (refused.code, refused.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("cannot allocate all claims",))
    assert c.reserve(NODE2).is_success and c.pre_bind(NODE2).is_success
    results = w.api.stored[f"default/{CLAIM}"]["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [(DRIVER, NODE2, "instance-2")]


def test_a_tainted_device_is_left_to_the_search() -> None:
    """A device with a NoSchedule taint is not plain: the search decides, and refuses the node as
    upstream does, while the untainted node is let through."""
    tainted = resource_slice(NODE)
    tainted["spec"]["devices"][0]["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    w = World([claim()], [device_class()], [tainted, resource_slice(NODE2)], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    verdicts = w.plugin.filter_batch(c.state, c.pod, w.table, _rows(w))
    assert verdicts.codes.tolist()[1] == 0
    refused = verdicts.statuses[int(verdicts.codes[0]) - 1]
    assert refused.reasons == ("cannot allocate all claims",)
