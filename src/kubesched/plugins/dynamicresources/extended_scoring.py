"""How many devices back a DRA extended resource on a node, and how many are allocated: what
NodeResourcesFit and NodeResourcesBalancedAllocation score such a resource with where the node's
allocatable lacks it.

Port of pkg/scheduler/framework/plugins/noderesources/resource_allocation.go (v1.37.1:
``getDRAPreScoredParams``, ``calculateDRAExtendedResourceAllocatableRequest``,
``calculateDRAResourceTotals``, ``deviceMatchesClass``). Upstream keeps that code in the
noderesources package and reads the DRA manager; here it lives beside the allocator (its slice
index, selector cache and CEL library) and NodeResourcesFit reads it through the handle's
``dra_manager`` (manager.py; framework/handle.py ``SharedDRAManager``), so that NodeResourcesFit
imports no CEL.

Every device of the class on the node counts, whatever its pool's completeness, taints or binding
conditions, and each device counts once, as upstream: a device shared by several claims (consumable
capacity) is one allocated device. A selector that does not compile or fails on a device makes the
resource count nothing on that node (upstream logs the error and returns 0, 0). Difference: the
selector results are kept per ResourceSlice version (selector_cache.py), where upstream's cache is
keyed by expression, driver, pool and device name only (a device whose attributes change keeps its
old answer there).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.plugins.dynamicresources.capacity import AllocatedState
from kubesched.plugins.dynamicresources.cel import CelError, compile_selector, device_variable
from kubesched.plugins.dynamicresources.pools import NodeRef, slice_spec
from kubesched.plugins.dynamicresources.selector_cache import SelectorCache
from kubesched.plugins.dynamicresources.slice_index import SliceIndex
from kubesched.plugins.helpers.device_classes import is_dra_extended_resource_name

log = logging.getLogger(__name__)


class ExtendedResourceCounter:
    """The devices behind DRA extended resources as of one PreScore (``draPreScoreState``)."""

    def __init__(self, resolver: Mapping[str, dict[str, Any]], allocated: AllocatedState, slices: SliceIndex,
                 selector_cache: SelectorCache) -> None:
        self._resolver = resolver
        self._allocated = allocated
        self._slices = slices
        self._selector_cache = selector_cache

    @classmethod
    def for_resources(cls, resources: Sequence[str], resolver: Mapping[str, dict[str, Any]],
                      allocated: AllocatedState, slices: SliceIndex, selector_cache: SelectorCache
                      ) -> ExtendedResourceCounter | None:
        """getDRAPreScoredParams: None when no DeviceClass backs any of ``resources``."""
        if not any(is_dra_extended_resource_name(r) and r in resolver for r in resources):
            return None
        return cls(resolver, allocated, slices, selector_cache)

    def backs(self, resource: str) -> bool:
        return resource in self._resolver

    def totals(self, resource: str, node_name: str, labels: Mapping[str, str]) -> tuple[int, int]:
        """calculateDRAResourceTotals: (devices of the resource's class on the node, allocated ones)."""
        device_class = self._resolver.get(resource)
        if device_class is None:
            return 0, 0
        node = NodeRef(node_name, labels)
        selectors = [str(((s or {}).get("cel") or {}).get("expression", ""))
                     for s in (device_class.get("spec") or {}).get("selectors") or [] if (s or {}).get("cel")]
        capacity = allocated = 0
        for slice_ in self._slices.for_node(node_name):
            spec = slice_spec(slice_)
            driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
            for device in _devices_on(node, spec):
                name = str(device.get("name", ""))
                try:
                    if not self._matches(selectors, slice_, driver, name, device):
                        continue
                except CelError as e:
                    log.warning("node %s, resource %s, device class %s: %s", node_name, resource,
                                (device_class.get("metadata") or {}).get("name"), e)
                    return 0, 0
                capacity += 1
                if (driver, pool, name) in self._allocated:
                    allocated += 1
        return capacity, allocated

    def _matches(self, selectors: Sequence[str], slice_: Mapping[str, Any], driver: str, name: str,
                 device: Mapping[str, Any]) -> bool:
        """deviceMatchesClass: every CEL selector of the class matches the device."""
        for expression in selectors:
            compiled = compile_selector(expression)
            if compiled.error is not None:
                raise CelError(f"CEL compile error: {compiled.error}")
            if not self._selector_cache.matches(compiled, slice_, name, lambda: device_variable(driver, device)):
                return False
        return True


def _devices_on(node: NodeRef, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The slice's devices for this node: per device with ``perDeviceNodeSelection``, else all of
    them when the slice is for the node (upstream's fast and slow paths: a slice naming no node at
    all counts for every node, as there)."""
    devices: list[dict[str, Any]] = spec.get("devices") or []
    if spec.get("perDeviceNodeSelection"):
        return [d for d in devices
                if node.matches(str(d.get("nodeName") or ""), bool(d.get("allNodes")), d.get("nodeSelector"))]
    node_name, all_nodes = str(spec.get("nodeName") or ""), bool(spec.get("allNodes"))
    selector = spec.get("nodeSelector")
    restricted = not all_nodes and node_name != node.name and (selector is not None or bool(node_name))
    if restricted and not node.matches(node_name, all_nodes, selector):
        return []
    return devices
