"""Consumable capacity: a device with ``allowMultipleAllocations`` shared by several claims, each
consuming part of its capacity (DRAConsumableCapacity, beta and on in v1.37).

Port of k8s.io/dynamic-resource-allocation/structured/internal/incubating/consumable_capacity.go
(v0.37.1: ``CmpRequestOverCapacity``, ``calculateConsumedCapacity``, ``fillEmptyRequest``,
``roundUpRange``, ``roundUpValidValues``, ``violatesPolicy``) and internal/allocatedstate.go
(``AllocatedState``: dedicated devices, shared allocations and the capacity they consume).
Quantities are exact fractions, so upstream's int64/milli overflow guards have nothing to guard
(FractionalCapacityRange is beta and on: a range's step may be fractional).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import QuantityError, parse_quantity

DeviceID = tuple[str, str, str]  # driver, pool, device
Capacity = dict[str, Fraction]


class CapacityError(ValueError):
    """A request the device's capacity cannot be computed for (upstream's error text)."""


@dataclass(slots=True)
class AllocatedState:
    """What claims already hold: devices given whole (admin access excluded), devices shared
    (a result with a ``shareID``) and the capacity their shares consume."""

    devices: set[DeviceID] = field(default_factory=set)
    shared: set[DeviceID] = field(default_factory=set)
    consumed: dict[DeviceID, Capacity] = field(default_factory=dict)

    def __ior__(self, other: AllocatedState) -> AllocatedState:
        self.devices |= other.devices
        self.shared |= other.shared
        for device, capacity in other.consumed.items():
            add_capacity(self.consumed.setdefault(device, {}), capacity)
        return self

    def __contains__(self, device: object) -> bool:
        """IsDeviceAllocated: given whole or shared."""
        return device in self.devices or device in self.shared

    def add_result(self, result: Mapping[str, Any]) -> None:
        """foreachAllocatedDevice for one DeviceRequestAllocationResult."""
        if result.get("adminAccess") is True:
            return  # not considered as allocated
        device = (str(result.get("driver", "")), str(result.get("pool", "")), str(result.get("device", "")))
        if result.get("shareID"):
            self.shared.add(device)
            consumed = result.get("consumedCapacity")
            if consumed:
                add_capacity(self.consumed.setdefault(device, {}),
                             {k: quantity(v, f"device {'/'.join(device)}, consumedCapacity {k}")
                              for k, v in consumed.items()})
            return
        self.devices.add(device)


def add_capacity(into: Capacity, other: Mapping[str, Fraction], sign: int = 1) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + sign * value


def quantity(raw: Any, where: str) -> Fraction:
    try:
        return parse_quantity(raw if isinstance(raw, (str, int, float)) else str(raw), from_json=True)
    except (QuantityError, ValueError) as e:
        raise CapacityError(f"{where}: invalid quantity {raw!r}: {e}") from None


def _policy_values(policy: Mapping[str, Any], where: str) -> tuple[Fraction | None, Mapping[str, Fraction],
                                                                   list[Fraction]]:
    default = policy.get("default")
    valid_range = {k: quantity(v, f"{where}, validRange.{k}")
                   for k, v in (policy.get("validRange") or {}).items() if v is not None}
    valid_values = [quantity(v, f"{where}, validValues") for v in policy.get("validValues") or []]
    return (None if default is None else quantity(default, f"{where}, default")), valid_range, valid_values


def consumed_capacity(requests: Mapping[str, Fraction] | None, device: Mapping[str, Any]) -> Capacity:
    """GetConsumedCapacityFromRequest: per capacity of the device, what the request consumes (its
    request rounded up as the policy says, or the policy's default, or all of it)."""
    out: Capacity = {}
    for name, cap in (device.get("capacity") or {}).items():
        where = f"capacity {name!r}"
        policy = cap.get("requestPolicy")
        requested = (requests or {}).get(name)
        if requested is None:
            # fillEmptyRequest
            if policy and policy.get("default") is not None:
                out[name] = quantity(policy["default"], f"{where}, default")
            else:
                out[name] = quantity(cap.get("value"), where)
            continue
        if not policy:
            out[name] = requested
            continue
        _, valid_range, valid_values = _policy_values(policy, where)
        if policy.get("validRange") is not None and "min" in valid_range:
            out[name] = _round_up_range(requested, valid_range)
        elif policy.get("validValues") is not None:
            out[name] = next((v for v in valid_values if requested <= v), requested)
        else:
            out[name] = requested
    return out


def _round_up_range(requested: Fraction, valid_range: Mapping[str, Fraction]) -> Fraction:
    """roundUpRange: at least the minimum, then up to the next step above it."""
    low = valid_range["min"]
    if requested < low:
        return low
    step = valid_range.get("step")
    if step is None or step <= 0:
        return requested
    steps = -((low - requested) // step)  # ceil((requested - min) / step)
    return low + step * steps


def _violates_policy(value: Fraction, policy: Mapping[str, Any] | None, where: str) -> bool:
    """violatesPolicy: the default is always fine; else above the range's max or off its steps, or
    not one of the valid values."""
    if not policy:
        return False
    default, valid_range, valid_values = _policy_values(policy, where)
    if default is not None and value == default:
        return False
    if policy.get("validRange") is not None:
        if "max" in valid_range and value > valid_range["max"]:
            return True
        step = valid_range.get("step")
        if step is not None and step > 0:
            return (value - valid_range.get("min", Fraction(0))) % step != 0
        return False
    if valid_values:
        return value not in valid_values
    return False


def fits(requests: Mapping[str, Fraction] | None, device: Mapping[str, Any],
         consumed: Iterable[Mapping[str, Fraction]]) -> bool:
    """CmpRequestOverCapacity: the request names only capacities the device has, what it would
    consume respects each capacity's request policy, and with what is already consumed (allocated
    shares, and shares picked in this search) stays within each capacity's value. Raises
    CapacityError for a negative consumption."""
    capacities = device.get("capacity") or {}
    if requests and any(name not in capacities for name in requests):
        return False
    wanted = consumed_capacity(requests, device)
    for name, value in wanted.items():
        if value < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
    used: Capacity = {}
    for c in consumed:
        add_capacity(used, c)
    for name, cap in capacities.items():
        where = f"capacity {name!r}"
        if _violates_policy(wanted[name], cap.get("requestPolicy"), where):
            return False
        if used.get(name, Fraction(0)) + wanted[name] > quantity(cap.get("value"), where):
            return False
    return True


def format_quantity(value: Fraction) -> str:
    """A quantity's text for an allocation result: binary suffixes for whole multiples of 1024,
    else the integer, else milli, micro or nano units (the apiserver stores it canonicalised)."""
    if value.denominator == 1:
        n = value.numerator
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20),
                               ("Ki", 2**10)):
            if n and n % factor == 0:
                return f"{n // factor}{suffix}"
        return str(n)
    for suffix, factor in (("m", 1000), ("u", 10**6)):
        scaled = value * factor
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{-((-value * 10**9) // 1)}n"  # parse_quantity already rounded up to nano


def share_id(claim_uid: str, request: str, device: DeviceID, index: int) -> str:
    """A result's shareID: upstream draws a random UUID; kubesched derives one from the claim, the
    request, the device and the result's index, so a simulation is reproducible and two shares of
    one device never collide."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{claim_uid}/{request}/{'/'.join(device)}/{index}"))
