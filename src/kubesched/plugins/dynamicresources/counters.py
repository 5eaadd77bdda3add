"""Partitionable devices: the shared counters a device consumes, so MIG slices of one GPU never
over-commit it.

Port of ``checkAvailableCounters`` and ``deallocateCountersForDevice``
(k8s.io/dynamic-resource-allocation/structured/internal/incubating/allocator_incubating.go, v0.37.1):
a pool's available counters are its counter sets less what its already allocated devices consume
(computed once per pool and allocator); a device is allocatable while, with what this search has
picked so far, no counter of the pool is consumed beyond what is available.
"""

from __future__ import annotations

from collections.abc import Container
from fractions import Fraction

from kubesched.plugins.dynamicresources.pools import CounterSets, Pool, slice_spec

DeviceID = tuple[str, str, str]  # driver, pool, device
PoolKey = tuple[str, str]  # driver, pool


def available_counters(pool: Pool, allocated: Container[DeviceID]) -> CounterSets:
    """The pool's counter sets less the consumption of its allocated devices (whether their
    slices target this node or not)."""
    available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
    for s in [*pool.slices, *pool.slices_not_targeting_node]:
        for device in slice_spec(s).get("devices") or []:
            name = str(device.get("name", ""))
            if (pool.driver, pool.pool, name) not in allocated:
                continue
            for (set_name, counter), value in pool.consumption.get(name, {}).items():
                counters = available.get(set_name)
                if counters is not None and counter in counters:
                    counters[counter] -= value
    return available


class CounterLedger:
    """The counters consumed by the devices one search has picked (upstream ``consumedCounters``)."""

    def __init__(self, available: dict[PoolKey, CounterSets], allocated: Container[DeviceID]) -> None:
        #: Shared by every search of one allocator: the allocated devices do not change meanwhile.
        self._available = available
        self._allocated = allocated
        self._consumed: dict[PoolKey, dict[tuple[str, str], Fraction]] = {}

    def reserve(self, pool: Pool, device: str) -> bool:
        """Count the device's consumption in; False (and nothing counted) when a counter would go
        beyond what is available."""
        use = pool.consumption.get(device)
        if not use:
            return True
        key = (pool.driver, pool.pool)
        available = self._available.get(key)
        if available is None:
            available = self._available[key] = available_counters(pool, self._allocated)
        consumed = self._consumed.setdefault(key, {})
        for counter_key, value in use.items():
            consumed[counter_key] = consumed.get(counter_key, Fraction(0)) + value
        # As upstream, every counter of the pool is checked, not only the device's.
        for set_name, counters in available.items():
            for counter, value in counters.items():
                if value < consumed.get((set_name, counter), Fraction(0)):
                    self.release(pool, device)
                    return False
        return True

    def release(self, pool: Pool, device: str) -> None:
        consumed = self._consumed.get((pool.driver, pool.pool), {})
        for counter_key, value in (pool.consumption.get(device) or {}).items():
            consumed[counter_key] = consumed.get(counter_key, Fraction(0)) - value
