"""The upstream-style view of one node (``NodeInfo``) for plugins written in the per-node form: a
thin window on one row of the node table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubesched.snapshot.node_spec import Taint
from kubesched.snapshot.pod import HostPort, PodInfo

if TYPE_CHECKING:
    from kubesched.snapshot.table import NodeTable


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
