"""What every extender verb shares: the request's deadline, the reply, the errors the service
answers with, and the ClusterView protocol (the attached cluster as the service sees it)."""

from __future__ import annotations

import time
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.backend.cache import SchedulerCache
from kubesched.extender.wire import WireError
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.shapes import ShapeError, check_pod_shape

VERBS = ("filter", "prioritize", "preempt", "bind")
#: The verbs answered without awaiting anything (bind awaits the API server).
SYNC_VERBS = ("filter", "prioritize", "preempt")


class ServiceError(Exception):
    """A request the extender answers with an error: HTTP ``status`` and the ``Error`` message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class DeadlineExceededError(ServiceError):
    def __init__(self, verb: str, seconds: float, stage: str) -> None:
        super().__init__(504, f"kubesched extender: {verb} exceeded its {seconds:g}s deadline ({stage})")


class Deadline:
    """A per-request time budget, checked between the stages of a request (the work is synchronous
    numpy code: it cannot be interrupted, only not continued)."""

    __slots__ = ("end", "seconds", "verb")

    def __init__(self, verb: str, seconds: float) -> None:
        self.verb = verb
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def check(self, stage: str) -> None:
        if time.monotonic() > self.end:
            raise DeadlineExceededError(self.verb, self.seconds, stage)


class ClusterView(Protocol):
    """What the service needs from an attached cluster (see kubesched.extender.cluster)."""

    @property
    def cache(self) -> SchedulerCache: ...

    @property
    def synced(self) -> bool: ...

    @property
    def changes(self) -> int:
        """Bumped on every informer event that may change what a plugin reads, but the pending
        pods' (``pending_changes``): nodes, declared objects, and bound pods, except an update of
        a bound pod's status alone (a kubelet's, or the watch confirming a pod held where it was
        held), which no plugin reads. With the node table's generation and, when plugins read
        pending pods, ``pending_changes``, it says whether anything a plugin reads may have changed
        (the service's ``_version``)."""
        ...

    @property
    def pending_changes(self) -> int:
        """Bumped on every event that changes the pending pods (what ``pending_pods`` answers)."""
        ...

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """Objects the profile's plugins declared (framework/objects.py), keyed namespace/name."""
        ...

    def pending_pods(self) -> Iterator[PodInfo]:
        """Pods not yet bound: what ``handle.pending_pods()`` answers (e.g. gang members)."""
        ...

    def pending_pod(self, uid: str) -> PodInfo | None:
        """The pending pod with this UID as the pod informer parsed it, or None."""
        ...

    def next_pending(self, skip: Container[str], limit: int = 64) -> PodInfo | None:
        """The pending pod kube-scheduler most likely asks about next, not in ``skip`` (a guess)."""
        ...

    async def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str] | None = None
    ) -> None:
        """Create the pods/binding subresource, with ``annotations`` on the Binding (the apiserver
        copies them onto the pod); raise with a readable message on failure."""
        ...


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    #: For metrics: why a 200 carries an Error ("plugin", "bind", "no_cluster"), else "".
    kind: str = ""


def parse_pod(raw: dict[str, Any]) -> PodInfo:
    try:
        check_pod_shape(raw)
    except ShapeError as e:
        raise WireError(str(e)) from None
    try:
        return PodInfo.from_raw(raw)
    except Exception as e:  # PodSpecError and whatever a malformed field raises on the way
        raise WireError(f"Pod: {e}") from None
