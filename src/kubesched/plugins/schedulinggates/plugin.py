"""SchedulingGates: keep pods with ``spec.schedulingGates`` out of the active queue.

Port of pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go (v1.37.1), a PreEnqueue
plugin: the queue holds a gated pod without attempts until an update removes its last gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kubesched.framework.interfaces import PreEnqueuePlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import ClusterEvent
from kubesched.snapshot.pod import PodInfo


class SchedulingGates(PreEnqueuePlugin):
    name: ClassVar[str] = "SchedulingGates"

    def pre_enqueue(self, pod: PodInfo) -> Status:
        gates = pod.spec.get("schedulingGates")
        if not gates:
            return SUCCESS
        names = " ".join(str(g.get("name", "")) if isinstance(g, dict) else str(g) for g in gates)
        # Go's %v of a []string: "[foo bar]".
        return Status.unresolvable(f"waiting for scheduling gates: [{names}]")

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream registers only the pod's own update that removes its last gate
        # (UpdatePodSchedulingGatesEliminated); the queue checks a gated pod again on every update
        # of it, so no cluster event needs to.
        return ()
