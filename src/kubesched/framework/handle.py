"""What plugins get from the framework (upstream framework.Handle): the node table, the clock,
waiting pods, and the shell's cluster client for plugins that must talk to the cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kubesched.framework.clock import Clock
from kubesched.framework.waiting import WaitingPods
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable


class BindConflictError(Exception):
    """The pod is already bound (HTTP 409) — forget it, it is not ours to place any more."""


class PodGoneError(Exception):
    """The pod no longer exists (HTTP 404)."""


class ClusterClient(Protocol):
    """The I/O a shell provides to the core. The simulator implements it in memory."""

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        """Bind via pods/binding. Raises BindConflictError, PodGoneError or another exception."""
        ...


class Handle:
    def __init__(
        self,
        table: NodeTable,
        clock: Clock,
        waiting_pods: WaitingPods,
        client: ClusterClient | None = None,
        profile_name: str = "",
        parallelism: int = 16,
        objects: Callable[[str], Mapping[str, dict[str, Any]]] | None = None,
    ) -> None:
        self.table = table
        self.clock = clock
        self.waiting_pods = waiting_pods
        self.client = client
        self.profile_name = profile_name
        self.parallelism = parallelism
        self._objects = objects

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """Other cluster objects the shell tracks (e.g. "PodGroup"), keyed "namespace/name"."""
        return self._objects(kind) if self._objects is not None else {}
