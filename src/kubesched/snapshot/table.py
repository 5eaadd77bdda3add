"""The columnar node table: every node's allocatable, requested, labels and taints as numpy columns.

Filters and scores run as vector operations over rows instead of Python loops over node objects.
Rows are stable for a node's lifetime (a removed node's row is recycled later); ``alive_rows()``
gives the rows in scheduling order. Updates to one node or one pod touch one row: O(resources +
indexed label keys), never a rebuild.

The per-node upstream-style view (``NodeInfo``) is a thin window on one row for plugins that
implement the simple interface; node_spec.py reads the Node objects' fields.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.snapshot.images import ImageIndex
from kubesched.snapshot.label_column import LabelColumn as LabelColumn
from kubesched.snapshot.node_spec import NodeSpecError as NodeSpecError
from kubesched.snapshot.node_spec import Taint as Taint
from kubesched.snapshot.node_spec import node_definition_changed, parse_resource, parse_taints
from kubesched.snapshot.node_tree import NodeTree
from kubesched.snapshot.pod import HostPort, PodInfo

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = 0, 1, 2, 3
BASE_RESOURCES: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage", "pods")


def column_selector(cols: list[int]) -> slice | list[int]:
    """``matrix[:, column_selector(cols)]``: a cheap view when the columns are contiguous (the usual
    cpu, memory[, ephemeral-storage]) instead of a 2-D fancy-index copy, which costs ~10x more."""
    if cols and cols == list(range(cols[0], cols[0] + len(cols))):
        return slice(cols[0], cols[0] + len(cols))
    return cols


class NodeTable:
    #: Row views (rows × resources) of the ``*_by_resource`` matrices (see ``__init__``).
    allocatable: IntArray
    requested: IntArray
    available: IntArray
    nonzero_requested: IntArray

    def __init__(self, capacity: int = 64) -> None:
        self._cap = capacity
        self._n = 0  # high-water mark of used rows
        self._free_rows: list[int] = []
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(BASE_RESOURCES)}
        #: The resource matrices are stored resource-major, ``*_by_resource[column, row]``: each
        #: resource is one contiguous array over the rows, so the Fit filter and the scorers gather
        #: the columns they read with one ``take(rows, axis=1)`` and work on contiguous (k × rows)
        #: blocks. ``allocatable`` & co. are their transposed views (rows × resources), for
        #: everything that reads or writes a node's row.
        self.allocatable_by_resource: IntArray = np.zeros((len(BASE_RESOURCES), capacity), dtype=np.int64)
        self.requested_by_resource: IntArray = np.zeros_like(self.allocatable_by_resource)
        #: allocatable - requested (the pods column: allocatable pods - pods placed), kept in step
        #: with both so the Fit filter is one comparison per row.
        self.available_by_resource: IntArray = np.zeros_like(self.allocatable_by_resource)
        #: cpu/memory requested with upstream's non-zero defaults (100m / 200Mi), for scoring.
        self.nonzero_requested_by_resource: IntArray = np.zeros((2, capacity), dtype=np.int64)
        self._set_row_views()
        self.alive: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.unschedulable: BoolArray = np.zeros(capacity, dtype=np.bool_)
        #: Interned taint-set id per row; ``taint_sets[id]`` is the tuple of taints (id 0 = none).
        self.taint_set_id = np.zeros(capacity, dtype=np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.names: list[str] = [""] * capacity
        self.nodes: list[dict[str, Any]] = [{} for _ in range(capacity)]
        self.labels: list[dict[str, str]] = [{} for _ in range(capacity)]
        self.pods: list[dict[str, PodInfo]] = [{} for _ in range(capacity)]
        self.used_ports: list[dict[HostPort, int]] = [{} for _ in range(capacity)]
        #: ``bool(used_ports[row])``, kept with it (NodePorts skips rows without ports in use).
        self.has_used_ports: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.index: dict[str, int] = {}
        self._label_columns: dict[str, LabelColumn] = {}
        self._pod_node: dict[str, str] = {}
        #: Pods bound to nodes the table does not hold (yet, or any more), by node name.
        self._orphans: dict[str, dict[str, PodInfo]] = {}
        self._alive_rows: Rows | None = None
        #: The nodes in upstream's snapshot order (snapshot/node_tree.py) and the rows in it, kept
        #: until a node comes or goes.
        self.node_tree = NodeTree()
        self._search_rows: Rows | None = None
        #: Plugin-defined per-row sums over the pods on each node (e.g. underlay IPs in use).
        self._pod_columns: dict[str, tuple[Callable[[PodInfo], int], IntArray]] = {}
        #: Plugin-defined per-row values derived from the Node object (e.g. an IP budget label).
        self._node_columns: dict[str, tuple[Callable[[dict[str, Any]], int], IntArray]] = {}
        #: Observers of pod accounting, ``fn(row, pod, sign)``: called when a pod starts (+1) or
        #: stops (-1) counting on a row, and with -1/+1 when ``replace_pod`` swaps its object
        #: (snapshot/topology.py keeps per-selector pod counts this way).
        self._pod_observers: list[Callable[[int, PodInfo, int], None]] = []
        #: Indexes derived from this table (snapshot/topology.py, snapshot/affinity_index.py), by
        #: name. Kept here, not in module-level weak maps: an index refers to its table, so as a
        #: WeakKeyDictionary value it kept the table (and a finished simulation) alive forever.
        self.indexes: dict[str, Any] = {}
        #: Bumped on every change; plugins may key caches on it.
        self.generation = 0
        #: A per-row change log: ``row_versions[row]`` is the value ``row_clock`` took at the
        #: row's last change (its node, its pods, or state a snapshot index keeps for it and reports
        #: through ``touch_row``, e.g. the GPU ledger), so a reader that kept per-row values at clock
        #: c reads again only the rows above c (framework/filter_rows.py). A change to every row
        #: (a new resource column) touches every row.
        self.row_clock = 0
        self.row_versions: IntArray = np.zeros(capacity, dtype=np.int64)
        #: Bumped when a node is added or removed, or its metadata, spec or allocatable change (or
        #: a resource column appears); not when pods come and go, nor on status heartbeats:
        #: caches of verdicts that depend on Node objects alone key on it.
        self.node_generation = 0
        #: Plugin caches derived from the table (keys must name everything that invalidates them).
        self.memo: dict[Any, Any] = {}
        #: ``PodResourceRequests.key`` → (request vector, accounting delta, non-zero cpu/memory):
        #: read-only arrays shared by every pod asking the same. They derive from the amounts and
        #: the column layout alone, so ``resource_column`` (the one layout change) empties this.
        self._request_arrays: dict[tuple[object, ...], tuple[IntArray, IntArray, IntArray]] = {}
        #: status.images of every node: image name → size and holding rows (ImageLocality).
        self.images = ImageIndex()

    # -- rows -------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.index)

    def alive_rows(self) -> Rows:
        """Rows of existing nodes in scheduling order (ascending row)."""
        if self._alive_rows is None:
            self._alive_rows = np.flatnonzero(self.alive[: self._n])
        return self._alive_rows

    def search_rows(self) -> Rows:
        """Rows of existing nodes in the order a scheduling cycle walks them: upstream's
        nodeTree.list() (zones round robin, each zone's nodes in the order they came). The very
        ``alive_rows()`` array when that is the same order (one zone, no row reused out of turn)."""
        if self._search_rows is None:
            alive = self.alive_rows()
            order = self.node_tree.rows()
            self._search_rows = alive if np.array_equal(order, alive) else order
        return self._search_rows

    def row_of(self, name: str) -> int | None:
        return self.index.get(name)

    def node_names(self, rows: Iterable[int]) -> list[str]:
        names = self.names
        return [names[r] for r in rows]

    def _grow_rows(self) -> None:
        old, cap = self._cap, self._cap * 2
        self._cap = cap

        def g(a: Any, fill: Any = 0) -> Any:
            shape = (cap, *a.shape[1:])
            b = np.full(shape, fill, dtype=a.dtype)
            b[:old] = a
            return b

        def by_resource(a: IntArray) -> IntArray:
            b = np.zeros((len(a), cap), dtype=a.dtype)
            b[:, :old] = a
            return b

        self.allocatable_by_resource = by_resource(self.allocatable_by_resource)
        self.requested_by_resource = by_resource(self.requested_by_resource)
        self.available_by_resource = by_resource(self.available_by_resource)
        self.nonzero_requested_by_resource = by_resource(self.nonzero_requested_by_resource)
        self._set_row_views()
        self.alive = g(self.alive, False)
        self.unschedulable = g(self.unschedulable, False)
        self.has_used_ports = g(self.has_used_ports, False)
        self.taint_set_id = g(self.taint_set_id)
        self.row_versions = g(self.row_versions)
        more = range(cap - old)
        self.names.extend("" for _ in more)
        self.nodes.extend({} for _ in more)
        self.labels.extend({} for _ in more)
        self.pods.extend({} for _ in more)
        self.used_ports.extend({} for _ in more)
        for col in self._label_columns.values():
            col.grow(cap)
        for key, (pfn, parr) in self._pod_columns.items():
            self._pod_columns[key] = (pfn, g(parr))
        for key, (nfn, narr) in self._node_columns.items():
            self._node_columns[key] = (nfn, g(narr))

    def _set_row_views(self) -> None:
        """The (rows × resources) views of the resource-major matrices, after they are replaced."""
        self.allocatable = self.allocatable_by_resource.T
        self.requested = self.requested_by_resource.T
        self.available = self.available_by_resource.T
        self.nonzero_requested = self.nonzero_requested_by_resource.T

    def resource_column(self, name: str) -> int:
        """Column of a resource, adding one (zero allocatable everywhere) for a new extended resource."""
        col = self.resource_index.get(name)
        if col is None:
            col = len(self.resource_names)
            self.resource_names.append(name)
            self.resource_index[name] = col
            pad = np.zeros((1, self._cap), dtype=np.int64)
            self.allocatable_by_resource = np.vstack([self.allocatable_by_resource, pad])
            self.requested_by_resource = np.vstack([self.requested_by_resource, pad])
            self.available_by_resource = np.vstack([self.available_by_resource, pad])
            self._set_row_views()
            self._request_arrays.clear()  # vectors built for fewer columns
            self.generation += 1
            self.node_generation += 1
            self.touch_all_rows()
        return col

    # -- the per-row change log -------------------------------------------------------------------
    def touch_row(self, row: int) -> None:
        """Record a change to ``row`` in the per-row change log (``row_versions``)."""
        self.row_clock += 1
        self.row_versions[row] = self.row_clock

    def touch_all_rows(self) -> None:
        self.row_clock += 1
        self.row_versions[:] = self.row_clock

    # -- nodes ------------------------------------------------------------------------------------
    def upsert_node(self, raw: dict[str, Any]) -> int:
        """Add or update a v1 Node; returns its row. Raises NodeSpecError naming node and field."""
        meta = raw.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise NodeSpecError("node without metadata.name")
        status = raw.get("status") or {}
        spec = raw.get("spec") or {}
        alloc_raw = status.get("allocatable") or status.get("capacity") or {}
        if not isinstance(alloc_raw, dict):
            raise NodeSpecError(f"node {name}: status.allocatable must be a map")
        alloc = {str(k): parse_resource(name, str(k), v) for k, v in alloc_raw.items()}
        taints = parse_taints(name, spec.get("taints") or [])
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        try:
            self.images.check(self.index.get(name), status.get("images"))
        except ValueError as e:
            raise NodeSpecError(f"node {name}: {e}") from None

        row = self.index.get(name)
        new = row is None
        if row is None or node_definition_changed(self.nodes[row], raw):
            self.node_generation += 1
        if row is None:
            if self._free_rows:
                row = self._free_rows.pop()
            else:
                if self._n == self._cap:
                    self._grow_rows()
                row = self._n
                self._n += 1
            self.index[name] = row
            self.names[row] = name
            self.alive[row] = True
            self.requested[row] = 0
            self.nonzero_requested[row] = 0
            self.pods[row] = {}
            self.used_ports[row] = {}
            self.has_used_ports[row] = False
            self._alive_rows = None
            self._search_rows = None
        self.node_tree.add_or_update(row, labels)
        for res in alloc:
            self.resource_column(res)
        self.allocatable[row] = 0
        for res, amount in alloc.items():
            self.allocatable[row, self.resource_index[res]] = amount
        self.available[row] = self.allocatable[row] - self.requested[row]
        self.unschedulable[row] = bool(spec.get("unschedulable"))
        self.taint_set_id[row] = self._intern_taints(taints)
        self.nodes[row] = raw
        self.labels[row] = labels
        for key, col in self._label_columns.items():
            v = labels.get(key)
            col.codes[row] = -1 if v is None else col.code(v)
        for nfn, narr in self._node_columns.values():
            narr[row] = nfn(raw)
        self.images.set_node(row, status.get("images"))
        self.generation += 1
        self.touch_row(row)
        if new:
            for pod in self._orphans.pop(name, {}).values():
                self._account(row, pod, +1)
        return row

    def remove_node(self, name: str) -> None:
        """Remove a node. Pods still bound to it are kept aside and return with the node."""
        row = self.index.pop(name, None)
        if row is None:
            return
        if self.pods[row]:
            self._orphans[name] = dict(self.pods[row])
            for obs in self._pod_observers:
                for pod in self.pods[row].values():
                    obs(row, pod, -1)
        self.alive[row] = False
        self.names[row] = ""
        self.nodes[row] = {}
        self.labels[row] = {}
        self.pods[row] = {}
        self.used_ports[row] = {}
        self.has_used_ports[row] = False
        self.allocatable[row] = 0
        self.requested[row] = 0
        self.available[row] = 0
        self.nonzero_requested[row] = 0
        self.taint_set_id[row] = 0
        self.unschedulable[row] = False
        for col in self._label_columns.values():
            col.codes[row] = -1
        for _fn, arr in (*self._pod_columns.values(), *self._node_columns.values()):
            arr[row] = 0
        self.images.remove_node(row)
        self._free_rows.append(row)
        self._alive_rows = None
        self._search_rows = None
        self.node_tree.remove(row)
        self.generation += 1
        self.node_generation += 1
        self.touch_row(row)

    def _intern_taints(self, taints: tuple[Taint, ...]) -> int:
        tid = self._taint_set_ids.get(taints)
        if tid is None:
            tid = self._taint_set_ids[taints] = len(self.taint_sets)
            self.taint_sets.append(taints)
        return tid

    def taints(self, row: int) -> tuple[Taint, ...]:
        return self.taint_sets[int(self.taint_set_id[row])]

    def label_column(self, key: str) -> LabelColumn:
        """The indexed column for a label key, built on first use and then kept up to date."""
        col = self._label_columns.get(key)
        if col is None:
            col = LabelColumn(self._cap)
            for row in self.index.values():
                v = self.labels[row].get(key)
                if v is not None:
                    col.codes[row] = col.code(v)
            self._label_columns[key] = col
        return col

    # -- plugin-defined columns --------------------------------------------------------------------
    def register_pod_column(self, name: str, per_pod: Callable[[PodInfo], int]) -> None:
        """Maintain ``pod_column(name)[row]`` = sum of ``per_pod(pod)`` over the pods on each node.

        Kept exact through assume/forget, binds, deletes and nodes leaving and returning, and
        rebuilt from the pods already bound when registered (so a restarted scheduler counts right).
        Fetch the array with ``pod_column`` on each use: growth replaces it.
        """
        arr = np.zeros(self._cap, dtype=np.int64)
        for row in self.alive_rows():
            arr[row] = sum(per_pod(p) for p in self.pods[row].values())
        self._pod_columns[name] = (per_pod, arr)
        self.touch_all_rows()  # a value every row has now

    def pod_column(self, name: str) -> IntArray:
        return self._pod_columns[name][1]

    def add_pod_observer(self, fn: Callable[[int, PodInfo, int], None]) -> None:
        """Call ``fn(row, pod, sign)`` whenever a pod starts (+1) or stops (-1) counting on a row
        (assume, forget, bind, update, delete, a node leaving or returning), and with -1 then +1
        when ``replace_pod`` swaps an accounted pod's object. Pods already in the table are not
        replayed. ``fn`` must be cheap and must not modify the table."""
        self._pod_observers.append(fn)

    @contextlib.contextmanager
    def pod_observers_paused(self) -> Iterator[None]:
        """Pod observers are not called inside: for a caller that puts back every pod it takes off
        before leaving and reads nothing the observers keep meanwhile (preemption's batched dry
        run, whose Filters are node-local). The observers never see the round trip, so their
        indexes stay exact without the cost of two updates per pod."""
        observers = self._pod_observers
        self._pod_observers = []
        try:
            yield
        finally:
            observers.extend(self._pod_observers)  # registered meanwhile (none expected)
            self._pod_observers = observers

    def observe_pods(self, fn: Callable[[int, PodInfo, int], None]) -> None:
        """``fn(row, pod, +1)`` for every pod accounted now, then :meth:`add_pod_observer`: the one
        way an index built after pods were placed catches up and then stays exact."""
        for row in self.alive_rows().tolist():
            for pod in list(self.pods[row].values()):
                fn(row, pod, 1)
        self.add_pod_observer(fn)

    def register_node_column(self, name: str, per_node: Callable[[dict[str, Any]], int]) -> None:
        """Maintain ``node_column(name)[row]`` = ``per_node(raw Node)``, updated on every node change."""
        arr = np.zeros(self._cap, dtype=np.int64)
        for row in self.alive_rows():
            arr[row] = per_node(self.nodes[row])
        self._node_columns[name] = (per_node, arr)
        self.touch_all_rows()

    def node_column(self, name: str) -> IntArray:
        return self._node_columns[name][1]

    # -- pods -------------------------------------------------------------------------------------
    def request_vector(self, pod: PodInfo) -> IntArray:
        """The pod's requests as a read-only row aligned with the resource columns."""
        return self._account_deltas(pod)[0]

    def _account_deltas(self, pod: PodInfo) -> tuple[IntArray, IntArray, IntArray]:
        """(request vector, the same with the pod slot, non-zero cpu/memory), built once per
        distinct requests: accounting a pod is then three in-place row updates."""
        req = pod.requests
        arrays = self._request_arrays.get(req.key)
        if arrays is not None:
            return arrays
        for name in req.scalar:
            self.resource_column(name)  # may add columns (and empty the cache)
        vec = np.zeros(len(self.resource_names), dtype=np.int64)
        vec[CPU], vec[MEMORY], vec[EPHEMERAL_STORAGE] = req.milli_cpu, req.memory, req.ephemeral_storage
        for name, amount in req.scalar.items():
            vec[self.resource_index[name]] = amount
        delta = vec.copy()
        delta[PODS] += 1
        nonzero = np.array([req.non_zero_milli_cpu, req.non_zero_memory], dtype=np.int64)
        for shared in (vec, delta, nonzero):
            shared.flags.writeable = False
        if len(self._request_arrays) >= 4096:  # distinct requests are few; bound a long-lived table
            self._request_arrays.clear()
        arrays = self._request_arrays[req.key] = (vec, delta, nonzero)
        return arrays

    def _account(self, row: int, pod: PodInfo, sign: int) -> None:
        _, delta, nonzero = self._account_deltas(pod)
        # In place on row views (``m[row] += d`` writes back through __setitem__); delta spans every column.
        requested, available, nonzero_req = self.requested[row], self.available[row], self.nonzero_requested[row]
        if sign > 0:
            requested += delta
            available -= delta
            nonzero_req += nonzero
        else:
            requested -= delta
            available += delta
            nonzero_req -= nonzero
        self._account_rest(row, pod, sign)

    def _account_many(self, items: list[tuple[int, PodInfo]], sign: int) -> None:
        """``_account`` of many (row, pod) pairs, the request columns summed in one numpy pass."""
        if len(items) < 2:
            for row, pod in items:
                self._account(row, pod, sign)
            return
        deltas = [self._account_deltas(pod) for _, pod in items]
        n = len(self.resource_names)
        if any(len(d) != n for _, d, _ in deltas):  # a pod's extended resource added a column meanwhile
            for row, pod in items:
                self._account(row, pod, sign)
            return
        rows = np.fromiter((row for row, _ in items), dtype=np.intp, count=len(items))
        delta = np.stack([d for _, d, _ in deltas])
        nonzero = np.stack([z for _, _, z in deltas])
        if sign < 0:
            delta, nonzero = -delta, -nonzero
        np.add.at(self.requested[:, :n], rows, delta)
        np.subtract.at(self.available[:, :n], rows, delta)
        np.add.at(self.nonzero_requested, rows, nonzero)
        for row, pod in items:
            self._account_rest(row, pod, sign)

    def _account_rest(self, row: int, pod: PodInfo, sign: int) -> None:
        if pod.host_ports:  # without ports the row's ports, and so has_used_ports, stay as they are
            ports = self.used_ports[row]
            for hp in pod.host_ports:
                if (n := ports.get(hp, 0) + sign) > 0:
                    ports[hp] = n
                else:
                    ports.pop(hp, None)
            self.has_used_ports[row] = bool(ports)
        for pfn, parr in self._pod_columns.values():
            parr[row] += sign * pfn(pod)
        if sign > 0:
            self.pods[row][pod.uid] = pod
        else:
            self.pods[row].pop(pod.uid, None)
        for obs in self._pod_observers:
            obs(row, pod, sign)
        self.generation += 1
        self.touch_row(row)

    def add_pod(self, pod: PodInfo) -> None:
        """Account a pod bound (or assumed) to pod.node_name. Re-adding the same uid replaces it."""
        if not pod.node_name:
            raise ValueError(f"pod {pod.key} has no node to be accounted on")
        if pod.uid in self._pod_node:
            self.remove_pod(pod.uid)
        self._pod_node[pod.uid] = pod.node_name
        row = self.index.get(pod.node_name)
        if row is None:
            self._orphans.setdefault(pod.node_name, {})[pod.uid] = pod
        else:
            self._account(row, pod, +1)

    def add_pods(self, pods: Iterable[PodInfo]) -> None:
        """``add_pod`` of each (distinct uids), the requests summed into the columns in one numpy
        pass: for callers that place many pods at once (preemption's batched dry run)."""
        items: list[tuple[int, PodInfo]] = []
        for pod in pods:
            row = self.index.get(pod.node_name) if pod.node_name else None
            if row is None or pod.uid in self._pod_node:
                self.add_pod(pod)  # an orphan, a replacement or a bad pod: the general path
                continue
            self._pod_node[pod.uid] = pod.node_name
            items.append((row, pod))
        self._account_many(items, +1)

    def remove_pods(self, uids: Iterable[str]) -> list[PodInfo | None]:
        """``remove_pod`` of each (distinct uids), the requests taken off in one numpy pass."""
        items: list[tuple[int, PodInfo]] = []
        out: list[PodInfo | None] = []
        for uid in uids:
            node = self._pod_node.get(uid)
            row = self.index.get(node) if node is not None else None
            pod = self.pods[row].get(uid) if row is not None else None
            if pod is None or row is None:
                out.append(self.remove_pod(uid))
                continue
            del self._pod_node[uid]
            items.append((row, pod))
            out.append(pod)
        self._account_many(items, -1)
        return out

    def replace_pod(self, pod: PodInfo) -> None:
        """Swap in a newer object for an accounted pod whose accounting does not change."""
        row = self.index.get(pod.node_name)
        if row is None:
            self._orphans.setdefault(pod.node_name, {})[pod.uid] = pod
        else:
            old = self.pods[row].get(pod.uid)
            self.pods[row][pod.uid] = pod
            self.touch_row(row)
            if old is not None and old is not pod:
                for obs in self._pod_observers:
                    obs(row, old, -1)
                    obs(row, pod, +1)

    def remove_pod(self, uid: str) -> PodInfo | None:
        node = self._pod_node.pop(uid, None)
        if node is None:
            return None
        row = self.index.get(node)
        if row is None:
            orphans = self._orphans.get(node, {})
            pod = orphans.pop(uid, None)
            if not orphans:
                self._orphans.pop(node, None)
            return pod
        pod = self.pods[row].get(uid)
        if pod is not None:
            self._account(row, pod, -1)
        return pod

    def pod(self, uid: str) -> PodInfo | None:
        node = self._pod_node.get(uid)
        if node is None:
            return None
        row = self.index.get(node)
        if row is None:
            return self._orphans.get(node, {}).get(uid)
        return self.pods[row].get(uid)

    def all_pods(self) -> Iterator[PodInfo]:
        for row in self.alive_rows():
            yield from self.pods[row].values()

    def orphaned_pods(self) -> Iterator[PodInfo]:
        """Pods bound to nodes not in the table (they count again when their node returns)."""
        for pods in self._orphans.values():
            yield from pods.values()

    # -- views ------------------------------------------------------------------------------------
    def node_info(self, row: int) -> NodeInfo:
        return NodeInfo(self, int(row))

    def free(self, rows: Rows) -> IntArray:
        """allocatable - requested for the given rows (all resource columns)."""
        result: IntArray = self.available.take(rows, axis=0)
        return result


class NodeInfo:
    """Upstream-style view of one node for plugins that implement the per-node interface."""

    __slots__ = ("row", "table")

    def __init__(self, table: NodeTable, row: int) -> None:
        self.table = table
        self.row = row

    @property
    def name(self) -> str:
        return self.table.names[self.row]

    @property
    def node(self) -> dict[str, Any]:
        """The raw v1 Node object."""
        return self.table.nodes[self.row]

    @property
    def labels(self) -> Mapping[str, str]:
        return self.table.labels[self.row]

    @property
    def taints(self) -> tuple[Taint, ...]:
        return self.table.taints(self.row)

    @property
    def unschedulable(self) -> bool:
        return bool(self.table.unschedulable[self.row])

    @property
    def pods(self) -> list[PodInfo]:
        return list(self.table.pods[self.row].values())

    @property
    def used_ports(self) -> Mapping[HostPort, int]:
        return self.table.used_ports[self.row]

    def allocatable(self, resource: str) -> int:
        col = self.table.resource_index.get(resource)
        return 0 if col is None else int(self.table.allocatable[self.row, col])

    def requested(self, resource: str) -> int:
        col = self.table.resource_index.get(resource)
        return 0 if col is None else int(self.table.requested[self.row, col])

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r})"
