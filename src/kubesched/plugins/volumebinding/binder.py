"""The volume binder's decisions, node by node in batches of table rows.

Port of volumebinding/binder.go (``GetPodVolumeClaims``, ``FindPodVolumes`` with
``checkBoundClaims``, ``findMatchingVolumes``, ``checkVolumeProvisions``, ``hasEnoughCapacity``)
and component-helpers ``FindMatchingVolume``. Upstream walks one node at a time; here each claim
is decided for a whole window of rows at once: a PV's node affinity is one vectorised match over
the rows, and "the smallest fitting PV not already chosen on this node" is the first True along
the PVs (sorted by size, then list order) of a PVs × rows matrix.

Upstream sorts the claims to match by requested size with ``sort.Sort`` (not stable); this sort
is stable, so equal-size claims keep the pod's order. Upstream's PV list comes from an informer
index in no defined order; here it is the shell's order, so ties between equal PVs are broken
deterministically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.plugins.helpers.label_selector import SelectorError, label_selector_as_selector
from kubesched.plugins.helpers.node_selector import NodeSelectorTerm, compile_terms, match_terms
from kubesched.plugins.volumebinding.storage import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    access_modes_ok,
    annotations_of,
    capacity_storage,
    claim_class,
    has_storage_request,
    is_volume_bound_to_claim,
    name_of,
    namespace_of,
    pv_affinity_terms,
    quantity_bytes,
    requested_storage,
    volume_class,
    volume_mode_mismatch,
)
from kubesched.snapshot.table import NodeTable, Rows

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

#: FindPodVolumes appends its reasons in this order.
REASONS = (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST)


class BinderError(Exception):
    """An error (not a verdict) of the binder: the Filter returns it as an Error status."""


AffinityFn = Callable[[dict[str, Any], NodeTable, Rows], BoolArray]


class AffinityMatcher:
    """PV node affinity over table rows; each PV's terms compiled once per object version."""

    def __init__(self) -> None:
        self._terms: dict[str, tuple[dict[str, Any], tuple[NodeSelectorTerm, ...] | None]] = {}

    def __call__(self, pv: dict[str, Any], table: NodeTable, rows: Rows) -> BoolArray:
        name = name_of(pv)
        cached = self._terms.get(name)
        if cached is None or cached[0] is not pv:
            cached = self._terms[name] = (pv, pv_affinity_terms(pv))
        terms = cached[1]
        if terms is None:
            return np.ones(len(rows), dtype=np.bool_)
        return match_terms(table, rows, terms)


@dataclass(slots=True)
class ClaimChoice:
    """One unbound delayed-binding claim and, per table row, what the Filter chose for it."""

    pvc: dict[str, Any]
    #: Candidate PVs of the claim's class, in the order the choice indexes them.
    pvs: list[dict[str, Any]] = field(default_factory=list)
    #: Per table row: index into ``pvs`` of the PV to bind, -1 = to provision, -2 = not decided.
    choice: npt.NDArray[np.int32] | None = None
    #: Per table row: index into the capacities of the CSIStorageCapacity that makes room for a
    #: provisioned volume, -1 = none known.
    capacity: npt.NDArray[np.int32] | None = None


@dataclass(slots=True)
class StorageView:
    """What the binder reads besides PVs and PVCs, fetched once per cycle."""

    classes: Mapping[str, dict[str, Any]]
    drivers: Mapping[str, dict[str, Any]]
    capacities: list[dict[str, Any]]


def _capacity_limit(cap: Mapping[str, Any]) -> int | None:
    """volumeLimit: maximumVolumeSize, else capacity (None when neither is set)."""
    raw = cap.get("maximumVolumeSize")
    if raw is None:
        raw = cap.get("capacity")
    return None if raw is None else quantity_bytes(raw)


def capacity_value(cap: Mapping[str, Any]) -> int:
    return quantity_bytes(cap.get("capacity"))


def topology_terms(allowed: Sequence[Any]) -> tuple[NodeSelectorTerm, ...] | None:
    """v1helper.MatchTopologySelectorTerms as node selector terms: every matchLabelExpressions
    entry is ``key In values``; an empty term selects nothing; no terms match every node (None)."""
    if not allowed:
        return None
    raw_terms = []
    for term in allowed:
        exprs = (term or {}).get("matchLabelExpressions") or []
        if not exprs:
            continue
        raw_terms.append({"matchExpressions": [
            {"key": e.get("key", ""), "operator": "In", "values": list(e.get("values") or [])} for e in exprs
        ]})
    return compile_terms(raw_terms)


def _candidate(pvc: dict[str, Any], pv: dict[str, Any], requested: int) -> int:
    """FindMatchingVolume's node-independent checks: 0 = skip, 1 = bound to this claim (decides
    by node affinity alone), 2 = available."""
    spec = pv.get("spec") or {}
    if spec.get("claimRef") and not is_volume_bound_to_claim(pv, pvc):
        return 0
    if capacity_storage(pv) < requested:
        return 0
    if volume_mode_mismatch(pvc, pv):
        return 0
    claim_vac = (pvc.get("spec") or {}).get("volumeAttributesClassName") or ""
    if claim_vac != (spec.get("volumeAttributesClassName") or ""):  # VolumeAttributesClass is GA
        return 0
    if (pv.get("metadata") or {}).get("deletionTimestamp"):
        return 0
    if is_volume_bound_to_claim(pv, pvc):
        return 1
    return 2


