"""PrioritySort: the default QueueSort plugin.

Port of pkg/scheduler/framework/plugins/queuesort/priority_sort.go: higher priority first, then
the pod that entered the queue earlier (QueuedPodInfo.Timestamp, not the creation time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kubesched.framework.interfaces import QueueSortPlugin
from kubesched.framework.types import ClusterEvent, QueuedPodInfo


class PrioritySort(QueueSortPlugin):
    name: ClassVar[str] = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        # corev1helpers.PodPriority: a pod without spec.priority has priority 0 (PodInfo does this).
        p1, p2 = a.pod.priority, b.pod.priority
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float]:
        """The same order as ``less``, as a tuple the queue's heap compares in C."""
        return (-qpi.pod.priority, qpi.timestamp)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # A QueueSort plugin never rejects a pod (upstream PrioritySort has no EnqueueExtensions).
        return ()
