"""Constraints of PodTopologySpread: parsing, defaults, node inclusion policies, counts per domain.

Ports of pkg/scheduler/framework/plugins/podtopologyspread/common.go (``topologySpreadConstraint``,
``filterTopologySpreadConstraints``, ``mergeLabelSetWithSelector``, ``buildDefaultConstraints``,
``matchNodeInclusionPolicies``, ``nodeLabelsMatchSpreadConstraints``, ``countPodsMatchSelector``)
and pkg/scheduler/framework/plugins/helper/spread.go (``DefaultSelector``, ``GetPodServices``).

``matchLabelKeys``: since 1.34 kube-apiserver merges the pod's values for these keys into the
constraint's labelSelector (MatchLabelKeysInPodTopologySpreadSelectorMerge), but the scheduler
still merges them itself at PreFilter/PreScore time (common.go, for pods created before the
upgrade); merging twice adds the same requirement twice, which changes nothing. This port does
the same merge.

Counting is columnar: instead of walking every pod on every node per cycle
(``countPodsMatchSelector``), per-row match counts and their per-domain sums come from
``kubesched.snapshot.topology``, kept in step with the pods; which nodes count for a constraint
(node inclusion policies, required labels) is kept per node_generation (``NodeLabelCache``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kubesched.plugins.helpers.label_selector import (
    NOTHING,
    Selector,
    SelectorError,
    label_selector_as_selector,
    selector_from_set,
)
from kubesched.plugins.helpers.node_selector import RequiredNodeAffinity
from kubesched.plugins.helpers.owners import controller_of
from kubesched.plugins.helpers.taints import pod_tolerations, tolerations_key, untolerated_mask
from kubesched.plugins.podtopologyspread.args import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable
from kubesched.snapshot.topology import topology_index

BoolArray = npt.NDArray[np.bool_]

HONOR: Final = "Honor"
IGNORE: Final = "Ignore"
#: v1.LabelHostname / v1.LabelTopologyZone
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE: Final = "topology.kubernetes.io/zone"

#: plugin.go systemDefaultConstraints
SYSTEM_DEFAULT_CONSTRAINTS: Final[tuple[dict[str, Any], ...]] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

__all__ = ["DO_NOT_SCHEDULE", "SCHEDULE_ANYWAY"]


@dataclass(frozen=True, slots=True)
class Constraint:
    """topologySpreadConstraint: a v1.TopologySpreadConstraint with its selector parsed."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


def merge_label_set_with_selector(match_labels: Mapping[str, str], s: Selector) -> Selector:
    """mergeLabelSetWithSelector (newest: a selector without requirements, i.e. Nothing, is kept)."""
    reqs = s.requirements()
    if reqs is None:
        return s
    return selector_from_set(match_labels).add(*reqs)


def filter_constraints(
    raw_constraints: Sequence[Any], pod_labels: Mapping[str, str], action: str
) -> tuple[Constraint, ...]:
    """filterTopologySpreadConstraints: the constraints with ``whenUnsatisfiable == action``,
    parsed. Raises SelectorError for a selector LabelSelectorAsSelector refuses."""
    out: list[Constraint] = []
    for c in raw_constraints:
        if not isinstance(c, Mapping) or c.get("whenUnsatisfiable") != action:
            continue
        selector = label_selector_as_selector(c.get("labelSelector"))
        keys = c.get("matchLabelKeys") or []
        if keys:
            match_labels = {k: pod_labels[k] for k in keys if k in pod_labels}
            if match_labels:
                selector = merge_label_set_with_selector(match_labels, selector)
        min_domains = c.get("minDomains")
        out.append(
            Constraint(
                max_skew=int(c.get("maxSkew") or 0),
                topology_key=str(c.get("topologyKey") or ""),
                selector=selector,
                min_domains=1 if min_domains is None else int(min_domains),
                node_affinity_policy=str(c.get("nodeAffinityPolicy") or HONOR),
                node_taints_policy=str(c.get("nodeTaintsPolicy") or IGNORE),
            )
        )
    return tuple(out)


