"""TopologyPlacementGenerator: one placement per topology domain, so a PodGroup lands in one.

Port of pkg/scheduler/framework/plugins/topologyaware/topology_placement.go (Kubernetes v1.37.1,
TopologyAwareWorkloadScheduling on). A PodGroup (or, with the CompositePodGroup gate, a
CompositePodGroup: its members are every PodGroup's under it) whose
``spec.schedulingConstraints.topology[0].key`` names a node label (e.g. a rack, an NVLink domain)
is tried on each domain of that label in turn — the nodes with that value — and on the one its
already placed members occupy when it has some; nodes without the label are in no placement. A
group without the constraint gets the parent placement (every node).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import PlacementGeneratePlugin
from kubesched.framework.podgroup import Placement, PodGroupInfo, group_key
from kubesched.framework.status import SUCCESS, Status
from kubesched.plugins.helpers.gang_members import MemberIndex

NAME = "TopologyPlacementGenerator"


def topology_key(pod_group: dict[str, Any] | None) -> str | None:
    """``spec.schedulingConstraints.topology[0].key``, None when the group has no such constraint."""
    constraints = ((pod_group or {}).get("spec") or {}).get("schedulingConstraints") or {}
    topology = constraints.get("topology") if isinstance(constraints, dict) else None
    if not isinstance(topology, list) or not topology or not isinstance(topology[0], dict):
        return None
    key = topology[0].get("key")
    return key if isinstance(key, str) and key else None


class TopologyPlacementGenerator(PlacementGeneratePlugin):
    name: ClassVar[str] = NAME

    def __init__(self, args: None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.members = MemberIndex(handle.table, handle.pending_pods, group_key)

    def generate_placements(
        self, state: CycleState, group: PodGroupInfo, parent: Placement
    ) -> tuple[list[Placement], Status]:
        key = topology_key(group.composite_pod_group if group.is_composite else group.pod_group)
        if key is None:
            return [parent], SUCCESS
        table = self.handle.table
        required: str | None = None
        placed = [pod for leaf in group.leaves() for pod in self.members.assigned_of(leaf.key).values()]
        for pod in placed:
            row = table.row_of(pod.node_name)
            if row is None:
                return [], Status.error(
                    f"cannot determine domain for already scheduled pods: getting node for pod "
                    f'{pod.namespace}/{pod.name}: node "{pod.node_name}" not found')
            domain = table.labels[row].get(key)
            if domain is None:
                return [], Status.error(
                    f"cannot determine domain for already scheduled pods: no topology domain found for pod "
                    f"{pod.namespace}/{pod.name}")
            if required is not None and required != domain:
                return [], Status.error(
                    f"cannot determine domain for already scheduled pods: more than 1 domain found for pod group: "
                    f"{required}, {domain}")
            required = domain
        by_domain: dict[str, list[int]] = {}
        for row in parent.rows.tolist():
            domain = table.labels[row].get(key)
            if domain is not None and (required is None or domain == required):
                by_domain.setdefault(domain, []).append(row)
        # Upstream ranges over a Go map (random order); kubesched goes by domain name, deterministic.
        return [Placement(d, np.array(rows, dtype=np.intp)) for d, rows in sorted(by_domain.items())], SUCCESS
