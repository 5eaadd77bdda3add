"""Device taints: which tainted devices a request may get, and DeviceTaintRules applied to slices.

Ports k8s.io/dynamic-resource-allocation v0.37.1:

* ``taintPreventsAllocation``/``taintTolerated`` (structured/internal/incubating/allocator_incubating.go,
  the same in stable): a ``NoSchedule`` or ``NoExecute`` taint not tolerated by the request keeps the
  device from being allocated; other effects (``None``, unknown ones) do not;
* ``ToleratesTaint`` (resourceclaim/devicetoleration.go);
* the ResourceSlice tracker's ``applyPatches`` (resourceslice/tracker/tracker.go): the scheduler sees a
  slice's devices with the taints of every DeviceTaintRule whose selector names their driver, pool
  and device (a field left out matches any; a rule without a selector matches no device).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Effects that keep a device from being allocated (resourceapi.DeviceTaintEffectNoSchedule/NoExecute).
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerates_taint(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """ToleratesTaint: effect and key match when set; ``Equal`` (or empty) compares the value,
    ``Exists`` matches any value, any other operator none."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def taint_prevents_allocation(device: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """taintPreventsAllocation: a NoSchedule/NoExecute taint none of the request's tolerations tolerates."""
    for taint in device.get("taints") or ():
        if taint.get("effect") in _BLOCKING_EFFECTS and not any(tolerates_taint(t, taint) for t in tolerations):
            return True
    return False


def apply_taint_rules(slices: Sequence[dict[str, Any]], rules: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The slices as the scheduler sees them: each device with the taints of the DeviceTaintRules
    that select it appended, in rule order (a slice no rule touches is returned as is)."""
    if not rules:
        return list(slices)
    patched_slices: list[dict[str, Any]] = []
    for s in slices:
        spec = s.get("spec") or {}
        devices = spec.get("devices") or []
        new_devices: list[dict[str, Any]] | None = None
        for rule in rules:
            rule_spec = rule.get("spec") or {}
            selector = rule_spec.get("deviceSelector")
            if not selector:
                continue  # no selector matches no devices
            if selector.get("driver") is not None and selector["driver"] != spec.get("driver"):
                continue
            if selector.get("pool") is not None and selector["pool"] != (spec.get("pool") or {}).get("name"):
                continue
            for i, device in enumerate(devices):
                if selector.get("device") is not None and selector["device"] != device.get("name"):
                    continue
                if new_devices is None:
                    new_devices = [dict(d) for d in devices]
                new_devices[i]["taints"] = [*(new_devices[i].get("taints") or []), rule_spec.get("taint") or {}]
        if new_devices is None:
            patched_slices.append(s)
        else:
            patched_slices.append({**s, "spec": {**spec, "devices": new_devices}})
    return patched_slices