def own_constraints(pod: PodInfo, action: str, memo_key: str) -> tuple[Constraint, ...] | None:
    """The pod's own constraints for ``action`` (cached on the pod), or None when the pod has no
    topologySpreadConstraints at all (then the default constraints apply)."""
    raw = pod.spec.get("topologySpreadConstraints")
    if not raw or not isinstance(raw, list):
        return None
    memo: dict[str, tuple[Constraint, ...]] | None = pod.memo.get(memo_key)
    if memo is None:
        # With matchLabelKeys the parse reads the pod's labels: the pod gets its own.
        own_labels = any(isinstance(c, Mapping) and c.get("matchLabelKeys") for c in raw)
        memo = pod.memo[memo_key] = {} if own_labels else _shared_parses(raw)
    got = memo.get(action)
    if got is None:
        got = memo[action] = filter_constraints(raw, pod.labels, action)
    return got


def _shared_parses(raw: list[Any]) -> dict[str, tuple[Constraint, ...]]:
    """action → parsed constraints, shared by the pods whose topologySpreadConstraints (without
    matchLabelKeys) are written alike: the parse reads nothing else, so a workload's replicas
    parse once. repr tells apart every value a decoded manifest holds (JSON would not: NaN and
    None both dump as null). Bounded: cleared when full."""
    key = repr(raw)
    got = _SHARED_CONSTRAINTS.get(key)
    if got is None:
        if len(_SHARED_CONSTRAINTS) >= 4096:
            _SHARED_CONSTRAINTS.clear()
        got = _SHARED_CONSTRAINTS[key] = {}
    return got


_SHARED_CONSTRAINTS: dict[str, dict[str, tuple[Constraint, ...]]] = {}


# -- helper.DefaultSelector -------------------------------------------------------------------------


class NamespaceIndex:
    """Keys of a ``handle.objects(kind)`` mapping grouped by namespace, rebuilt when its key set
    changes (fingerprint: the mapping's identity, size and newest key)."""

    __slots__ = ("_by_ns", "_fingerprint")

    def __init__(self) -> None:
        self._fingerprint: tuple[int, int, str | None] | None = None
        self._by_ns: dict[str, list[str]] = {}

    def keys_in(self, objects: Mapping[str, Any], namespace: str) -> list[str]:
        try:
            last: str | None = next(reversed(objects))  # type: ignore[arg-type]
        except (TypeError, StopIteration):
            last = None
        fp = (id(objects), len(objects), last)
        if fp != self._fingerprint:
            by_ns: dict[str, list[str]] = {}
            for key in objects:
                by_ns.setdefault(key.partition("/")[0], []).append(key)
            self._by_ns = by_ns
            self._fingerprint = fp
        return self._by_ns.get(namespace, [])


def default_selector(
    pod: PodInfo, objects: Callable[[str], Mapping[str, dict[str, Any]]], services_index: NamespaceIndex
) -> Selector:
    """helper.DefaultSelector: the selectors of the Services selecting the pod merged, plus the
    selector of its controlling ReplicationController, ReplicaSet or StatefulSet."""
    label_set: dict[str, str] = {}
    services = objects("Service")
    if services:
        for key in services_index.keys_in(services, pod.namespace):
            svc = services.get(key)
            sel = ((svc or {}).get("spec") or {}).get("selector")
            if sel is None or not isinstance(sel, Mapping):
                continue  # services with nil selectors match nothing, not everything
            if selector_from_set(sel).matches(pod.labels):
                label_set.update({str(k): str(v) for k, v in sel.items()})
    selector = selector_from_set(label_set)
    owner = controller_of(pod)
    if owner is None:
        return selector
    api_version = str(owner.get("apiVersion") or "")
    if api_version.count("/") > 1:
        return selector  # schema.ParseGroupVersion error
    group, _, version = api_version.rpartition("/")
    kind = owner.get("kind")
    key = f"{pod.namespace}/{owner.get('name') or ''}"
    if (group, version, kind) == ("", "v1", "ReplicationController"):
        rc = objects("ReplicationController").get(key)
        if rc is not None:
            rc_sel = (rc.get("spec") or {}).get("selector") or {}
            if isinstance(rc_sel, Mapping):
                label_set.update({str(k): str(v) for k, v in rc_sel.items()})
            selector = selector_from_set(label_set)
    elif (group, version, kind) in (("apps", "v1", "ReplicaSet"), ("apps", "v1", "StatefulSet")):
        obj = objects(str(kind)).get(key)
        if obj is not None:
            try:
                other = label_selector_as_selector((obj.get("spec") or {}).get("selector"))
            except SelectorError:
                return selector
            reqs = other.requirements()
            if reqs is not None:
                selector = selector.add(*reqs)
    return selector


