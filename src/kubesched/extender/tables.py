"""The request-table cache (nodeCacheCapable: false): node tables built from the request's own
Node objects, each with a framework over it, kept in an LRU keyed by every node's (name,
resourceVersion) and the attached cluster's table generation, so repeated calls over the same
nodes cost a dictionary lookup. Also the latest Node object seen per name, which preempt needs
(its request carries names only)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesched.extender.requests import Deadline
from kubesched.extender.wire import WireError, type_name
from kubesched.framework.runtime import Framework
from kubesched.snapshot.shapes import ShapeError, check_node_shape
from kubesched.snapshot.table import NodeTable


@dataclass(slots=True)
class TableEntry:
    table: NodeTable
    framework: Framework


class RequestTables:
    """Node tables for requests that carry Node objects. ``live`` is the attached cluster's table
    (None without one): the pods bound to each node are copied from it into the request's table,
    so plugins that count pods per node are exact."""

    def __init__(
        self,
        build_framework: Callable[[NodeTable], Framework],
        live: Callable[[], NodeTable | None],
        *,
        cache_size: int,
        remembered_nodes: int,
    ) -> None:
        self._build_framework = build_framework
        self._live = live
        self._tables: OrderedDict[Any, TableEntry] = OrderedDict()
        self._cache_size = cache_size
        #: The latest Node object seen per name (preempt in nodeCacheCapable: false mode carries none).
        self.last_nodes: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._remembered_nodes = remembered_nodes
        self.builds = 0
        self.hits = 0

    def table_for(self, nodes: list[dict[str, Any]], deadline: Deadline) -> tuple[TableEntry, list[str]]:
        """The node table for a nodeCacheCapable: false request, and the nodes' names in order."""
        names: list[str] = []
        key_parts: list[tuple[str, str]] = []
        cacheable = True
        for i, n in enumerate(nodes):
            md = n.get("metadata")
            if not isinstance(md, dict):
                raise WireError(f"Nodes.items[{i}].metadata: expected an object, got {type_name(md)}")
            name = md.get("name")
            if not isinstance(name, str) or not name:
                raise WireError(f"Nodes.items[{i}].metadata.name: expected a non-empty string, got {name!r}")
            rv = md.get("resourceVersion")
            if not isinstance(rv, str) or not rv:
                cacheable = False
                rv = ""
            names.append(name)
            key_parts.append((name, rv))
        live = self._live()
        key: Any = None
        if cacheable:
            key = (tuple(key_parts), live.generation if live is not None else -1)
            entry = self._tables.get(key)
            if entry is not None:
                self._tables.move_to_end(key)
                self.hits += 1
                return entry, names
        table = NodeTable(capacity=max(64, len(nodes)))
        for i, n in enumerate(nodes):
            try:
                check_node_shape(n, f"Nodes.items[{i}]")
            except ShapeError as e:
                raise WireError(str(e)) from None
            try:
                table.upsert_node(n)
            except Exception as e:  # NodeSpecError, or a field of the wrong type
                raise WireError(f"Nodes.items[{i}] ({names[i]}): {e}") from None
            self._remember_node(names[i], n)
        deadline.check("building the node table")
        if live is not None:
            for name in set(names):
                row = live.row_of(name)
                if row is not None:
                    for p in live.pods[row].values():
                        table.add_pod(p)
        entry = TableEntry(table, self._build_framework(table))
        self.builds += 1
        if key is not None:
            self._tables[key] = entry
            while len(self._tables) > self._cache_size:
                self._tables.popitem(last=False)
        return entry, names

    def _remember_node(self, name: str, raw: dict[str, Any]) -> None:
        self.last_nodes[name] = raw
        self.last_nodes.move_to_end(name)
        if len(self.last_nodes) > self._remembered_nodes:
            self.last_nodes.popitem(last=False)
