"""The order in which a scheduling cycle walks the nodes: upstream's nodeTree.

kube-scheduler's snapshot lists its nodes through ``nodeTree.list()``
(pkg/scheduler/backend/cache/node_tree.go, v1.37.1): the nodes are grouped by zone key
(component-helpers node/topology ``GetZoneKey``: region and zone, the deprecated
``failure-domain.beta.kubernetes.io`` labels first), zones in the order they first appeared, each
zone's nodes in the order they were added, and the list takes the first node of every zone, then
the second of every zone, and so on. The Filter search starts at ``nextStartNodeIndex`` in that
list and stops once it has found ``numFeasibleNodesToFind`` nodes, so above ~100 nodes which nodes
are scored at all depends on it: zone by zone, a sample drawn from the first zones only would
leave the soft zone-spreading scores nothing to spread onto.

The list is rebuilt only when a node is added or removed (cache.go ``UpdateSnapshot``:
``updateAllLists``); a node whose zone changes moves to the end of its new zone at once, and shows
there from the next rebuild, as upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

Rows = npt.NDArray[np.intp]

ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
REGION_LABELS = ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region")


def zone_key(labels: Mapping[str, str]) -> str:
    """GetZoneKey: ``region:\\x00:zone``, or "" for a node with neither."""
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    return "" if not region and not zone else f"{region}:\x00:{zone}"


class NodeTree:
    """Table rows by zone key, in upstream's nodeTree order; :meth:`rows` is ``list()``."""

    __slots__ = ("_zone_of", "_zones")

    def __init__(self) -> None:
        #: Zone key → its rows in the order they were added; the dict keeps the zones' order (a
        #: zone emptied and seen again goes to the end, as upstream's removeZone/addNode do).
        self._zones: dict[str, list[int]] = {}
        self._zone_of: dict[int, str] = {}

    def add_or_update(self, row: int, labels: Mapping[str, str]) -> None:
        """addNode, or updateNode: a node whose zone changed goes to the end of its new zone."""
        zone = zone_key(labels)
        old = self._zone_of.get(row)
        if old == zone:
            return
        if old is not None:
            self.remove(row)
        self._zone_of[row] = zone
        self._zones.setdefault(zone, []).append(row)

    def remove(self, row: int) -> None:
        zone = self._zone_of.pop(row, None)
        if zone is None:
            return
        rows = self._zones[zone]
        rows.remove(row)
        if not rows:
            del self._zones[zone]

    def rows(self) -> Rows:
        """list(): the first row of every zone, then the second of every zone, and so on."""
        zones = list(self._zones.values())
        if len(zones) == 1:
            return np.array(zones[0], dtype=np.intp)
        if not zones:
            return np.empty(0, dtype=np.intp)
        flat = np.fromiter((r for z in zones for r in z), dtype=np.intp, count=len(self._zone_of))
        place = np.fromiter((i for z in zones for i in range(len(z))), dtype=np.intp, count=len(flat))
        zone = np.repeat(np.arange(len(zones), dtype=np.intp), [len(z) for z in zones])
        return flat[np.lexsort((zone, place))]