def with_selector(constraints: Sequence[Constraint], selector: Selector) -> tuple[Constraint, ...]:
    return tuple(
        Constraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_policy, c.node_taints_policy)
        for c in constraints
    )


# -- node masks and counts --------------------------------------------------------------------------


def required_affinity(pod: PodInfo) -> RequiredNodeAffinity:
    """nodeaffinity.GetRequiredNodeAffinity (cached on the pod)."""
    cached = pod.memo.get("_required_node_affinity")
    if not isinstance(cached, RequiredNodeAffinity):
        cached = pod.memo["_required_node_affinity"] = RequiredNodeAffinity.of(pod.spec)
    return cached


def affinity_family(pod: PodInfo) -> str | None:
    """What ``required_affinity(pod)`` is built from: None when the pod has neither a nodeSelector
    nor required node affinity (every node matches), else the repr of the two (pods with equal
    reprs match the same nodes; repr, unlike JSON, tells NaN from None). Cached on the pod."""
    got: object = pod.memo.get(_AFFINITY_FAMILY, _UNSET)
    if got is _UNSET:
        spec = pod.spec
        node_selector = spec.get("nodeSelector")
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        if not (isinstance(node_selector, dict) and node_selector) and not isinstance(required, dict):
            got = None
        else:
            got = repr((node_selector, required))
        pod.memo[_AFFINITY_FAMILY] = got
    return got if isinstance(got, str) else None


_AFFINITY_FAMILY: Final = "_spread_affinity_family"
_UNSET: Final = object()


def match_counts(table: NodeTable, namespace: str, selector: Selector) -> IntArray | None:
    """Per row, the pods countPodsMatchSelector counts; None when it counts none anywhere
    (an empty selector counts nothing upstream, and Nothing matches nothing)."""
    if _counts_nothing(selector):
        return None
    return topology_index(table).counts(namespace, selector)


def _counts_nothing(selector: Selector) -> bool:
    return selector.empty() or selector is NOTHING or selector.nothing


@dataclass(frozen=True, slots=True)
class CountedDomains:
    """Which nodes count for one constraint of one pod, and in which domain: ``row_domains[row]``
    is the row's domain code (as ``NodeLabelCache.domains``) or -1 when the node does not count;
    ``present[code]``: some counted node is in that domain. ``key`` names the mapping exactly
    (within one node_generation of the table)."""

    key: Hashable
    row_domains: npt.NDArray[np.int32]
    size: int
    present: BoolArray


def domain_counts(table: NodeTable, namespace: str, selector: Selector, counted: CountedDomains) -> IntArray | None:
    """Per domain code, the pods countPodsMatchSelector counts on the counted nodes of that domain
    (read-only: kept in step by the topology index); None when it counts none anywhere."""
    if _counts_nothing(selector):
        return None
    return topology_index(table).domain_sums(namespace, selector, counted.key, counted.row_domains, counted.size)


