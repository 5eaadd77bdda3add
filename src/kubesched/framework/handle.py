"""What plugins get from the framework (upstream framework.Handle): the node table, the clock,
waiting pods, and the shell's cluster client for plugins that must talk to the cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
        self._activate: Callable[[Sequence[str]], None] | None = None
        self._pending: Callable[[], Iterable[PodInfo]] | None = None

    def attach_queue(
        self, activate: Callable[[Sequence[str]], None], pending: Callable[[], Iterable[PodInfo]]
    ) -> None:
        """Called by the Scheduler once its queue exists (the handle is built before the queue)."""
        self._activate = activate
        self._pending = pending

    def activate(self, uids: Sequence[str]) -> None:
        """Move the named pending pods to the active queue now (upstream PodsToActivate, used by
        Coscheduling to bring a gang's siblings back when its first member waits at Permit)."""
        if self._activate is not None and uids:
            self._activate(uids)

    def pending_pods(self) -> Iterator[PodInfo]:
        """Pods the scheduler knows of but has not placed: active, backoff, unschedulable and gated
        (not the pod of the current cycle, nor assumed pods, which are in the node table)."""
        if self._pending is not None:
            yield from self._pending()

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """Other cluster objects the shell tracks (e.g. "PodGroup"), keyed "namespace/name"."""
        return self._objects(kind) if self._objects is not None else {}
