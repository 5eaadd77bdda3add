"""DynamicResources' per-pod cycle state (upstream's ``stateData``, dynamicresources.go v1.37.1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.plugins.dynamicresources.allocator import Allocator
from kubesched.plugins.dynamicresources.extended import NodeClaim
from kubesched.plugins.dynamicresources.quick_filter import Need
from kubesched.plugins.helpers.node_selector import NodeSelector

#: Where PreFilter writes it: the plugin's name.
STATE_KEY = "DynamicResources"


@dataclass(slots=True)
class StateData:
    """stateData. Shared by clones, as upstream's (its Clone returns itself)."""

    claims: list[dict[str, Any]] = field(default_factory=list)
    #: Per claim: the allocation's node selector (allocated claims only).
    available_on: list[NodeSelector | None] = field(default_factory=list)
    #: Indexes of the claims the scheduler allocates.
    to_allocate: list[int] = field(default_factory=list)
    allocator: Allocator | None = None
    #: node name -> the allocations found there, one per claim in ``to_allocate``.
    node_allocations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Per claim: the allocation made in Reserve (None: already allocated).
    reserved: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Indexes of allocated claims whose node selector excluded some node (PostFilter's candidates).
    unavailable: set[int] = field(default_factory=set)
    #: Indexes of allocated claims whose binding failed or timed out (unavailable on every node).
    not_bindable: list[int] = field(default_factory=list)
    #: The index of the claim for DRA-backed extended resources (last, as upstream's claimStore).
    extended: int | None = None
    #: The pod's scalar requests (podScalarResources) and the extended resource -> DeviceClass map.
    extended_resources: dict[str, int] = field(default_factory=dict)
    resolver: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: node name -> that node's variant of the extended claim and its container mappings.
    node_extended: dict[str, NodeClaim] = field(default_factory=dict)
    #: The extended claim's requests per set of resources nodes must provide by DRA (node_claim).
    extended_requests: dict[Any, Any] = field(default_factory=dict)
    #: Per claim index: the uid its in-flight allocation is kept under (the extended claim's
    #: changes when PreBind creates it).
    in_flight_uid: dict[int, str] = field(default_factory=dict)
    #: quick_filter.py's needs, per variant of the claims to allocate; nodes it let through.
    needs: dict[Any, Need | None] = field(default_factory=dict)
    quick_nodes: set[str] = field(default_factory=set)

    def clone(self) -> StateData:
        return self


def read_state(state: CycleState) -> StateData | None:
    s = state.get(STATE_KEY)
    return s if isinstance(s, StateData) else None