class NodeLabelCache:
    """Per table row, what PreFilter and PreScore read of the Node objects: whether a row has
    every key of a constraint set (nodeLabelsMatchSpreadConstraints), each row's domain code of one
    key, and which rows count for a constraint (``counted_domains``). They depend on Node objects
    only (and, for the last, on the few pod fields named in its key), so each is computed once over
    the whole table and kept until a node changes (``node_generation``): a cycle then reads them
    instead of re-deriving them for every node on every pod (the cost grew with the cluster)."""

    __slots__ = ("_counted", "_domains", "_generation", "_keyed", "_table")

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._generation = -1
        self._keyed: dict[frozenset[str], BoolArray] = {}
        self._domains: dict[str, tuple[npt.NDArray[np.int32], int]] = {}
        self._counted: dict[Hashable, CountedDomains] = {}

    def _sync(self, table: NodeTable) -> None:
        if self._table is not table or self._generation != table.node_generation:
            self._table, self._generation = table, table.node_generation
            self._keyed.clear()
            self._domains.clear()
            self._counted.clear()

    def keyed(self, table: NodeTable, keys: frozenset[str]) -> BoolArray:
        """Per table row (indexed by row, dead rows included): the node has every topology key."""
        self._sync(table)
        got = self._keyed.get(keys)
        if got is None:
            got = np.ones(len(table.alive), dtype=np.bool_)
            for key in keys:
                codes = table.label_column(key).codes
                got[: len(codes)] &= codes[: len(got)] >= 0
            self._keyed[keys] = got
        return got

    def domains(self, table: NodeTable, key: str) -> tuple[npt.NDArray[np.int32], int]:
        """Per table row, the row's value code of ``key``, a node without the key counted under the
        value "" (Go's zero value: a domain of its own unless some node really has ""); and the
        number of codes."""
        self._sync(table)
        got = self._domains.get(key)
        if got is None:
            col = table.label_column(key)
            size = len(col.values) + 1
            missing_code = col.values.get("", size - 1)
            got = (np.where(col.codes < 0, missing_code, col.codes).astype(np.int32), size)
            self._domains[key] = got
        return got

    def counted_domains(
        self, table: NodeTable, pod: PodInfo, c: Constraint, required_keys: frozenset[str]
    ) -> CountedDomains:
        """The nodes that count for constraint ``c`` of ``pod`` and their domains of its topology
        key: existing nodes having every key of ``required_keys`` (nodeLabelsMatchSpreadConstraints;
        empty: no requirement) and passing the constraint's node inclusion policies for the pod
        (matchNodeInclusionPolicies: its nodeSelector and required node affinity when
        nodeAffinityPolicy is Honor, its tolerations when nodeTaintsPolicy is Honor).

        Kept per (topology key, required keys, affinity family, tolerations) until a node changes:
        the policies read nothing else of the pod, so pods alike in those share the mapping (and,
        through its key, the topology index's domain sums)."""
        self._sync(table)
        affinity = affinity_family(pod) if c.node_affinity_policy == HONOR else None
        tolerations = tolerations_key(pod) if c.node_taints_policy == HONOR else None
        key = (c.topology_key, required_keys, affinity, tolerations)
        got = self._counted.get(key)
        if got is None:
            domain_of, size = self.domains(table, c.topology_key)
            counted = table.alive[: len(domain_of)].copy()
            if required_keys:
                counted &= self.keyed(table, required_keys)[: len(counted)]
            if affinity is not None:
                rows = np.flatnonzero(counted)
                counted[rows] = required_affinity(pod).match(table, rows)
            if tolerations is not None:
                rows = np.flatnonzero(counted)
                counted[rows] = ~untolerated_mask(table, rows, pod_tolerations(pod))
            row_domains = np.where(counted, domain_of, -1).astype(np.int32)
            present = np.bincount(domain_of[counted], minlength=size) > 0
            if len(self._counted) >= _MAX_COUNTED:
                self._counted.clear()
            got = self._counted[key] = CountedDomains(key, row_domains, size, present)
        return got


#: Counted-node mappings kept per table generation before they are all dropped (rebuilt on use).
_MAX_COUNTED: Final = 1024
