"""The GPU cluster of issue 27, as API objects: 4 nodes, 5 GPUs in ResourceSlices of driver
``gpu.example.com`` (two A100 40Gi on node 1, an L4 24Gi on node 2, a T4 16Gi on nodes 3 and 4), one
DeviceClass, and 9 pods with claims, created in two waves:

1. ``a100-0``, ``a100-1``: a claim each for one A100 — both land on node 1 (its two A100s);
2. ``big-mem`` (``device.capacity[...].memory.compareTo(quantity("20Gi")) >= 0``: only the L4 is
   left), ``shared-a`` and ``shared-b`` (one claim, one T4: both on the T4's node), ``t4`` (from a
   ResourceClaimTemplate when templates are used: the other T4), and three that stay pending:
   ``three-gpus`` (3 GPUs on one node, which no node has), ``a100-late`` (no A100 left),
   ``no-class`` (a DeviceClass that does not exist).

The second wave is deterministic whatever order a scheduler takes it in. Used by the simulator test
(tests/unit/plugins/dynamicresources/test_simulate.py) and the differential test on the real control
plane (tests/integration/test_differential_dra.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
MISSING_CLASS = "no-such-gpu-class"
A100 = f'device.attributes["{DRIVER}"].model == "A100"'
T4 = f'device.attributes["{DRIVER}"].model == "T4"'
MEMORY = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("20Gi")) >= 0'

#: node index (1-based) -> its GPUs (name, model, memory)
GPUS = {1: [("gpu-0", "A100", "40Gi"), ("gpu-1", "A100", "40Gi")], 2: [("gpu-0", "L4", "24Gi")],
        3: [("gpu-0", "T4", "16Gi")], 4: [("gpu-0", "T4", "16Gi")]}


@dataclass(frozen=True)
class ClaimSpec:
    name: str
    count: int = 1
    selector: str | None = None
    device_class: str = CLASS


@dataclass(frozen=True)
class PodSpec:
    name: str
    claim: str
    wave: int
    #: The claim comes from a ResourceClaimTemplate of this name (kube-controller-manager creates it).
    template: bool = False


CLAIMS = [ClaimSpec("a100-0", selector=A100), ClaimSpec("a100-1", selector=A100), ClaimSpec("big-mem", selector=MEMORY),
          ClaimSpec("shared", selector=T4), ClaimSpec("t4", selector=T4), ClaimSpec("three-gpus", count=3),
          ClaimSpec("a100-late", selector=A100), ClaimSpec("no-class", device_class=MISSING_CLASS)]
PODS = [PodSpec("a100-0", "a100-0", 1), PodSpec("a100-1", "a100-1", 1), PodSpec("big-mem", "big-mem", 2),
        PodSpec("shared-a", "shared", 2), PodSpec("shared-b", "shared", 2), PodSpec("t4", "t4", 2, template=True),
        PodSpec("three-gpus", "three-gpus", 2), PodSpec("a100-late", "a100-late", 2),
        PodSpec("no-class", "no-class", 2)]
BOUND = {"a100-0", "a100-1", "big-mem", "shared-a", "shared-b", "t4"}
PENDING = {"three-gpus", "a100-late", "no-class"}


def resource_slice(node_name: str, index: int, prefix: str = "") -> dict[str, Any]:
    devices = [{"name": name, "attributes": {"model": {"string": model}}, "capacity": {"memory": {"value": memory}}}
               for name, model, memory in GPUS[index]]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{prefix}{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def device_class(name: str = CLASS) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def claim_spec(c: ClaimSpec) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": c.device_class, "allocationMode": "ExactCount", "count": c.count}
    if c.selector:
        exactly["selectors"] = [{"cel": {"expression": c.selector}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def resource_claim(c: ClaimSpec, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": c.name, "namespace": namespace}, "spec": claim_spec(c)}


def claim_template(c: ClaimSpec, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": c.name, "namespace": namespace}, "spec": {"spec": claim_spec(c)}}


def pod_claim_fields(p: PodSpec, templates: bool) -> dict[str, Any]:
    """The pod spec fields that use the claim: ``resourceClaims`` and the container's ``claims``."""
    source = ({"resourceClaimTemplateName": p.claim} if p.template and templates
              else {"resourceClaimName": p.claim})
    return {"resourceClaims": [{"name": "gpu", **source}]}