def _claim_selector(pvc: dict[str, Any]) -> Any:
    raw = (pvc.get("spec") or {}).get("selector")
    if raw is None:
        return None
    try:
        return label_selector_as_selector(raw)
    except SelectorError as e:
        raise BinderError(
            f"error creating internal label selector for claim: {namespace_of(pvc)}/{name_of(pvc)}: {e}"
        ) from None


def match_claim(
    pvc: dict[str, Any],
    pvs: list[dict[str, Any]],
    table: NodeTable,
    rows: Rows,
    taken: BoolArray,
    affinity: AffinityFn,
) -> npt.NDArray[np.int64]:
    """FindMatchingVolume for one claim on every row: the index into ``pvs`` of the chosen PV per
    row, -1 when none. ``taken[pv, i]``: PV already chosen for another claim of the pod on row i."""
    n = len(rows)
    out = np.full(n, -1, dtype=np.int64)
    if not pvs or not n:
        return out
    requested = requested_storage(pvc)
    selector = _claim_selector(pvc)
    want_class = claim_class(pvc)
    available: list[int] = []
    for i, pv in enumerate(pvs):
        kind = _candidate(pvc, pv, requested)
        if kind == 0:
            continue
        if kind == 1:
            # Returned as soon as reached: on the nodes its affinity allows, else no match at all.
            ok = affinity(pv, table, rows) & ~taken[i]
            out[ok] = i
            return out
        if ((pv.get("status") or {}).get("phase")) != "Available":
            continue
        if selector is not None and not selector.matches(((pv.get("metadata") or {}).get("labels")) or {}):
            continue
        if volume_class(pv) != want_class or not access_modes_ok(pvc, pv):
            continue
        available.append(i)
    if not available:
        return out
    # Smallest first; list order breaks ties (upstream keeps the first of equal sizes).
    available.sort(key=lambda i: capacity_storage(pvs[i]))
    fits = np.empty((len(available), n), dtype=np.bool_)
    for k, i in enumerate(available):
        fits[k] = affinity(pvs[i], table, rows) & ~taken[i]
    first = fits.argmax(axis=0)
    found = fits[first, np.arange(n)]
    out[found] = np.array(available, dtype=np.int64)[first[found]]
    return out


@dataclass(slots=True)
class ProvisionCheck:
    """checkVolumeProvisions for one claim: which rows may provision it, and with what capacity."""

    #: Error message when the claim cannot be provisioned anywhere for a configuration reason.
    error: str = ""
    #: Rows (aligned with the window) where the provisioner can reach the node.
    reachable: BoolArray | None = None
    #: Per row: index of the CSIStorageCapacity with room (-1: no capacity tracking, or none).
    capacity: npt.NDArray[np.int32] | None = None
    #: Per row: enough capacity (always True without capacity tracking).
    sufficient: BoolArray | None = None


def check_provision(pvc: dict[str, Any], view: StorageView, table: NodeTable, rows: Rows) -> ProvisionCheck:
    n = len(rows)
    class_name = claim_class(pvc)
    if not class_name:
        return ProvisionCheck(error=f'no class for claim "{namespace_of(pvc)}/{name_of(pvc)}"')
    sc = view.classes.get(class_name)
    if sc is None:
        return ProvisionCheck(error=f'failed to find storage class "{class_name}"')
    provisioner = str(sc.get("provisioner") or "")
    if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
        return ProvisionCheck(reachable=np.zeros(n, dtype=np.bool_))
    terms = topology_terms(sc.get("allowedTopologies") or [])
    reachable = np.ones(n, dtype=np.bool_) if terms is None else match_terms(table, rows, terms)
    capacity = np.full(n, -1, dtype=np.int32)
    sufficient = np.ones(n, dtype=np.bool_)
    driver = view.drivers.get(provisioner)
    if has_storage_request(pvc) and driver is not None and (driver.get("spec") or {}).get("storageCapacity") is True:
        size = requested_storage(pvc)
        sufficient[:] = False
        usable = []
        for i, cap in enumerate(view.capacities):
            limit = _capacity_limit(cap)  # capacitySufficient
            if cap.get("storageClassName") == class_name and limit is not None and limit >= size:
                usable.append((i, cap))
        for j, row in enumerate(rows.tolist()):
            if not reachable[j]:
                continue
            labels = table.labels[row]
            for i, cap in usable:
                topo = cap.get("nodeTopology")
                if topo is None:
                    continue
                try:
                    sel = label_selector_as_selector(topo)
                except SelectorError:
                    continue
                if sel.matches(labels):
                    capacity[j], sufficient[j] = i, True
                    break
    return ProvisionCheck(reachable=reachable, capacity=capacity, sufficient=sufficient)


def selected_node(pvc: Mapping[str, Any]) -> str | None:
    value = annotations_of(pvc).get(ANN_SELECTED_NODE)
    return None if value is None else str(value)
