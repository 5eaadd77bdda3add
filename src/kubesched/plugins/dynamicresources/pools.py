"""The resource pools a node can allocate from, out of all ResourceSlices.

Port of k8s.io/dynamic-resource-allocation/structured/internal/stable/pools_stable.go (v0.37.1,
``GatherPools``, ``NodeMatches``, ``addSlice``, ``buildPool``, ``checkSlicesInPool``) without the
partitionable-devices half: slices with ``sharedCounters`` or ``perDeviceNodeSelection`` are left
out (the features they need are recorded, so a failed allocation can name them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.plugins.helpers.node_selector import compile_node_selector

#: Features of v1.37's DRA kubesched does not implement yet, by the name the messages use.
PARTITIONABLE = "partitionable devices (ResourceSlice sharedCounters, perDeviceNodeSelection, device consumesCounters)"
CONSUMABLE_CAPACITY = "consumable capacity (device allowMultipleAllocations, request capacity)"
DEVICE_TAINTS = "device taints (ResourceSlice device taints, DeviceTaintRules, request tolerations)"
ADMIN_ACCESS = "admin access (request adminAccess)"
BINDING_CONDITIONS = "binding conditions (device bindingConditions)"
EXTENDED_RESOURCES = "extended resources backed by DRA (DeviceClass extendedResourceName)"


class UnsupportedFeatureError(Exception):
    """A claim needs a DRA feature kubesched does not implement; the message names it."""


def unsupported_message(feature: str) -> str:
    return f"kubesched does not support {feature} yet"


@dataclass(frozen=True, slots=True)
class NodeRef:
    """The node an allocation is tried for: its name and how a raw v1.NodeSelector matches it."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, node_name: str, all_nodes: bool, node_selector: Any) -> bool:
        """NodeMatches: a node name, all nodes, or a node selector (nothing set: no node)."""
        if node_name:
            return self.name == node_name
        if all_nodes:
            return True
        if node_selector is not None:
            return compile_node_selector(node_selector).match_node(self.labels, self.name)
        return False


@dataclass(slots=True)
class Pool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    #: The slices of the newest generation that target the node.
    slices: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.pool}"


def slice_spec(s: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = s.get("spec") or {}
    return spec


def _pool_of(spec: Mapping[str, Any]) -> tuple[str, str, int, int]:
    pool = spec.get("pool") or {}
    return (str(spec.get("driver", "")), str(pool.get("name", "")), int(pool.get("generation") or 0),
            int(pool.get("resourceSliceCount") or 0))


def gather_pools(slices: Sequence[dict[str, Any]], node: NodeRef,
                 unsupported: Callable[[str], None]) -> list[Pool]:
    """GatherPools: the pools with slices for this node, newest generation only; a pool whose slices
    are not all published yet is incomplete, one with a duplicate device name invalid."""
    pools: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in slices:
        spec = slice_spec(s)
        if spec.get("sharedCounters") or spec.get("perDeviceNodeSelection") is not None:
            unsupported(PARTITIONABLE)
            continue
        node_name, all_nodes = str(spec.get("nodeName") or ""), bool(spec.get("allNodes"))
        selector = spec.get("nodeSelector")
        if not (node_name or all_nodes or selector is not None):
            continue
        if not node.matches(node_name, all_nodes, selector):
            continue
        driver, pool, generation, _ = _pool_of(spec)
        have = pools.get((driver, pool))
        if have is None or generation > _pool_of(slice_spec(have[0]))[2]:
            pools[(driver, pool)] = [s]
        elif generation == _pool_of(slice_spec(have[0]))[2]:
            have.append(s)
    result: list[Pool] = []
    for (driver, pool), members in pools.items():
        _, _, generation, count = _pool_of(slice_spec(members[0]))
        if len(members) != count:
            # Some slices of the pool do not target this node, or are not published yet.
            newer, same = False, 0
            for s in slices:
                d, p, g, _ = _pool_of(slice_spec(s))
                if (d, p) != (driver, pool):
                    continue
                newer |= g > generation
                same += g == generation
            if newer:
                continue  # obsolete: a newer generation exists elsewhere
            if same != count:
                result.append(Pool(driver, pool, incomplete=True))
                continue
        names: set[str] = set()
        duplicate = ""
        for s in members:
            for device in slice_spec(s).get("devices") or []:
                name = str(device.get("name", ""))
                if name in names and not duplicate:
                    duplicate = name
                names.add(name)
        if duplicate:
            result.append(Pool(driver, pool, invalid=True, invalid_reason=f"duplicate device name {duplicate}"))
            continue
        result.append(Pool(driver, pool, slices=members))
    return result
