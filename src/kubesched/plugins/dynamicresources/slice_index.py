"""ResourceSlices indexed by the node they are for, kept in step with the shell's slices.

Upstream's GatherPools (pools_incubating.go) walks every ResourceSlice for every node it is asked
about; in Python that walk was most of a Filter's time (O(nodes × slices) per pod). The index keeps:

* per node name, the slices that name it (``spec.nodeName``: the usual per-node driver);
* the slices for several nodes (``allNodes``, ``nodeSelector``, ``perDeviceNodeSelection``), which
  every node must still test, usually few (network-attached devices);
* per pool (driver, pool name), all its slices (GatherPools' completeness and obsolescence checks).

``sync`` brings the index in step with the shell's slices: a slice object not seen before (added,
or replaced by an update: the shells store a new object per version) is indexed, one gone is
dropped; unchanged slices cost one identity check (at C speed while the shell's keys stay in
place). The slices are stored as the scheduler sees
them, with the DeviceTaintRules' taints applied (taints.py); a change of the rules re-indexes all.

``derived`` holds what callers compute from the index alone (pools.py: a node's pools): it is
emptied whenever a slice is indexed or dropped, so a cached answer is never older than the slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
from operator import is_not
from typing import Any

from kubesched.plugins.dynamicresources.taints import apply_taint_rules

PoolID = tuple[str, str]


def _pool_id(spec: Mapping[str, Any]) -> PoolID:
    return str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))


class SliceIndex:
    def __init__(self) -> None:
        self._rules: tuple[tuple[str, Any], ...] = ()
        self._taint_rules: list[dict[str, Any]] = []
        #: The keys and objects of the last sync, in the shell's order.
        self._keys: list[str] = []
        self._values: list[dict[str, Any]] = []
        self._clear()

    def _clear(self) -> None:
        #: key -> (the shell's object, its resourceVersion) as last indexed.
        self._seen: dict[str, tuple[dict[str, Any], Any]] = {}
        #: key -> where it was indexed: (node name or None for "several nodes", pool id).
        self._where: dict[str, tuple[str | None, PoolID]] = {}
        self.by_node: dict[str, dict[str, dict[str, Any]]] = {}
        self.several_nodes: dict[str, dict[str, Any]] = {}
        self.by_pool: dict[PoolID, dict[str, dict[str, Any]]] = {}
        #: Results computed from the indexed slices only, by the caller's key; cleared on any change.
        self.derived: dict[Any, Any] = {}

    @classmethod
    def of(cls, slices: Sequence[dict[str, Any]], taint_rules: Sequence[dict[str, Any]] = ()) -> SliceIndex:
        """An index of a fixed list (tests, callers without a shell)."""
        index = cls()
        index.sync({str(i): s for i, s in enumerate(slices)}, taint_rules)
        return index

    def sync(self, slices: Mapping[str, dict[str, Any]], taint_rules: Iterable[dict[str, Any]] = ()) -> None:
        rules = list(taint_rules)
        fingerprint = tuple(sorted((str((r.get("metadata") or {}).get("name", "")),
                                    (r.get("metadata") or {}).get("resourceVersion") or id(r)) for r in rules))
        if fingerprint != self._rules:
            self._clear()  # every slice's taints may change
            self._keys, self._values = [], []
            self._rules, self._taint_rules = fingerprint, rules
        keys, values = list(slices), list(slices.values())
        known = len(self._keys)
        if keys[:known] == self._keys:
            # The same slices in the same order, maybe more at the end: the replaced ones are
            # found by identity at C speed (allocated_tally.py does the same for claims).
            changed = [*compress(range(known), map(is_not, values, self._values)), *range(known, len(keys))]
            self._update([(keys[i], values[i]) for i in changed])
        else:
            for key in [k for k in self._seen if k not in slices]:
                self._drop(key)
            self._update(slices.items())
        self._keys, self._values = keys, values

    def _update(self, slices: Iterable[tuple[str, dict[str, Any]]]) -> None:
        for key, raw in slices:
            seen = self._seen.get(key)
            version = (raw.get("metadata") or {}).get("resourceVersion")
            if seen is not None and seen[0] is raw and seen[1] == version:
                continue
            if seen is not None:
                self._drop(key)
            self._add(key, raw, version)

    def _add(self, key: str, raw: dict[str, Any], version: Any) -> None:
        self.derived.clear()
        s = apply_taint_rules([raw], self._taint_rules)[0] if self._taint_rules else raw
        spec = s.get("spec") or {}
        node = str(spec.get("nodeName") or "") or None
        if node is not None:
            self.by_node.setdefault(node, {})[key] = s
        else:
            self.several_nodes[key] = s
        pool = _pool_id(spec)
        self.by_pool.setdefault(pool, {})[key] = s
        self._seen[key] = (raw, version)
        self._where[key] = (node, pool)

    def _drop(self, key: str) -> None:
        self.derived.clear()
        self._seen.pop(key, None)
        node, pool = self._where.pop(key)
        group = self.by_node.get(node, {}) if node is not None else self.several_nodes
        group.pop(key, None)
        if node is not None and not group:
            del self.by_node[node]
        members = self.by_pool.get(pool)
        if members is not None:
            members.pop(key, None)
            if not members:
                del self.by_pool[pool]

    def for_node(self, node_name: str) -> list[dict[str, Any]]:
        """The slices that may target this node: those naming it, and those for several nodes."""
        named = self.by_node.get(node_name)
        if not named:
            return list(self.several_nodes.values())
        return [*named.values(), *self.several_nodes.values()]

    def of_pool(self, pool: PoolID) -> list[dict[str, Any]]:
        return list((self.by_pool.get(pool) or {}).values())
