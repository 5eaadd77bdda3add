"""What ``--explain`` shows of DynamicResources per node (never on the scheduling path).

Upstream's reason is one line, ``cannot allocate all claims``, for any node without room; this
note says what the plugin saw there: the devices the pod got on a node that fits, and on the
others each device of the node's pools — in use (allocated, or in flight for another pod), or
the first selector that excluded it for each request (the DeviceClass's or the claim's, by
index, as the error messages count them). Selector answers come from the plugin's selector
cache, so explaining evaluates nothing the Filter did not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.plugins.dynamicresources.allocator import Allocator
from kubesched.plugins.dynamicresources.cel import CelError, compile_selector, device_variable
from kubesched.plugins.dynamicresources.pools import NodeRef, gather_pools, slice_spec
from kubesched.plugins.dynamicresources.requests import claim_ref, claim_requests

#: Devices listed per node before the rest are counted.
MAX_DEVICES = 8


def node_note(allocator: Allocator, node: NodeRef, claims: Sequence[Mapping[str, Any]],
              allocations: Sequence[Mapping[str, Any]] | None) -> str:
    """One line for one node: the devices allocated there, or why each device was not usable."""
    if allocations is not None:
        got = [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')} for {claim_ref(c)} request {r.get('request')}"
               for c, a in zip(claims, allocations, strict=False)
               for r in (a.get("devices") or {}).get("results") or []]
        return "allocates " + ", ".join(got) if got else ""
    lines: list[str] = []
    total = listed = 0
    for pool in gather_pools(allocator.slices, node):
        if pool.incomplete or pool.invalid:
            lines.append(f"pool {pool.pool_id} {'incomplete' if pool.incomplete else pool.invalid_reason}")
            continue
        for s in pool.slices:
            for device in slice_spec(s).get("devices") or []:
                total += 1
                if listed < MAX_DEVICES:
                    listed += 1
                    lines.append(_device_line(allocator, pool.driver, pool.pool, s, device, claims))
    if not lines:
        return "no devices on this node"
    return "; ".join(lines) + (f"; {total - listed} more devices" if total > listed else "")


def _device_line(allocator: Allocator, driver: str, pool: str, slice_: Mapping[str, Any],
                 device: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> str:
    name = str(device.get("name", ""))
    if (driver, pool, name) in allocator.allocated:
        return f"{name}: in use"
    verdicts: list[str] = []
    for claim in claims:
        for alternatives in claim_requests(claim):
            for req in alternatives:
                cls = allocator.classes.get(req.class_name) or {}
                why = (_excluded_by(allocator, slice_, driver, device, (cls.get("spec") or {}).get("selectors") or [],
                                    f"class {req.class_name}")
                       or _excluded_by(allocator, slice_, driver, device, req.selectors, "claim"))
                verdicts.append(f"request {req.full_name} {why}" if why else f"request {req.full_name} matches")
    return f"{name}: " + ", ".join(verdicts)


def _excluded_by(allocator: Allocator, slice_: Mapping[str, Any], driver: str, device: Mapping[str, Any],
                 selectors: Sequence[Any], owner: str) -> str:
    for i, sel in enumerate(selectors):
        compiled = compile_selector(str(((sel or {}).get("cel") or {}).get("expression", "")))
        if compiled.error is not None:
            return f"{owner} selector #{i}: {compiled.error}"
        try:
            if not allocator.selector_cache.matches(compiled, slice_, str(device.get("name", "")),
                                                    lambda: device_variable(driver, device)):
                return f"excluded by {owner} selector #{i}"
        except CelError as e:
            return f"{owner} selector #{i}: CEL runtime error: {e}"
    return ""
