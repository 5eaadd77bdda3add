"""The resource pools a node can allocate from, out of all ResourceSlices.

Port of k8s.io/dynamic-resource-allocation/structured/internal/incubating/pools_incubating.go
(v0.37.1, the allocator upstream runs in v1.37: ``GatherPools``, ``NodeMatches``, ``addSlice``,
``buildPool``, ``getAndValidateCounterSets``, ``validateDeviceCounterConsumption``,
``checkSlicesInPool``), partitionable devices included: slices with ``sharedCounters`` give the
pool its counter sets, a ``perDeviceNodeSelection`` slice is the node's when one of its devices is,
and every device's ``consumesCounters`` must name a counter of the pool (else the pool is invalid).
Pools are sorted by driver and pool, those with devices that have binding conditions last, a
pool's slices by name, as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import QuantityError, parse_quantity
from kubesched.plugins.dynamicresources.capacity import CapacityError, quantity
from kubesched.plugins.dynamicresources.slice_index import SliceIndex
from kubesched.plugins.helpers.node_selector import compile_node_selector


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


#: counter set name -> counter name -> value
CounterSets = dict[str, dict[str, Fraction]]


@dataclass(slots=True)
class Pool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    #: The device slices of the newest generation that target the node, by name.
    slices: list[dict[str, Any]] = field(default_factory=list)
    #: The pool's other device slices (their allocated devices consume counters too).
    slices_not_targeting_node: list[dict[str, Any]] = field(default_factory=list)
    counter_sets: CounterSets = field(default_factory=dict)
    #: device name -> (counter set, counter) -> what the device consumes.
    consumption: dict[str, dict[tuple[str, str], Fraction]] = field(default_factory=dict)
    _candidates: list[Candidate] | None = field(default=None, repr=False, compare=False)

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.pool}"

    def candidates(self) -> list[Candidate]:
        """The devices of the slices targeting the node, in the allocator's order (slices by name,
        devices as listed); built once per pool, which lives as long as its slices (gather_pools)."""
        if self._candidates is None:
            self._candidates = [Candidate((self.driver, self.pool, str(device.get("name", ""))), device, s, self,
                                          _plain_capacity(device))
                                for s in self.slices for device in slice_spec(s).get("devices") or []]
        return self._candidates


@dataclass(slots=True)
class Candidate:
    """A device the allocator may pick: its id (driver, pool, device), the device and its slice."""

    id: tuple[str, str, str]
    device: dict[str, Any]
    slice: dict[str, Any]
    pool: Pool
    #: Its capacities have no request policy and valid, non-negative values: a request without
    #: capacity needs on a device nobody shares always fits it (capacity.fits, short-cut).
    plain_capacity: bool


def _plain_capacity(device: Mapping[str, Any]) -> bool:
    try:
        return all(not cap.get("requestPolicy") and quantity(cap.get("value"), "") >= 0
                   for cap in (device.get("capacity") or {}).values())
    except CapacityError:
        return False


def slice_spec(s: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = s.get("spec") or {}
    return spec


def _pool_of(spec: Mapping[str, Any]) -> tuple[str, str, int, int]:
    pool = spec.get("pool") or {}
    return (str(spec.get("driver", "")), str(pool.get("name", "")), int(pool.get("generation") or 0),
            int(pool.get("resourceSliceCount") or 0))


def _targets(node: NodeRef, spec: Mapping[str, Any]) -> bool | None:
    """Whether the slice is for this node; None when it names no node at all (ignored)."""
    node_name, all_nodes = str(spec.get("nodeName") or ""), bool(spec.get("allNodes"))
    selector = spec.get("nodeSelector")
    if node_name or all_nodes or selector is not None:
        return node.matches(node_name, all_nodes, selector)
    if spec.get("perDeviceNodeSelection"):
        return any(node.matches(str(d.get("nodeName") or ""), bool(d.get("allNodes")), d.get("nodeSelector"))
                   for d in spec.get("devices") or [])
    return None


def gather_pools(slices: SliceIndex | Sequence[dict[str, Any]], node: NodeRef) -> list[Pool]:
    """GatherPools: the pools with slices for this node, newest generation only; a pool whose slices
    are not all published yet is incomplete, one with a duplicate device name (or a bad counter)
    invalid. Only the slices the index has for the node are looked at (slice_index.py)."""
    index = slices if isinstance(slices, SliceIndex) else SliceIndex.of(slices)
    # With every slice naming its node, the pools depend on the node's name only: kept until a
    # slice changes (the index empties ``derived`` then). Pools are never changed once built.
    cacheable = not index.several_nodes
    if cacheable:
        cached: list[Pool] | None = index.derived.get(("pools", node.name))
        if cached is not None:
            return cached
    pools: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in index.for_node(node.name):
        spec = slice_spec(s)
        if not _targets(node, spec):
            continue
        driver, pool, generation, _ = _pool_of(spec)
        have = pools.get((driver, pool))
        if have is None or generation > _pool_of(slice_spec(have[0]))[2]:
            pools[(driver, pool)] = [s]
        elif generation == _pool_of(slice_spec(have[0]))[2]:
            have.append(s)
    result: list[Pool] = []
    #: Pools with devices that have binding conditions come last (pools_incubating.go): a device
    #: that needs no preparation is preferred.
    with_binding_conditions: list[Pool] = []

    def add(built: Pool) -> None:
        (with_binding_conditions if _has_binding_conditions(built) else result).append(built)

    for (driver, pool), members in sorted(pools.items()):
        _, _, generation, count = _pool_of(slice_spec(members[0]))
        if len(members) == count:
            add(_build_pool(driver, pool, members, []))
            continue
        # Some slices of the pool do not target this node, or are not published yet.
        every: list[dict[str, Any]] = []
        obsolete = False
        for s in index.of_pool((driver, pool)):
            g = _pool_of(slice_spec(s))[2]
            obsolete |= g > generation
            if g == generation:
                every.append(s)
        if obsolete:
            continue  # a newer generation exists elsewhere
        if len(every) != count:
            result.append(Pool(driver, pool, incomplete=True))
            continue
        add(_build_pool(driver, pool, members, every))
    gathered = result + with_binding_conditions
    if cacheable:
        index.derived[("pools", node.name)] = gathered
    return gathered


def _has_binding_conditions(pool: Pool) -> bool:
    """poolHasBindingConditions: a device of the slices targeting the node has binding conditions."""
    return any(device.get("bindingConditions") is not None
               for s in pool.slices for device in slice_spec(s).get("devices") or [])


def _name(s: Mapping[str, Any]) -> str:
    return str((s.get("metadata") or {}).get("name", ""))


def _build_pool(driver: str, pool: str, members: list[dict[str, Any]], every: list[dict[str, Any]]) -> Pool:
    """buildPool: counter-set slices apart from device slices; the pool is invalid on a duplicate
    device or counter set name, or a device consuming a counter the pool does not have."""
    members = sorted(members, key=_name)
    counter_slices = [s for s in members if slice_spec(s).get("sharedCounters")]
    device_slices = [s for s in members if not slice_spec(s).get("sharedCounters")]
    targeting = {_name(s) for s in members}
    not_targeting: list[dict[str, Any]] = []
    for s in every:
        if _name(s) in targeting:
            continue
        (counter_slices if slice_spec(s).get("sharedCounters") else not_targeting).append(s)
    names: set[str] = set()
    for s in device_slices:
        for device in slice_spec(s).get("devices") or []:
            name = str(device.get("name", ""))
            if name in names:
                return Pool(driver, pool, invalid=True, invalid_reason=f"duplicate device name {name}")
            names.add(name)
    try:
        counter_sets = _counter_sets(counter_slices)
        consumption: dict[str, dict[tuple[str, str], Fraction]] = {}
        for s in [*not_targeting, *device_slices]:
            for device in slice_spec(s).get("devices") or []:
                if device.get("consumesCounters"):
                    consumption[str(device.get("name", ""))] = _consumption(counter_sets, device)
    except _InvalidPoolError as e:
        return Pool(driver, pool, invalid=True, invalid_reason=str(e))
    return Pool(driver, pool, slices=device_slices, slices_not_targeting_node=not_targeting,
                counter_sets=counter_sets, consumption=consumption)


class _InvalidPoolError(Exception):
    pass


def _value(raw: Any, where: str) -> Fraction:
    try:
        return parse_quantity(str((raw or {}).get("value", "")), from_json=True)
    except (QuantityError, ValueError) as e:
        raise _InvalidPoolError(f"{where}: invalid quantity: {e}") from None


def _counter_sets(slices: Sequence[Mapping[str, Any]]) -> CounterSets:
    """getAndValidateCounterSets."""
    out: CounterSets = {}
    for s in slices:
        for counter_set in slice_spec(s).get("sharedCounters") or []:
            name = str(counter_set.get("name", ""))
            if name in out:
                raise _InvalidPoolError(f"duplicate counter set name {name}")
            out[name] = {c: _value(v, f"counter set {name}, counter {c}")
                         for c, v in (counter_set.get("counters") or {}).items()}
    return out


def _consumption(counter_sets: CounterSets, device: Mapping[str, Any]) -> dict[tuple[str, str], Fraction]:
    """validateDeviceCounterConsumption, and the device's consumption summed per counter."""
    out: dict[tuple[str, str], Fraction] = {}
    for entry in device.get("consumesCounters") or []:
        set_name = str(entry.get("counterSet", ""))
        counter_set = counter_sets.get(set_name)
        if counter_set is None:
            raise _InvalidPoolError(f"counter set {set_name} not found")
        for counter, raw in (entry.get("counters") or {}).items():
            if counter not in counter_set:
                raise _InvalidPoolError(f"counter {counter} not found in counter set {set_name}")
            key = (set_name, counter)
            out[key] = out.get(key, Fraction(0)) + _value(raw, f"device {device.get('name', '')}, counter {counter}")
    return out
